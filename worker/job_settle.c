/* Ends deliveries with the job_settle script (lua/job_settle.lua): one
 * atomic step per delivery that acknowledges the stream entry, stores the
 * result or requeues or dead-letters the job, settles or refunds the
 * reservation, and teaches the model bucket from the response headers.
 *
 * The settles of one loop turn go together, in one script call of up to
 * SETTLE_BATCH_MAX deliveries: a zero-delay timer sends them once the turn's
 * callbacks have run (no delivery waits for another turn). Under load many
 * calls end in one turn, and one call for all of them costs Redis far less
 * CPU than one call each (docs/BENCHMARKS.md, "Redis CPU per job"); at low rates a turn
 * holds one settle and nothing changes.
 *
 * A settle whose reply is lost with the connection is kept and sent again
 * when Redis is back: a result, once the API returned it, is never dropped.
 *
 * A done job's output line goes packed (jobs/job_pack.h): it is kept as
 * the job's ended record for result_ttl_ms, and packing keeps that within
 * the line's own bytes (docs/operations.md "Sizing Redis"). The job keeps the text (the
 * spool writes it as JSON); the packed copy lives only while the call is
 * sent. A dead job's line goes as text: the script reads its error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "jobs/job_pack.h"
#include "redis/script.h"
#include "admin/metrics_worker.h"
#include "job_settle.h"
#include "settle_request.h"
#include "worker.h"

/* Deliveries per script call at most (22 arguments each). */
#define SETTLE_BATCH_MAX 64

/* One script call's deliveries, kept until its reply. */
struct settle_call {
    struct worker_account *acct;
    int n;
    struct worker_job *jobs[SETTLE_BATCH_MAX];
};

static void keep_for_retry(struct worker_job *job)
{
    llmq_worker_job_set_phase(job, WORKER_JOB_WAITING);
    llmq_worker_settle_keep(job);
}

/* Moves every settle queued and not sent to those waiting (resent when the
 * next dispatch flushes it, or spooled at exit). */
static void keep_queued_for_retry(struct worker_account *a)
{
    while (a->settles.queue != NULL) {
        struct worker_job *job = a->settles.queue;
        a->settles.queue = job->next;
        keep_for_retry(job);
    }
    a->settles.queue_tail = &a->settles.queue;
}

/* The values of one delivery in the script's reply: owned, finished, moved. */
#define SETTLE_REPLY_VALUES 3

/* finished, in the script's reply: what the settle stored */
enum settle_finished {
    SETTLE_STORED_NOTHING = 0, /* retry, handback, or the job had ended already */
    SETTLE_STORED_RESULT = 1,  /* its result (done; a synchronous call's dead end) */
    SETTLE_STORED_DEAD = 2,    /* its result and its dead letter (an entry of P dead) */
};

/* What became of job's delivery, once its settle said (moved: the settle
 * sent it back to the queue at once for another endpoint of its model, the
 * attempt uncounted, instead of the retry or dead letter the call's result
 * alone asked for; finished: what it stored): logged only now, so a failover
 * is not logged as a retry with its attempt number, and a dead letter is
 * logged and counted only when it was written — not for a job cancelled or
 * ended by another delivery meanwhile, or a failover. */
static void log_fate(struct worker_job *job, int moved, long long finished)
{
    const char *acct = job->acct->cfg->name;
    const struct worker_settle *st = &job->settle;
    if (moved) {
        static const char exhausted[] = "attempts_exhausted: ";
        const char *why = st->reason;
        if (strncmp(why, exhausted, sizeof(exhausted) - 1) == 0)
            why += sizeof(exhausted) - 1;
        LLMQ_LOG_JOB(LLMQ_LOG_INFO, acct, job->id,
                     "failed over from endpoint %s to the model's other endpoints (not counted "
                     "as an attempt): %s",
                     job->endpoint != NULL ? job->endpoint : "", why);
        if (st->mode == WORKER_SETTLE_DEAD)
            job->acct->w->stats.retried++; /* in the summary, the retry it became */
    } else if (st->mode == WORKER_SETTLE_RETRY) {
        LLMQ_LOG_JOB(LLMQ_LOG_INFO, acct, job->id, "retry (attempt %d of %d) in %lld ms: %s",
                     job->attempts + 1, job->max_attempts, (long long)st->delay_ms, st->reason);
    } else if (st->mode == WORKER_SETTLE_DEAD && finished == SETTLE_STORED_DEAD) {
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, acct, job->id, "dead-lettered: %s", st->reason);
        llmq_worker_count_dead_letter(job->acct->w, job);
    } else if (st->mode == WORKER_SETTLE_DEAD && finished == SETTLE_STORED_RESULT) {
        LLMQ_LOG_JOB(LLMQ_LOG_INFO, acct, job->id,
                     "ended dead, kept out of the dead letters (a gateway's synchronous call, "
                     "its caller answered): %s",
                     st->reason);
    } else if (st->mode == WORKER_SETTLE_DEAD) {
        LLMQ_LOG_JOB(LLMQ_LOG_INFO, acct, job->id,
                     "not dead-lettered: the job had ended meanwhile (cancelled, or finished "
                     "by another delivery); the call's end was: %s",
                     st->reason);
    }
}

/* The end of one delivery's settle: r is the reply of the call it went in
 * (its {owned, finished, moved} values; this delivery's from index at), an
 * error reply, or NULL (connection lost). */
static void settled(struct worker_job *job, const redisReply *r, size_t at)
{
    if (r == NULL) {
        keep_for_retry(job);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, job->acct->cfg->name, job->id, "settle failed: %s", r->str);
    } else {
        const redisReply *fin =
            r->type == REDIS_REPLY_ARRAY && at + 1 < r->elements ? r->element[at + 1] : NULL;
        const redisReply *moved =
            r->type == REDIS_REPLY_ARRAY && at + 2 < r->elements ? r->element[at + 2] : NULL;
        log_fate(job, moved != NULL && moved->type == REDIS_REPLY_INTEGER && moved->integer == 1,
                 fin != NULL && fin->type == REDIS_REPLY_INTEGER ? fin->integer : 0);
        LLMQ_LOG_JOB(LLMQ_LOG_DEBUG, job->acct->cfg->name, job->id, "settled: %s%s%s",
                     llmq_worker_settle_mode_name(job->settle.mode),
                     job->settle.reason[0] ? " " : "", job->settle.reason);
    }
    llmq_worker_job_release(job);
}

static void on_settled(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct settle_call *call = privdata;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY &&
        r->elements != SETTLE_REPLY_VALUES * (size_t)call->n) {
        LLMQ_LOG(LLMQ_LOG_ERROR, "settle of %d deliveries: %zu values in the reply", call->n,
                 r->elements);
    }
    for (int i = 0; i < call->n; i++)
        settled(call->jobs[i], r, SETTLE_REPLY_VALUES * (size_t)i);
    free(call);
}

/* The argument of job's output line at argv[0] (and its length at *len):
 * a done job's packed into *packed (new; NULL when it is sent as it is:
 * short, or packing did not shrink it, or memory ran out, which only costs
 * bytes). */
static void line_arg(struct worker_account *a, const struct worker_job *job, const char **argv,
                     size_t *len, char **packed)
{
    *packed = NULL;
    *len = strlen(argv[0]);
    if (job->settle.mode != WORKER_SETTLE_DONE || job->settle.line == NULL)
        return;
    if (a->settles.packer == NULL)
        a->settles.packer = llmq_job_packer_new();
    size_t n = 0;
    if (a->settles.packer != NULL &&
        llmq_job_packer_pack(a->settles.packer, job->settle.line, *len, packed, &n, NULL) ==
            LLMQ_OK &&
        *packed != NULL) {
        argv[0] = *packed;
        *len = n;
    }
}

/* The ARGV index of the output line (the settle field table's "line"). */
static int line_argv(void)
{
    static int at = 0;
    for (int i = 1; at == 0 && i < LLMQ_WORKER_SETTLE_ARGC; i++)
        if (strcmp(llmq_worker_settle_argv_name(i), "line") == 0)
            at = i;
    return at;
}

/* Sends call's deliveries as one script call; on failure each is kept for a
 * resend. Frees call unless it was sent. */
static void settle_send(struct settle_call *call)
{
    struct worker_account *a = call->acct;
    const int per = LLMQ_WORKER_SETTLE_ARGC - 1; /* ARGV values of one delivery */
    const int line_at = line_argv();
    size_t total = 1 + (size_t)call->n * per;
    struct worker_settle_argv *args = malloc((size_t)call->n * sizeof(*args));
    const char **argv = malloc(total * sizeof(*argv));
    size_t *lens = malloc(total * sizeof(*lens));
    char *packed[SETTLE_BATCH_MAX] = {NULL};
    redisAsyncContext *ac = llmq_redis_async_context(a->cmd);
    int argc = 1, ok = args != NULL && argv != NULL && lens != NULL && ac != NULL;
    for (int i = 0; ok && i < call->n; i++) {
        ok = llmq_worker_settle_argv(call->jobs[i], a->prefix, a->cfg->key_id, &args[i]) ==
             LLMQ_WORKER_SETTLE_ARGC;
        memcpy(&argv[argc], &args[i].argv[1], (size_t)per * sizeof(*argv));
        for (int k = 0; ok && k < per; k++)
            lens[argc + k] = k + 1 == line_at ? 0 : strlen(argv[argc + k]);
        if (ok)
            line_arg(a, call->jobs[i], &argv[argc + line_at - 1], &lens[argc + line_at - 1],
                     &packed[i]);
        argc += per;
    }
    if (ok) {
        argv[0] = a->prefix;
        lens[0] = strlen(a->prefix);
        /* (hiredis copies the arguments into its buffer: the packed lines
         * can go once this returns) */
        ok = llmq_script_run_async(ac, LLMQ_SCRIPT_JOB_SETTLE, 1, argc, argv, lens, on_settled,
                                   call) == LLMQ_OK;
    }
    for (int i = 0; i < call->n; i++)
        free(packed[i]);
    free(lens);
    free(argv);
    free(args);
    if (!ok) {
        for (int i = 0; i < call->n; i++)
            keep_for_retry(call->jobs[i]);
        free(call);
    }
}

/* Sends every settle queued this turn, SETTLE_BATCH_MAX per call. */
static void settle_send_queued(struct worker_account *a)
{
    while (a->settles.queue != NULL) {
        struct settle_call *call = malloc(sizeof(*call));
        if (call == NULL) {
            keep_queued_for_retry(a); /* no memory: resend later, as after a lost connection */
            return;
        }
        call->acct = a;
        call->n = 0;
        while (a->settles.queue != NULL && call->n < SETTLE_BATCH_MAX) {
            struct worker_job *job = a->settles.queue;
            a->settles.queue = job->next;
            job->next = NULL;
            call->jobs[call->n++] = job;
        }
        settle_send(call);
    }
    a->settles.queue_tail = &a->settles.queue;
}

static void on_settle_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    settle_send_queued(t->data);
}

void llmq_worker_settle_start(struct worker_account *a)
{
    a->settles.queue = NULL;
    a->settles.queue_tail = &a->settles.queue;
    ev_timer_init(&a->settles.timer, on_settle_timer, 0.0, 0.0);
    a->settles.timer.data = a;
}

void llmq_worker_settle_stop(struct worker_account *a)
{
    ev_timer_stop(a->w->loop, &a->settles.timer);
    keep_queued_for_retry(a); /* not sent before the loop stopped: the spool takes them */
}

void llmq_worker_settle(struct worker_job *job)
{
    struct worker_account *a = job->acct;
    if (llmq_worker_settle_mode_name(job->settle.mode) == NULL) {
        /* A flow ended a job without deciding how: a bug, not a request
         * to send or to spool. Its stream entry stays pending and is
         * reclaimed after the visibility timeout. */
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, job->id, "settle without a mode: not sent");
        llmq_worker_job_release(job);
        return;
    }
    llmq_worker_job_set_phase(job, WORKER_JOB_SETTLING);
    job->next = NULL;
    *a->settles.queue_tail = job;
    a->settles.queue_tail = &job->next;
    if (!ev_is_active(&a->settles.timer)) {
        ev_timer_set(&a->settles.timer, 0.0, 0.0);
        ev_timer_start(a->w->loop, &a->settles.timer);
    }
}

int llmq_worker_settle_waiting(const struct worker_account *a)
{
    int n = 0;
    for (const struct worker_job *j = a->settles.waiting; j != NULL; j = j->next)
        n++;
    return n;
}

const struct worker_job *llmq_worker_settle_waiting_first(const struct worker_account *a)
{
    return a->settles.waiting;
}

void llmq_worker_settle_keep(struct worker_job *job)
{
    job->next = job->acct->settles.waiting;
    job->acct->settles.waiting = job;
}

void llmq_worker_settle_free(struct worker_account *a)
{
    llmq_job_packer_free(a->settles.packer);
    a->settles.packer = NULL;
    while (a->settles.waiting != NULL) {
        struct worker_job *j = a->settles.waiting;
        a->settles.waiting = j->next;
        llmq_worker_job_free(j);
    }
}

void llmq_worker_settle_flush(struct worker_account *a)
{
    struct worker_job *list = a->settles.waiting;
    a->settles.waiting = NULL;
    while (list != NULL) {
        struct worker_job *job = list;
        list = job->next;
        job->next = NULL;
        llmq_worker_settle(job);
    }
}
