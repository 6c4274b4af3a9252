/* Recovery and shutdown (docs/DESIGN.md §3.6).
 * - Every third of the visibility timeout this worker re-claims its own
 *   in-flight stream entries (XCLAIM ... JUSTID resets their idle time, so a
 *   slow but live request is never taken away) and runs the reclaim script,
 *   which requeues entries idle past the visibility timeout: their worker is
 *   gone.
 * - SIGTERM/SIGINT: stop asking for jobs, let calls in flight finish within
 *   the grace period, then cancel the rest, which are handed back untried;
 *   the loop ends once every settle has been answered and the calibration
 *   samples are written (calib_batch.h). A second SIGTERM or
 *   SIGINT during the grace period cancels and hands back at once. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "base/clock.h"
#include "base/log.h"
#include "redis/keys.h"
#include "redis/script.h"
#include "auth_pause.h"
#include "calib_batch.h"
#include "dispatch.h"
#include "job_settle.h"
#include "recover.h"
#include "worker.h"
#include "llmq/priority.h"

static void on_reclaimed(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_account *a = privdata;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL, "reclaimed %lld jobs from silent workers",
                     r->integer);
        llmq_worker_dispatch_soon(a);
    } else if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL, "reclaim: %s", r->str);
    }
}

/* Resets the idle time of the stream entries of the jobs this worker holds
 * (XCLAIM to ourselves, JUSTID: no delivery counted), so a slow but live
 * call is never reclaimed. Only entries of jobs in hand: an entry delivered
 * to us whose dispatch reply was lost with the connection is not ours to
 * keep, and the reclaim script gives it to someone after the visibility
 * timeout. */
static void refresh_held(struct worker_account *a, redisAsyncContext *ac)
{
    enum { CHUNK = 256 };
    const char *argv[6 + CHUNK];
    for (int p = 0; p < LLMQ_PRIORITY_COUNT; p++) {
        const char *prio = llmq_priority_name(llmq_priority_by_rank(p));
        char key[LLMQ_KEY_FIXED_MAX];
        if (llmq_key(key, sizeof(key), a->prefix, LLMQ_KEY_QUEUE, prio, NULL) != LLMQ_OK)
            continue; /* cannot happen: the prefix fits LLMQ_KEY_PREFIX_MAX */
        argv[0] = "XCLAIM";
        argv[1] = key;
        argv[2] = LLMQ_GROUP;
        argv[3] = a->w->cfg->consumer;
        argv[4] = "0";
        int n = 5;
        for (struct worker_job *j = a->w->slots.held; j != NULL; j = j->held_next) {
            if (j->acct != a || strcmp(j->prio, prio) != 0)
                continue;
            argv[n++] = j->eid;
            if (n == 5 + CHUNK) {
                argv[n++] = "JUSTID";
                redisAsyncCommandArgv(ac, NULL, NULL, n, argv, NULL);
                n = 5;
            }
        }
        if (n > 5) {
            argv[n++] = "JUSTID";
            redisAsyncCommandArgv(ac, NULL, NULL, n, argv, NULL);
        }
    }
}

static void on_recover_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_worker *w = t->data;
    if (w->draining)
        return;
    char idle[24];
    snprintf(idle, sizeof(idle), "%lld", (long long)w->cfg->visibility_ms);
    for (int i = 0; i < w->n_accounts; i++) {
        struct worker_account *a = &w->accounts[i];
        redisAsyncContext *ac = llmq_redis_async_context(a->cmd);
        if (ac == NULL)
            continue;
        refresh_held(a, ac);
        /* with what this worker is, for the dashboard (P winfo) */
        const char *argv[5] = {a->prefix, w->cfg->consumer, idle, LLMQ_VERSION, w->cfg->serves};
        llmq_script_run_async(ac, LLMQ_SCRIPT_RECLAIM, 1, 5, argv, NULL, on_reclaimed, a);
    }
}

/* What this worker is, once a second after its start (P winfo, keys.h: its
 * version and the endpoints it serves), so the dashboard and `llmq status`
 * show it from the start; its reclaim writes the same every third of the
 * visibility timeout (lua/reclaim.lua), which also puts it back after a
 * Redis restart. A plain HSET, not a script: an idle worker's script calls
 * stay its dispatches (tests/integration/endpoints_idle.c counts them). An
 * account not connected yet gets it from its first reclaim. */
static void on_info_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_worker *w = t->data;
    json_t *eps = json_array();
    const char *s = w->cfg->serves;
    for (;;) { /* as dispatch.lua reads it: '' the implicit endpoint */
        const char *comma = strchr(s, ',');
        size_t n = comma != NULL ? (size_t)(comma - s) : strlen(s);
        json_array_append_new(eps, json_stringn(s, n));
        if (comma == NULL)
            break;
        s = comma + 1;
    }
    json_t *info = json_pack("{s:s, s:o}", "version", LLMQ_VERSION, "endpoints", eps);
    char *text = info != NULL ? json_dumps(info, JSON_COMPACT) : NULL;
    json_decref(info);
    for (int i = 0; text != NULL && i < w->n_accounts; i++) {
        redisAsyncContext *ac = llmq_redis_async_context(w->accounts[i].cmd);
        char key[LLMQ_KEY_FIXED_MAX];
        if (ac != NULL && llmq_key(key, sizeof(key), w->accounts[i].prefix, LLMQ_KEY_WORKER_INFO,
                                   NULL, NULL) == LLMQ_OK)
            redisAsyncCommand(ac, NULL, NULL, "HSET %s %s %s", key, w->cfg->consumer, text);
    }
    free(text);
}

static void on_idle_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct llmq_worker *w = t->data;
    int64_t quiet = llmq_monotonic_ms() - w->slots.last_busy_ms;
    int waiting = 0;
    for (int i = 0; i < w->n_accounts; i++)
        waiting |= llmq_worker_auth_pause_why(&w->accounts[i]) == NULL && /* polls for a resume,
                                                                              but has no work */
                   llmq_worker_dispatch_waiting(&w->accounts[i]);
    if (w->slots.in_hand == 0 && !waiting && quiet >= w->cfg->exit_when_idle_ms) {
        /* Idle because Redis never answered is no clean batch run: the jobs
         * were never looked at. */
        for (int i = 0; i < w->n_accounts; i++) {
            const struct worker_account *a = &w->accounts[i];
            if (!llmq_redis_async_ever_ready(a->cmd)) {
                const char *why = llmq_redis_async_last_error(a->cmd);
                LLMQ_LOG(LLMQ_LOG_ERROR, "never reached redis for account %s in %lld ms: %s",
                         a->cfg->name, (long long)quiet, why[0] ? why : "no answer yet");
                w->exit_code = 1;
            } else if (llmq_worker_auth_pause_why(a) != NULL) {
                LLMQ_LOG(LLMQ_LOG_ERROR,
                         "exiting with account %s paused (%s): its jobs stay queued", a->cfg->name,
                         llmq_worker_auth_pause_why(a));
                w->exit_code = 1;
            }
        }
        LLMQ_LOG(LLMQ_LOG_INFO, "idle for %lld ms: exiting", (long long)quiet);
        llmq_worker_begin_drain(w);
        ev_timer_stop(loop, t);
    }
}

void llmq_worker_check_done(struct llmq_worker *w)
{
    if (!w->draining || w->slots.in_hand > 0)
        return;
    for (int i = 0; i < w->n_accounts; i++)
        if (llmq_worker_settle_waiting(&w->accounts[i]) > 0)
            return; /* results still to write: wait for Redis (until the grace ends) */
    /* The exit flush of calibration samples (calib_batch.h): their replies
     * call back here. */
    int unanswered = 0;
    for (int i = 0; i < w->n_accounts; i++)
        unanswered += llmq_worker_calib_flush(&w->accounts[i]);
    if (unanswered > 0)
        return;
    ev_break(w->loop, EVBREAK_ALL);
}

/* Ends the drain now: calls in flight are cancelled and handed back, and the
 * loop stops once their settles are answered (or at once when Redis is
 * away: their results go to the spool). why names the cause for the log. */
static void stop_now(struct llmq_worker *w, const char *why)
{
    ev_timer_stop(w->loop, &w->grace_timer);
    LLMQ_LOG(LLMQ_LOG_WARN, "%s: handing back the calls in flight (%d jobs in hand)", why,
             w->slots.in_hand);
    /* Cancelled calls are handed back (call.c) by their callbacks, now. */
    struct llmq_http *http = w->http;
    w->http = NULL;
    llmq_http_free(http);
    int unsettled = 0;
    for (int i = 0; i < w->n_accounts; i++)
        unsettled |= llmq_worker_settle_waiting(&w->accounts[i]) > 0;
    if (unsettled) {
        LLMQ_LOG(LLMQ_LOG_ERROR, "redis unreachable when stopping: results of "
                                 "finished jobs go to the spool (--spool-dir) for the next "
                                 "start");
        ev_break(w->loop, EVBREAK_ALL);
    }
    llmq_worker_check_done(w);
}

static void on_grace_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    stop_now(t->data, "grace period over");
}

void llmq_worker_begin_drain(struct llmq_worker *w)
{
    if (w->draining)
        return;
    w->draining = 1;
    LLMQ_LOG(LLMQ_LOG_INFO, "draining: %d jobs in hand, grace %lld ms", w->slots.in_hand,
             (long long)w->cfg->grace_ms);
    for (int i = 0; i < w->n_accounts; i++)
        llmq_worker_dispatch_halt(&w->accounts[i]);
    ev_timer_stop(w->loop, &w->recover_timer);
    ev_timer_stop(w->loop, &w->info_timer);
    ev_timer_stop(w->loop, &w->idle_timer);
    ev_timer_set(&w->grace_timer, w->cfg->grace_ms / 1000.0, 0.0);
    ev_timer_start(w->loop, &w->grace_timer);
    llmq_worker_check_done(w);
}

static void on_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_worker *w = s->data;
    /* A second SIGINT/SIGTERM while draining (a second Ctrl-C): the operator
     * will not wait for the grace period. */
    if (w->draining) {
        char why[64];
        snprintf(why, sizeof(why), "signal %d again: stopping now", s->signum);
        stop_now(w, why);
        return;
    }
    LLMQ_LOG(LLMQ_LOG_INFO, "signal %d: stopping (again to stop at once)", s->signum);
    llmq_worker_begin_drain(w);
}

/* A slot was given back (job_slot.h): the drain may be over. */
static void on_slot_freed(void *ctx, const struct worker_job *job)
{
    (void)job;
    llmq_worker_check_done(ctx);
}

void llmq_worker_recover_start(struct llmq_worker *w)
{
    w->check_done = llmq_worker_check_done;
    if (llmq_worker_slot_freed_subscribe(&w->slots, on_slot_freed, w) != 0)
        LLMQ_LOG(LLMQ_LOG_ERROR, "recover: no slot subscriber left; the drain ends at its grace");
    ev_signal_init(&w->sigterm, on_signal, SIGTERM);
    w->sigterm.data = w;
    ev_signal_start(w->loop, &w->sigterm);
    ev_signal_init(&w->sigint, on_signal, SIGINT);
    w->sigint.data = w;
    ev_signal_start(w->loop, &w->sigint);
    ev_timer_init(&w->grace_timer, on_grace_timer, 0.0, 0.0);
    w->grace_timer.data = w;
    double every = w->cfg->visibility_ms / 3000.0;
    ev_timer_init(&w->recover_timer, on_recover_timer, every, every);
    w->recover_timer.data = w;
    ev_timer_start(w->loop, &w->recover_timer);
    ev_timer_init(&w->info_timer, on_info_timer, 1.0, 0.0);
    w->info_timer.data = w;
    ev_timer_start(w->loop, &w->info_timer);
    if (w->cfg->exit_when_idle_ms > 0) {
        double check = w->cfg->exit_when_idle_ms / 4000.0;
        ev_timer_init(&w->idle_timer, on_idle_timer, check, check);
        w->idle_timer.data = w;
        ev_timer_start(w->loop, &w->idle_timer);
    }
}
