/* One call a caller waits for, synchronous (calls.c) or streamed
 * (stream.c): the core both kinds share, so that push, wait, look-up,
 * cancel and a client gone are written once. What differs is the kind's
 * (struct gw_call_kind): what a result line does, what the timer does,
 * what "sent" means, and the streamed kind's relay.
 *
 * A call's life:
 *   gw_call_wait_make    the job from the decoded body (call_job.h: the
 *                        request's terms, then its key's policy); -1 after
 *                        answering r (400, 403, 413...)
 *   gw_call_wait_begin   the waiter registered (waiters.h: an ended job's
 *                        event finds it, so it must come before the push),
 *                        the timer armed at --max-wait-ms, r->on_gone set,
 *                        the job pushed (call_job.h gw_call_job_push)
 *   then, until gw_call_wait_finish:
 *     the job may have ended (waiters) -> its result line is read when
 *       kind->may_look allows -> kind->on_result
 *     the timer -> kind->on_timer (which may gw_call_wait_cancel)
 *     job_cancel's reply, while kind->is_queued: unsent -> 429 and finish;
 *       sent -> kind->on_sent; ended -> look-up; no Redis -> 503 and finish
 *     the client gone -> the job cancelled (an unsent job is never sent),
 *       kind->on_gone, finish
 *     shutdown -> kind->on_shutdown, or the job cancelled, 503 and finish
 *   gw_call_wait_finish  kind->on_finish, the waiter removed, the timer
 *                        stopped, r->on_gone cleared.
 *
 * Ownership: the kind's struct begins with its struct gw_call_wait and is
 * r->state (freed by r->state_free, which calls gw_call_wait_clear). r is
 * borrowed (http.h, "Lifetime"): the wait, from begin to finish, and each
 * Redis command in flight are steps of it (request_step.h). Threads: the
 * gateway's loop only. */
#ifndef LLMQ_GW_CALL_WAIT_H
#define LLMQ_GW_CALL_WAIT_H

#include <ev.h>
#include <stddef.h>

#include "jobs/job.h"
#include "jobs/job_store.h"
#include "waiters.h"

struct gw_call;
struct gw_call_wait;
struct gw_request;

/* What a kind of call does at each event. Every hook gets the call while it
 * waits (never after finish); NULL hooks are noted. */
struct gw_call_kind {
    /* its job's result line came (dead: the job ended dead-lettered) */
    void (*on_result)(struct gw_call_wait *cw, const char *line, size_t len, int dead);
    /* NULL: a result is read whenever the job may have ended */
    int (*may_look)(const struct gw_call_wait *cw);
    /* 1 while the job is not known to be sent: job_cancel's reply counts */
    int (*is_queued)(const struct gw_call_wait *cw);
    void (*on_timer)(struct gw_call_wait *cw);
    /* job_cancel found the job sent: its answer will come */
    void (*on_sent)(struct gw_call_wait *cw);
    /* NULL: nothing more; the client left (the job's cancel is sent) */
    void (*on_gone)(struct gw_call_wait *cw);
    /* NULL: nothing more; runs first in gw_call_wait_finish */
    void (*on_finish)(struct gw_call_wait *cw);
    /* NULL: the default (job cancelled, 503 with retry-after, finish) */
    void (*on_shutdown)(struct gw_call_wait *cw);
};

struct gw_call_wait {
    struct gw_request *r;
    const struct gw_call_kind *kind;
    struct gw_waiter w;
    ev_timer timer;
    struct llmq_job job;
    struct llmq_job_outcome out;
    int waiting;    /* between gw_call_wait_begin and gw_call_wait_finish */
    int looking;    /* a result read (job_result.h) is in flight */
    int cancelling; /* a job_cancel whose reply counts is in flight */
};

/* Makes cw's job for r (r->state must be cw's struct already) from call
 * (borrowed). Returns 0, or -1 after answering r. */
int gw_call_wait_make(struct gw_call_wait *cw, struct gw_request *r,
                      const struct gw_call_kind *kind, const struct gw_call *call);

/* Registers the call, arms its timer at --max-wait-ms and pushes its job; a
 * push that cannot be sent answers 503 and finishes the call. */
void gw_call_wait_begin(struct gw_call_wait *cw);

/* Reads the job's result (once at a time, while waiting and may_look). */
void gw_call_wait_look_up(struct gw_call_wait *cw);

/* Cancels the job unless sent: with_reply 1 lets its reply decide (see the
 * life above; without Redis: 503 and finish), 0 fires and forgets. */
void gw_call_wait_cancel(struct gw_call_wait *cw, int with_reply);

/* (Re)arms the call's timer to fire in s seconds. */
void gw_call_wait_arm(struct gw_call_wait *cw, double s);

/* Ends the wait (no-op when it already ended): no more events. */
void gw_call_wait_finish(struct gw_call_wait *cw);

/* The waiting call of job id whose kind is kind, or NULL (borrowed). */
struct gw_call_wait *gw_call_wait_find(struct gw *gw, const char *id,
                                       const struct gw_call_kind *kind);

/* Shutdown, for every waiter (gw_waiters_each). */
void gw_call_wait_shutdown_one(struct gw_waiter *w);

/* Frees what cw owns (its job); for the kind's state_free. */
void gw_call_wait_clear(struct gw_call_wait *cw);

#endif
