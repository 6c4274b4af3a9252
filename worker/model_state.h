/* What one worker keeps in memory per (account, model), for as long as it
 * runs: the calibration samples it has not written yet (calib_batch.h) and
 * when it last sent a response's x-ratelimit-* headers to a settle
 * (learn_throttle.h). Nothing here is shared: each process starts empty.
 *
 * An account's models are a list (struct worker_account.models) of entries
 * created on first use and freed at exit (llmq_worker_models_free, after
 * the account's Redis connections are freed: their callbacks may touch an
 * entry until then). Entries never move (their timer is embedded). One
 * loop thread; no locks. */
#ifndef LLMQ_WORKER_MODEL_STATE_H
#define LLMQ_WORKER_MODEL_STATE_H

#include <ev.h>
#include <stdint.h>

#include "jobs/calibration.h"

struct worker_account;

/* An account keeps at most this many models: a stream of hostile entries
 * with made-up model names cannot grow the worker without bound (past it,
 * samples of new models are not recorded and their headers always sent). */
#define WORKER_MODELS_MAX 1024

struct worker_model {
    struct worker_model *next;
    struct worker_account *acct;
    char name[201];
    /* calib_batch.c */
    struct llmq_calib_increments calib_pending; /* not written yet; n = 0: none */
    int64_t calib_written_ms;                   /* monotonic ms of the last write; -1: none */
    int calib_in_flight;                        /* writes sent, not answered yet */
    ev_timer calib_timer; /* the next write, while samples wait; zeroed here, set up
                             by calib_batch.c at its first use */
    /* learn_throttle.c */
    int64_t headers_sent_ms; /* monotonic ms headers last went to a settle; -1: never */
};

/* Account a's entry for model (borrowed), created empty on first use.
 * Returns it (owned by a), or NULL for a name that is too long, past
 * WORKER_MODELS_MAX models, or without memory. */
struct worker_model *llmq_worker_model(struct worker_account *a, const char *model);

/* Frees a's entries (stopping their timers); logs the calibration samples
 * that were never written (Redis away at exit). */
void llmq_worker_models_free(struct worker_account *a);

#endif
