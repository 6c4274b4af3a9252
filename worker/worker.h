/* The worker's shared state: the process (struct llmq_worker) and each
 * account it serves (struct worker_account), which every module borrows.
 * Prototypes live in each module's own header:
 *   dispatch.h       asks the dispatch script for jobs the limiter admits,
 *                    and decides when to ask again (exact waits, wake-up
 *                    reads);
 *   call.h           sends each job to the API and decides its settle
 *                    (classify.h: what the response means);
 *   job_settle.h     ends each delivery with the job_settle script;
 *   job_slot.h       owns struct worker_job and the slots;
 *   settle_outcome.h, settle_request.h  a delivery's outcome; the settle
 *                    request's fields, as script arguments and spool lines;
 *   spool.h          keeps settles Redis could not take across a restart;
 *   auth_pause.h     the account's pause after the API refused its key;
 *   model_state.h    what the worker keeps per (account, model):
 *                    calib_batch.h  calibration samples, written in batches,
 *                    learn_throttle.h  which responses' headers to send;
 *   recover.h        keeps this worker's deliveries alive, reclaims silent
 *                    workers' jobs, drains on SIGTERM.
 * A job flows one way: dispatch -> call -> classify -> settle -> release
 * (job_slot.h), and a freed slot is told to its subscribers.
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
struct worker_job;
struct worker_relays;
struct worker_model;
struct worker_spool;
struct worker_pbatch;

/* Counters printed at exit (and later exported as metrics). */
struct llmq_worker_stats {
    int64_t dispatched, succeeded, retried, dead, rate_limited, server_errors, transport_errors,
        handed_back, tokens_reserved, tokens_used, invalid_responses, auth_refused;
    int64_t stale_pool; /* stale grants the worker's own connection pool held (a bug) */
};

/* Each module's own state in an account, a member of struct worker_account
 * that only that module touches; the others ask the module's header. */

/* dispatch.c's (dispatch.h): asking for jobs. */
struct worker_dispatch_state {
    int dispatching;     /* a dispatch call is in flight */
    int wake_reading;    /* a wake-up read is in flight */
    int asked;           /* jobs asked for by the dispatch in flight */
    int64_t asked_ms;    /* llmq_monotonic_ms() before that dispatch was sent:
                            its grants' age counts from here (no grant is
                            older), so no clock is compared with Redis's */
    char wake_id[64];    /* wake stream id the last dispatch saw, for the read */
    int64_t next_due_ms; /* ms until the earliest delayed job (-1: none) */
    ev_timer wait_timer; /* the limiter's exact wait, or a delayed job's due */
    ev_timer soon_timer; /* coalesces dispatch requests of one loop turn */
};

/* job_settle.c's (job_settle.h): settles of this loop turn, sent together
 * by timer, and those waiting for Redis. */
struct worker_settle_state {
    struct worker_job *queue, **queue_tail;
    ev_timer timer;
    struct worker_job *waiting;     /* to resend once Redis is back (or spool) */
    struct llmq_job_packer *packer; /* packs done results (created at the first) */
};

/* auth_pause.c's (auth_pause.h): the API refused this account's key (P
 * auth_pause). */
struct worker_auth_state {
    int paused;
    char why[256];     /* for logs and /readyz; never the key */
    int64_t logged_ms; /* the last error line about it, for the reminder */
    int checked;       /* account_resume ran for this process's key */
};

struct worker_account {
    /* Shared by every module: who it is (main.c) and its connections
     * (opened by dispatch.c). */
    struct llmq_worker *w;
    const struct llmq_worker_account *cfg;
    char prefix[LLMQ_KEY_PREFIX_MAX];
    struct llmq_redis_async *cmd;  /* scripts */
    struct llmq_redis_async *wake; /* XREAD BLOCK on the wake stream */
    int scripts_ok; /* a dispatch was answered since the command connection came up (readyz) */
    /* Each module's own. */
    struct worker_dispatch_state dispatch; /* dispatch.c */
    struct worker_settle_state settles;    /* job_settle.c */
    struct worker_auth_state auth;         /* auth_pause.c */
    struct worker_spool *spool;            /* spool.c: files claimed at start; NULL: none */
    struct worker_model *models;           /* model_state.c (calib_batch.c sums in its entries) */
    struct worker_pbatch *pbatch;          /* pbatch/pbatch.c: offload; NULL when not run */
};

struct llmq_worker {
    struct ev_loop *loop;
    struct llmq_worker_config *cfg;
    struct worker_account accounts[LLMQ_WORKER_MAX_ACCOUNTS];
    int n_accounts;
    struct llmq_http *http;
    struct worker_slots slots; /* job_slot.h: jobs in hand, for --concurrency */
    int draining;
    int exit_code;
    uint64_t rng;
    ev_signal sigterm, sigint;
    ev_timer grace_timer, recover_timer, idle_timer;
    ev_timer info_timer; /* once, a second after the start: P winfo (recover.c) */
    struct llmq_worker_stats stats;
    struct llmq_worker_metrics *metrics; /* metrics_worker.c; NULL: none */
    struct worker_relays *relays;        /* stream_relay.c; NULL until a stream is relayed */
    /* recover.c's llmq_worker_check_done, set by llmq_worker_recover_start
     * (NULL before): modules below recover.c tell it that something the
     * drain waits for ended, without importing it. */
    void (*check_done)(struct llmq_worker *w);
};

#endif
