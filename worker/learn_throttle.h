/* Which responses' x-ratelimit-* headers go to the settle, where the model
 * bucket learns from them (lua/job_settle.lua: a limiter session, an HMGET
 * of the bucket, limiter_learn, a flush: ~6 µs of Redis CPU a settle).
 *
 * The headers are a snapshot of the API's counters at the moment it
 * answered. Two responses a millisecond apart say nearly the same thing,
 * and whichever is sent next carries fresher values than a skipped one, so
 * skipping within a short interval loses nothing the bucket could act on.
 * Sent always: the first response of an (account, model) since the worker
 * started (the limit may be wrong from the start), a response saying a
 * remaining count is 0 (the API is about to refuse: every worker must slow
 * down now), and a 429 (its pause travels with it anyway). Otherwise at
 * most one response every LEARN_HEADERS_EVERY_MS per (account, model) and
 * process. A skipped settle carries -1 ("not sent") for the six values.
 * Pure: the caller keeps the state (model_state.h) and passes the clock. */
#ifndef LLMQ_WORKER_LEARN_THROTTLE_H
#define LLMQ_WORKER_LEARN_THROTTLE_H

#include <stdint.h>

#include "openai/ratelimit_headers.h"

#define LEARN_HEADERS_EVERY_MS 100

/* 1 when the headers h (borrowed) of a response with HTTP status go with
 * its settle, 0 when they are skipped. *sent_ms is when headers of this
 * (account, model) were last sent (monotonic ms, -1: never); updated to
 * now_ms when this returns 1. A response without any of the six values
 * returns 0 and leaves *sent_ms alone. */
int llmq_worker_learn_send(int64_t *sent_ms, long status, const struct llmq_ratelimit_headers *h,
                           int64_t now_ms);

#endif
