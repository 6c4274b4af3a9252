/* Retry backoff: exponential growth with full jitter, never sooner than a
 * server's hint.
 *
 * Pure code: the random state is the caller's (one uint64_t per worker, or
 * per test with a fixed seed), the clock is the caller's now_ms. For retry
 * number `attempt` (1 for the first retry) the ceiling is
 *     min(cap_ms, base_ms * 2^(attempt-1))
 * and the delay is uniform in [0, ceiling] ("full jitter": many clients that
 * failed together spread out instead of retrying in lock-step). A server
 * hint (retry-after and the like) is a floor: the delay is
 *     max(jittered, hint_ms + uniform[0, hint_jitter_ms])
 * so the hint is honoured even above cap_ms, and clients told the same hint
 * still spread a little when hint_jitter_ms > 0. */
#ifndef LLMQ_BACKOFF_H
#define LLMQ_BACKOFF_H

#include <stdint.h>

#include "base/rng.h"

struct llmq_backoff_policy {
    int64_t base_ms;        /* ceiling of the first retry; <= 0 means 500 */
    int64_t cap_ms;         /* largest ceiling; <= 0 means 60000; raised to base_ms if smaller */
    int64_t hint_jitter_ms; /* spread added above a server hint; < 0 means 0 */
};

/* The delay in ms before retry number attempt (attempt < 1 is taken as 1).
 * policy is borrowed (NULL: defaults); hint_ms < 0 means no hint; rng is the
 * caller's state, advanced. The result is >= max(0, hint_ms). */
int64_t llmq_backoff_delay_ms(const struct llmq_backoff_policy *policy, int attempt,
                              int64_t hint_ms, uint64_t *rng);

/* Reconnect backoff of a connection that keeps failing (limiter_sync.c,
 * redis_async.c): the delay is half the current step plus a uniform half,
 * in [step/2, step] ("equal jitter": clients that lost Redis together spread
 * out, and none retries at once), and the step doubles up to max_ms. *step_ms
 * is the caller's (start it, and reset it after a success, at the minimum
 * delay; < 1 is taken as 1); rng is the caller's state, advanced. */
int64_t llmq_backoff_reconnect_ms(int64_t *step_ms, int64_t max_ms, uint64_t *rng);

/* now_ms + llmq_backoff_delay_ms(...): the time the retry is due, on the
 * caller's clock. */
int64_t llmq_backoff_due_ms(const struct llmq_backoff_policy *policy, int attempt, int64_t hint_ms,
                            int64_t now_ms, uint64_t *rng);

#endif
