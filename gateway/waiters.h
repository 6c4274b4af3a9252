/* Requests waiting for jobs to end, told without polling.
 *
 * One connection per gateway reads P events (XREAD BLOCK, one stream entry
 * {id, state} per job that ends: lua/lib/jobs.lua llmq_job_finish) from
 * the last entry it saw, and hands each id to the waiter registered for it.
 * A waiter registers before its job is enqueued, so its event cannot come
 * first. After the events connection (re)connects, and every RECHECK period,
 * every waiter is told too ("maybe ended"), so an event missed while Redis
 * was away or trimmed past us costs one look-up, not a hang. */
#ifndef LLMQ_GW_WAITERS_H
#define LLMQ_GW_WAITERS_H

#include "gateway.h"
#include "llmq/llmq.h"

/* The BLOCK of each events read: the events connection's bound is this plus
 * the command timeout (redis_async.h). */
#define GW_EVENTS_BLOCK_MS 5000

struct gw_waiter {
    char job_id[LLMQ_JOB_ID_MAX + 1];
    /* the job may have ended: look its result up (it may still be missing
     * after a recheck); runs from the loop, possibly many times */
    void (*on_maybe_ended)(struct gw_waiter *w);
    struct gw_waiter *next; /* owned by the table */
    int registered;
};

struct gw_waiters *gw_waiters_new(struct gw *gw);
void gw_waiters_free(struct gw_waiters *ws);

/* Registers w (borrowed until removed; job_id set). */
void gw_waiters_add(struct gw_waiters *ws, struct gw_waiter *w);
/* Removes w if registered; safe to call from on_maybe_ended. */
void gw_waiters_remove(struct gw_waiters *ws, struct gw_waiter *w);

/* The waiter registered for job id whose on_maybe_ended is that one (NULL:
 * any), or NULL: how a module finds its own waiters (a streamed call's by
 * its job id, stream.c). Borrowed. */
struct gw_waiter *gw_waiters_find(struct gw_waiters *ws, const char *id,
                                  void (*on_maybe_ended)(struct gw_waiter *w));

/* The events connection became ready (1) or not (0). */
void gw_waiters_events_state(struct gw_waiters *ws, int ready);

/* Calls f for every waiter (shutdown). f may remove the waiter. */
void gw_waiters_each(struct gw_waiters *ws, void (*f)(struct gw_waiter *w));

#endif
