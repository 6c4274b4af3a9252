/* llmq-worker internals shared by its flows (docs/DESIGN.md §3.2-3.6):
 *   dispatch.c       asks the dispatch script for jobs the limiter admits,
 *                    and decides when to ask again (exact waits, wake-up
 *                    reads);
 *   call.c           sends each job to the API and decides its settle;
 *   job_settle.c     ends each delivery with the job_settle script;
 *   job_slot.c       owns struct worker_job and the slots (job_slot.h);
 *   settle_request.c the settle request's fields, as script arguments and
 *                    spool lines (settle_request.h);
 *   spool.c          keeps settles Redis could not take across a restart;
 *   model_state.c    what the worker keeps per (account, model):
 *                    calib_batch.c  calibration samples, written in batches,
 *                    learn_throttle.c  which responses' headers to send;
 *   recover.c        keeps this worker's deliveries alive, reclaims silent
 *                    workers' jobs, drains on SIGTERM.
 * One libev loop drives everything: hiredis async (two connections per
 * account: commands, and a blocking wake-up read) and curl multi. */
#ifndef LLMQ_WORKER_H
#define LLMQ_WORKER_H

#include <ev.h>
#include <stdint.h>

#include "config.h"
#include "redis/keys.h"
#include "redis/redis_async.h"
#include "job_slot.h"

struct llmq_http;
struct llmq_worker;
struct llmq_worker_metrics;
struct worker_relays;
struct worker_model;

/* Counters printed at exit (and later exported as metrics). */
struct llmq_worker_stats {
    int64_t dispatched, succeeded, retried, dead, rate_limited, server_errors, transport_errors,
        handed_back, tokens_reserved, tokens_used, invalid_responses, auth_refused;
};

struct worker_account {
    struct llmq_worker *w;
    const struct llmq_worker_account *cfg;
    char prefix[LLMQ_KEY_PREFIX_MAX];
    struct llmq_redis_async *cmd;    /* scripts */
    struct llmq_redis_async *wake;   /* XREAD BLOCK on the wake stream */
    int dispatching;                 /* a dispatch call is in flight */
    int wake_reading;                /* a wake-up read is in flight */
    int asked;                       /* jobs asked for by the dispatch in flight */
    int64_t asked_ms;                /* llmq_monotonic_ms() before that dispatch was sent:
                                        its grants' age counts from here (no grant is
                                        older), so no clock is compared with Redis's */
    char wake_id[64];                /* wake stream id the last dispatch saw, for the read */
    int64_t next_due_ms;             /* ms until the earliest delayed job (-1: none) */
    ev_timer wait_timer;             /* the limiter's exact wait, or a delayed job's due */
    ev_timer soon_timer;             /* coalesces dispatch requests of one loop turn */
    struct worker_job *settle_retry; /* settles to resend once Redis is back */
    /* job_settle.c: settles of this loop turn, sent together by settle_timer */
    struct worker_job *settle_queue, **settle_queue_tail;
    ev_timer settle_timer;
    struct worker_job *held; /* every job in hand, dispatch until freed: the
                                stream entries recover.c keeps alive */
    int scripts_ok; /* a dispatch was answered since the command connection came up (readyz) */
    struct worker_spool *spool; /* spool.c: files claimed at start; NULL: none */
    /* auth_pause.c: the API refused this account's key (P auth_pause). */
    int auth_paused;
    char auth_why[256];          /* for logs and /readyz; never the key */
    int64_t auth_logged_ms;      /* the last error line about it, for the reminder */
    int auth_checked;            /* account_resume ran for this process's key */
    struct worker_model *models; /* model_state.h: per-model state, owned */
};

struct llmq_worker {
    struct ev_loop *loop;
    struct llmq_worker_config *cfg;
    struct worker_account accounts[LLMQ_WORKER_MAX_ACCOUNTS];
    int n_accounts;
    struct llmq_http *http;
    int in_hand; /* jobs from dispatch until settled (job_slot.h), for --concurrency */
    int draining;
    int exit_code;
    uint64_t rng;
    int64_t last_busy_ms; /* llmq_monotonic_ms() when a job last came or went */
    ev_signal sigterm, sigint;
    ev_timer grace_timer, recover_timer, idle_timer;
    struct llmq_worker_stats stats;
    struct llmq_worker_metrics *metrics; /* metrics_worker.c; NULL: none */
    struct worker_relays *relays;        /* stream_relay.c; NULL until a stream is relayed */
};

/* dispatch.c */
void llmq_worker_dispatch_soon(struct worker_account *a);
void llmq_worker_account_start(struct worker_account *a);
void llmq_worker_account_stop(struct worker_account *a);

/* call.c: sends job (owned by the worker from now on). */
void llmq_worker_call(struct llmq_worker *w, struct worker_job *job);

/* job_settle.c: sends job's settle (job->settle decided; takes job) with
 * the others of this loop turn: kept for a resend while Redis is away,
 * released (job_slot.h) once answered. */
void llmq_worker_settle(struct worker_job *job);
/* Resends settles that failed while Redis was away. */
void llmq_worker_settle_flush(struct worker_account *a);
/* Sets up a's settle queue (before its first settle). */
void llmq_worker_settle_start(struct worker_account *a);
/* Stops a's settle timer; settles queued but not sent are kept in
 * settle_retry (for the spool). */
void llmq_worker_settle_stop(struct worker_account *a);

/* auth_pause.c: the account pause after a 401/403 (see the file comment). */
/* A call got status (401/403) with detail (the error code or message, may be
 * NULL): logs loudly once per pause. */
void llmq_worker_auth_refused(struct worker_account *a, long status, const char *detail);
/* Dispatch replied LLMQ_AUTH_PAUSED (why: its text). */
void llmq_worker_auth_paused_reply(struct worker_account *a, const char *why);
/* Dispatch answered normally: the pause, if any, is over. */
void llmq_worker_auth_ok(struct worker_account *a);
/* Once per process, on a ready command connection ac: lifts a pause that
 * names another key than this worker's. */
void llmq_worker_auth_resume_check(struct worker_account *a, redisAsyncContext *ac);

/* recover.c */
void llmq_worker_recover_start(struct llmq_worker *w);
void llmq_worker_begin_drain(struct llmq_worker *w);
/* Called whenever a job leaves the worker: stops the loop when draining and
 * nothing is left. */
void llmq_worker_check_done(struct llmq_worker *w);

#endif
