/* Dispatch: ask the dispatch script for up to the free slots' worth of jobs
 * the limiter admits, start their calls, and decide when to ask again:
 *   - jobs granted and slots left: ask again at once (more may be ready);
 *   - otherwise sleep until the first of: the exact wait until the first
 *     blocked key may run (plus a little jitter, so workers do not stampede),
 *     the next delayed job's due time, or an entry in the wake stream. Every
 *     event that can shorten a wait writes one (new runnable work at any
 *     priority, a delayed job due sooner, a refund: lua/lib/sched.lua), and
 *     the blocking XREAD starts from the id the dispatch saw, so nothing that
 *     happens between the dispatch reply and the read is missed.
 * At most one dispatch call per account is in flight. */
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/clock.h"
#include "dispatch_reply.h"
#include "base/log.h"
#include "admin/metrics_worker.h"
#include "redis/keys.h"
#include "redis/script.h"
#include "auth_pause.h"
#include "call.h"
#include "dispatch.h"
#include "job_settle.h"
#include "worker.h"

#define WAKE_BLOCK_MAX_MS 5000
#define AUTH_POLL_MS 2000 /* while auth-paused (auth_pause.c): how often to ask again */

static void dispatch_now(struct worker_account *a);

/* Granted job i of dispatch reply r as a worker job; NULL when malformed. */
static struct worker_job *job_from_reply(struct worker_account *a, const redisReply *r, size_t i)
{
    struct llmq_dispatch_job d;
    if (llmq_dispatch_job_decode(r, i, &d) != 0)
        return NULL;
    struct worker_job *job = llmq_worker_job_new(&a->w->slots, a);
    if (job == NULL) {
        llmq_dispatch_job_clear(&d);
        return NULL;
    }
    memcpy(job->eid, d.eid, sizeof(job->eid));
    memcpy(job->prio, d.prio, sizeof(job->prio));
    /* The strings move into the job. */
    job->id = d.id;
    job->handle = d.handle;
    job->url_path = d.url_path;
    job->body = d.body;
    job->model = d.model;
    job->endpoint = d.endpoint;
    job->base_url = d.base_url;
    job->api_version = d.api_version;
    job->deployment = d.deployment;
    job->asked_model = d.asked_model;
    job->lease = d.lease;
    job->attempts = d.attempts;
    job->cost = d.cost;
    job->max_attempts = d.max_attempts > 0 ? d.max_attempts : a->w->cfg->max_attempts;
    job->est_prompt_tokens = d.est_prompt_tokens;
    job->send_by_ms = d.lifetime_ms > 0 ? a->dispatch.asked_ms + d.lifetime_ms : 0;
    job->asked_ms = a->dispatch.asked_ms;
    if (d.guard_ms >= 0)
        llmq_worker_metrics_guard(a, job->model, d.guard_ms);
    return job;
}

static void arm_wait(struct worker_account *a, int64_t ms)
{
    ev_timer_stop(a->w->loop, &a->dispatch.wait_timer);
    ev_timer_set(&a->dispatch.wait_timer, ms / 1000.0, 0.0);
    ev_timer_start(a->w->loop, &a->dispatch.wait_timer);
}

static void start_wake_read(struct worker_account *a, int64_t block_ms);

static void on_wake(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    const redisReply *r = reply;
    struct worker_account *a = privdata;
    a->dispatch.wake_reading = 0;
    if (a->w->draining)
        return;
    /* Nothing new within the block while a wait is planned (the wait
     * timer): that wait stands, read on. (Without one, an idle worker looks
     * again every WAKE_BLOCK_MAX_MS.) */
    if (r != NULL && r->type == REDIS_REPLY_NIL && ev_is_active(&a->dispatch.wait_timer)) {
        start_wake_read(a, WAKE_BLOCK_MAX_MS);
        return;
    }
    llmq_worker_dispatch_soon(a);
}

/* Blocks (on the wake connection) until the wake stream gets a new entry, at
 * most block_ms. */
static void start_wake_read(struct worker_account *a, int64_t block_ms)
{
    redisAsyncContext *ac = llmq_redis_async_context(a->wake);
    if (ac == NULL || a->dispatch.wake_reading)
        return;
    char block[24], key[LLMQ_KEY_PREFIX_MAX + 8];
    snprintf(block, sizeof(block), "%lld", (long long)(block_ms > 0 ? block_ms : 1));
    if (llmq_key(key, sizeof(key), a->prefix, LLMQ_KEY_WAKE, NULL, NULL) != LLMQ_OK)
        return; /* cannot happen: the prefix was checked against LLMQ_KEY_PREFIX_MAX */
    const char *argv[6] = {"XREAD", "BLOCK", block, "STREAMS", key, a->dispatch.wake_id};
    if (redisAsyncCommandArgv(ac, on_wake, a, 6, argv, NULL) == REDIS_OK)
        a->dispatch.wake_reading = 1;
}

/* What to do after a dispatch reply: see the file comment. */
static void plan_next(struct worker_account *a, size_t granted, int asked, int64_t wait_ms)
{
    struct llmq_worker *w = a->w;
    if (w->draining)
        return;
    if (granted > 0 && (int)granted == asked) {
        if (w->slots.in_hand < w->cfg->concurrency)
            llmq_worker_dispatch_soon(a);
        return; /* else a finished job asks again */
    }
    if (a->dispatch.next_due_ms == 0) {
        llmq_worker_dispatch_soon(a);
        return;
    }
    int64_t sleep_ms = -1;
    if (wait_ms > 0) {
        /* Exact wait plus up to 5% (at most 50 ms) of jitter. */
        int64_t spread = wait_ms / 20 < 50 ? wait_ms / 20 : 50;
        sleep_ms = wait_ms + llmq_rng_uniform(&w->rng, spread);
    }
    if (a->dispatch.next_due_ms > 0 && (sleep_ms < 0 || a->dispatch.next_due_ms + 1 < sleep_ms))
        sleep_ms = a->dispatch.next_due_ms + 1;
    LLMQ_LOG_JOB(LLMQ_LOG_DEBUG, a->cfg->name, NULL,
                 "dispatch: %zu of %d granted, wait %lld ms, next due %lld ms: sleeping %lld ms",
                 granted, asked, (long long)wait_ms, (long long)a->dispatch.next_due_ms,
                 (long long)sleep_ms);
    if (sleep_ms > 0)
        arm_wait(a, sleep_ms);
    /* The timer ends the wait; the read only brings a wake sooner (a read
     * already in flight keeps its own bound). */
    start_wake_read(a, WAKE_BLOCK_MAX_MS);
}

static void on_dispatch(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_account *a = privdata;
    struct llmq_worker *w = a->w;
    a->dispatch.dispatching = 0;
    if (r == NULL)
        return; /* connection lost: dispatch resumes when it is back */
    struct llmq_dispatch_head head;
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LLMQ_AUTH_PAUSED ", 17) == 0) {
        llmq_worker_auth_paused_reply(a, r->str + 17);
        arm_wait(a, AUTH_POLL_MS); /* notices `llmq account resume` */
        return;
    }
    if (llmq_dispatch_head_decode(r, &head) != 0) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL, "dispatch: %s",
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply shape");
        arm_wait(a, 1000);
        return;
    }
    int64_t wait_ms = head.wait_ms;
    a->dispatch.next_due_ms = head.next_due_ms;
    a->scripts_ok = 1;
    llmq_worker_auth_ok(a);
    if (wait_ms > 0)
        llmq_worker_metrics_wait(a, wait_ms);
    memcpy(a->dispatch.wake_id, head.wake_id, sizeof(a->dispatch.wake_id));
    size_t granted = head.n_jobs;
    for (size_t i = 0; i < head.n_jobs; i++) {
        struct worker_job *job = job_from_reply(a, r, i);
        if (job == NULL) {
            LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL,
                         "dispatch: malformed job in reply; it will be reclaimed");
            continue;
        }
        llmq_worker_job_hold(job);
        w->stats.dispatched++;
        w->stats.tokens_reserved += job->cost;
        llmq_worker_metrics_dispatched(w, job);
        LLMQ_LOG_JOB(LLMQ_LOG_DEBUG, a->cfg->name, job->id,
                     "dispatched: %s, priority %s, attempt %d of %d, %lld tokens reserved",
                     job->model, job->prio, job->attempts, job->max_attempts, (long long)job->cost);
        llmq_worker_call(w, job);
    }
    plan_next(a, granted, a->dispatch.asked, wait_ms);
}

static void dispatch_now(struct worker_account *a)
{
    struct llmq_worker *w = a->w;
    int free_slots = w->cfg->concurrency - w->slots.in_hand;
    redisAsyncContext *ac = llmq_redis_async_context(a->cmd);
    if (w->draining || a->dispatch.dispatching || free_slots <= 0 || ac == NULL)
        return;
    /* Results redis has not taken are held in memory: past the bound, take
     * no new work until they are written (settle_flush dispatches again). */
    int waiting = llmq_worker_settle_waiting(a);
    if (waiting > 0 && waiting >= w->cfg->spool_max_jobs)
        return;
    ev_timer_stop(w->loop, &a->dispatch.wait_timer);
    int max = free_slots < 256 ? free_slots : 256;
    char max_s[16];
    snprintf(max_s, sizeof(max_s), "%d", max);
    /* ARGV[3]: the endpoints this worker holds keys for (config.h serves). */
    const char *argv[4] = {a->prefix, w->cfg->consumer, max_s, w->cfg->serves};
    a->dispatch.asked_ms = llmq_monotonic_ms();
    if (llmq_script_run_async(ac, LLMQ_SCRIPT_DISPATCH, 1, 4, argv, NULL, on_dispatch, a) ==
        LLMQ_OK) {
        a->dispatch.dispatching = 1;
        a->dispatch.asked = max;
    }
}

static void on_soon(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    dispatch_now((struct worker_account *)t->data);
}

static void on_wait_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    dispatch_now((struct worker_account *)t->data);
}

void llmq_worker_dispatch_soon(struct worker_account *a)
{
    if (!ev_is_active(&a->dispatch.soon_timer)) {
        ev_timer_set(&a->dispatch.soon_timer, 0.0, 0.0);
        ev_timer_start(a->w->loop, &a->dispatch.soon_timer);
    }
}

void llmq_worker_dispatch_halt(struct worker_account *a)
{
    ev_timer_stop(a->w->loop, &a->dispatch.wait_timer);
    ev_timer_stop(a->w->loop, &a->dispatch.soon_timer);
}

int llmq_worker_dispatch_waiting(const struct worker_account *a)
{
    return a->dispatch.next_due_ms >= 0 || a->dispatch.dispatching ||
           ev_is_active(&a->dispatch.wait_timer);
}

/* A slot was given back (job_slot.h): a may ask for more. */
static void on_slot_freed(void *ctx, const struct worker_job *job)
{
    (void)job;
    llmq_worker_dispatch_soon(ctx);
}

static void on_cmd_state(struct llmq_redis_async *ra, int ready, void *privdata)
{
    struct worker_account *a = privdata;
    a->scripts_ok = 0; /* until a dispatch is answered on this connection */
    if (!ready)
        return;
    /* Before the first dispatch on this connection (one connection keeps
     * the order): a pause for a key this worker does not hold is lifted. */
    llmq_worker_auth_resume_check(a, llmq_redis_async_context(ra));
    llmq_worker_settle_flush(a);
    llmq_worker_dispatch_soon(a);
}

static void on_wake_state(struct llmq_redis_async *ra, int ready, void *privdata)
{
    (void)ra;
    struct worker_account *a = privdata;
    if (!ready)
        a->dispatch.wake_reading = 0;
    else
        llmq_worker_dispatch_soon(a);
}

void llmq_worker_account_start(struct worker_account *a)
{
    struct llmq_worker *w = a->w;
    struct llmq_error err = {0};
    snprintf(a->dispatch.wake_id, sizeof(a->dispatch.wake_id), "$");
    a->dispatch.next_due_ms = -1;
    ev_timer_init(&a->dispatch.wait_timer, on_wait_timer, 0.0, 0.0);
    a->dispatch.wait_timer.data = a;
    ev_timer_init(&a->dispatch.soon_timer, on_soon, 0.0, 0.0);
    a->dispatch.soon_timer.data = a;
    llmq_worker_settle_start(a);
    if (llmq_worker_slot_freed_subscribe(&w->slots, on_slot_freed, a) != 0)
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL,
                     "dispatch: no slot subscriber left; asking only on its own timers");
    struct llmq_redis_async_config rc = {.name = "worker",
                                         .command_timeout_ms = w->cfg->redis_timeout_ms};
    /* On a cluster, both connections go to the node of this account's slot
     * (a node down stops only the accounts it serves). */
    struct llmq_redis_url url = w->cfg->redis;
    llmq_redis_url_route(&url, a->cfg->name);
    a->cmd = llmq_redis_async_new(w->loop, &url, &rc, on_cmd_state, a, &err);
    struct llmq_redis_async_config wc = {.name = "worker-wake",
                                         .command_timeout_ms = w->cfg->redis_timeout_ms,
                                         .block_ms = WAKE_BLOCK_MAX_MS};
    a->wake = llmq_redis_async_new(w->loop, &url, &wc, on_wake_state, a, &err);
    memset(&url, 0, sizeof(url)); /* the password */
}

void llmq_worker_account_stop(struct worker_account *a)
{
    llmq_worker_dispatch_halt(a);
    llmq_worker_settle_stop(a);
    llmq_redis_async_free(a->wake);
    a->wake = NULL;
    llmq_redis_async_free(a->cmd);
    a->cmd = NULL;
}
