/* A job in the worker's hands, and the slot it takes (--concurrency).
 *
 * Life of a job (all on the worker's one loop thread; no locks):
 *   1. dispatch.c makes it from a dispatch reply (llmq_worker_job_new) and
 *      takes a slot for it (llmq_worker_job_hold: counted in hand, and on
 *      its account's held list, whose stream entries recover.c keeps alive);
 *      a job loaded from a previous run's spool (spool.c) takes a slot with
 *      llmq_worker_job_take_spooled (not held: it has no call to protect);
 *   2. call.c owns it while its call runs (it is the HTTP callback's
 *      privdata), decides its settle (job->settle) and hands it to job_settle.c;
 *   3. job_settle.c owns it until the job_settle script answers; while Redis
 *      is away it waits on its account's settle_retry list (resent, or
 *      spooled at exit);
 *   4. once answered, job_settle.c calls llmq_worker_job_release, the one
 *      place a slot is given back and a job in hand is freed.
 * At exit main.c frees the jobs still waiting for Redis (spooled by then)
 * with llmq_worker_job_free. */
#ifndef LLMQ_WORKER_JOB_SLOT_H
#define LLMQ_WORKER_JOB_SLOT_H

#include <stdint.h>

#include "settle_request.h"

struct worker_account;
struct worker_stream;

/* One job in hand, from dispatch until its settle script has answered. */
struct worker_job {
    struct worker_job *next;                  /* in settle_retry */
    struct worker_job *held_prev, *held_next; /* in acct->held (llmq_worker_job_hold) */
    struct worker_account *acct;
    char eid[64];
    char prio[8];
    char *id, *handle, *model, *url_path, *body;
    int attempts, max_attempts;
    int64_t cost;
    int64_t est_prompt_tokens;    /* enqueue's estimate, for calibration; -1 none */
    int64_t send_by_ms;           /* llmq_monotonic_ms() past which its grant is stale and
                                     it is handed back unsent (call.c); 0: no bound */
    struct worker_settle settle;  /* the outcome to send (settle_request.h) */
    int from_spool;               /* loaded from a previous run's spool file (spool.h) */
    struct worker_stream *stream; /* a stream: true call's relay while it runs
                                     (stream_call.h); NULL otherwise */
    /* The endpoint that runs it (dispatch_reply.h; "" the implicit one),
     * owned: name, base URL, Azure api-version, deployment, and the model
     * the job asked for when a fallback model serves it ("" none). */
    char *endpoint, *base_url, *api_version, *deployment, *asked_model;
    char *lease; /* the gateway whose caller waits ("" none; owned): a stream's relay */
};

/* Returns a new, empty job of account a (no slot taken yet: fill it, then
 * hold it), or NULL without memory. */
struct worker_job *llmq_worker_job_new(struct worker_account *a);

/* Takes a slot for dispatched job and puts it on its account's held list. */
void llmq_worker_job_hold(struct worker_job *job);

/* Takes a slot for job, loaded from a spool file (not held). */
void llmq_worker_job_take_spooled(struct worker_job *job);

/* job's settle was answered: gives its slot back, frees it (takes job), and
 * lets every account dispatch again (or the drain end). */
void llmq_worker_job_release(struct worker_job *job);

/* Frees job's memory (takes it; NULL-safe) without touching the slots: for a
 * job that never took one, or at exit. */
void llmq_worker_job_free(struct worker_job *job);

#endif
