/* A job in the worker's hands, and the slot it takes (--concurrency).
 *
 * Life of a job (all on the worker's one loop thread; no locks):
 *   1. dispatch.c makes it from a dispatch reply (llmq_worker_job_new) and
 *      takes a slot for it (llmq_worker_job_hold: counted in hand, and on
 *      the held list, whose stream entries recover.c keeps alive);
 *      a job loaded from a previous run's spool (spool.c) takes a slot with
 *      llmq_worker_job_take_spooled (not held: it has no call to protect);
 *   2. call.c owns it while its call runs (it is the HTTP callback's
 *      privdata), decides its settle (job->settle) and hands it to job_settle.c;
 *   3. job_settle.c owns it until the job_settle script answers; while Redis
 *      is away it waits on its account's settle list (resent, or spooled at
 *      exit);
 *   4. once answered, job_settle.c calls llmq_worker_job_release, the one
 *      place a slot is given back and a job in hand is freed. Freeing a slot
 *      tells the slot_freed subscribers (dispatch.c: ask for more; recover.c:
 *      the drain may be over; spool.c: a replayed result was written), so
 *      this module knows nothing above it.
 * At exit main.c frees the jobs still waiting for Redis (spooled by then)
 * with llmq_worker_job_free. */
#ifndef LLMQ_WORKER_JOB_SLOT_H
#define LLMQ_WORKER_JOB_SLOT_H

#include <stdint.h>

#include "config.h"
#include "settle_outcome.h"

struct worker_account;
struct worker_job;
struct worker_stream;

/* A slot_freed subscriber: job's slot was just given back (job borrowed:
 * freed right after the subscribers ran; ctx the subscriber's). */
typedef void worker_slot_freed_fn(void *ctx, const struct worker_job *job);

/* Each account's dispatch and spool, and recover.c */
#define WORKER_SLOT_SUBSCRIBERS_MAX (2 * LLMQ_WORKER_MAX_ACCOUNTS + 1)

/* The worker's slots: one per job in hand, --concurrency of them. */
struct worker_slots {
    int in_hand;             /* jobs holding a slot; changes only in job_slot.c */
    int64_t last_busy_ms;    /* llmq_monotonic_ms() when a job last came or went */
    struct worker_job *held; /* every dispatched job in hand, until freed: the
                                stream entries recover.c keeps alive */
    struct {
        worker_slot_freed_fn *fn;
        void *ctx;
    } freed[WORKER_SLOT_SUBSCRIBERS_MAX];
    int n_freed;
};

/* Sets s up empty (last busy: now). */
void llmq_worker_slots_init(struct worker_slots *s);

/* Subscribes fn(ctx, job) to every slot given back, after those subscribed
 * before it. Returns 0, or -1 when WORKER_SLOT_SUBSCRIBERS_MAX are taken. */
int llmq_worker_slot_freed_subscribe(struct worker_slots *s, worker_slot_freed_fn *fn, void *ctx);

/* Where a job is in its life (the steps above). Every change goes through
 * llmq_worker_job_set_phase, which checks it against one table of the
 * transitions allowed (llmq_worker_job_phase_allowed):
 *   NEW      -> HELD (dispatched) | WAITING (loaded from a spool)
 *   HELD     -> CALLING (its request submitted) | DECIDED (never sent)
 *   CALLING  -> DECIDED (its call ended, the outcome decided and counted)
 *   DECIDED  -> SETTLING (queued) | RELEASED (no mode: a bug, not sent)
 *   SETTLING -> RELEASED (answered) | WAITING (Redis away)
 *   WAITING  -> SETTLING (resent) */
enum worker_job_phase {
    WORKER_JOB_NEW = 0,  /* made and filled; no slot yet */
    WORKER_JOB_HELD,     /* dispatched: holds a slot, its call not sent */
    WORKER_JOB_CALLING,  /* its HTTP call is in flight (call.c) */
    WORKER_JOB_DECIDED,  /* its outcome decided (job->settle) and counted */
    WORKER_JOB_SETTLING, /* its settle queued or sent, not answered (job_settle.c) */
    WORKER_JOB_WAITING,  /* its settle waits for Redis: resent, or spooled at exit */
    WORKER_JOB_RELEASED, /* its slot given back: freed right after */
    WORKER_JOB_PHASE_COUNT
};

/* One job in hand, from dispatch until its settle script has answered. */
struct worker_job {
    enum worker_job_phase phase;              /* llmq_worker_job_set_phase only */
    struct worker_job *next;                  /* in its account's settle lists (job_settle.c) */
    struct worker_job *held_prev, *held_next; /* in slots->held (llmq_worker_job_hold) */
    struct worker_slots *slots;               /* whose slot it takes; NULL: none */
    struct worker_account *acct;              /* borrowed: the account it belongs to */
    char eid[64];
    char prio[8];
    char *id, *handle, *model, *url_path, *body;
    int attempts, max_attempts;
    int64_t cost;
    int64_t est_prompt_tokens;    /* enqueue's estimate, for calibration; -1 none */
    int64_t send_by_ms;           /* llmq_monotonic_ms() past which its grant is stale and
                                     it is handed back unsent (call.c); 0: no bound */
    int64_t asked_ms;             /* llmq_monotonic_ms() before the dispatch call that
                                     granted it (its lateness is counted from then) */
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

/* Static name of phase ("new", "held", ...; "?" out of range). */
const char *llmq_worker_job_phase_name(enum worker_job_phase phase);

/* 1 when a job may go from phase from to phase to (the table above), else 0.
 * Pure. */
int llmq_worker_job_phase_allowed(enum worker_job_phase from, enum worker_job_phase to);

/* Moves job to phase to. A transition the table does not allow is a bug:
 * it fails an assert in a debug build, and is logged at error level (and
 * made all the same, so the job still ends) in a release build. */
void llmq_worker_job_set_phase(struct worker_job *job, enum worker_job_phase to);

/* Returns a new, empty job of account a (borrowed) that will take a slot of
 * s (no slot taken yet: fill it, then hold it), or NULL without memory. */
struct worker_job *llmq_worker_job_new(struct worker_slots *s, struct worker_account *a);

/* Takes a slot for dispatched job and puts it on the held list. */
void llmq_worker_job_hold(struct worker_job *job);

/* Takes a slot for job, loaded from a spool file (not held): it waits for
 * Redis from now on (WORKER_JOB_WAITING). */
void llmq_worker_job_take_spooled(struct worker_job *job);

/* job's settle was answered: gives its slot back, tells the slot_freed
 * subscribers, and frees it (takes job). */
void llmq_worker_job_release(struct worker_job *job);

/* Frees job's memory (takes it; NULL-safe) without touching the slots: for a
 * job that never took one, or at exit. */
void llmq_worker_job_free(struct worker_job *job);

#endif
