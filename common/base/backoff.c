/* Exponential backoff with full jitter and a server-hint floor (see backoff.h).
 *
 * Invariants: no global state (the RNG is the caller's); every result is in
 * [max(0, hint), max(cap, hint + hint_jitter)]; no arithmetic overflows for
 * any attempt number (the ceiling saturates at cap_ms). */
#include "base/backoff.h"

#include "base/rng.h"

#define DEFAULT_BASE_MS 500
#define DEFAULT_CAP_MS 60000
#define MAX_MS 1000000000000LL /* 10^12 ms: bounds every input so sums cannot overflow */

static int64_t ceiling_ms(int64_t base, int64_t cap, int attempt)
{
    int64_t c = base;
    for (int i = 1; i < attempt && c < cap; i++)
        c = c > cap / 2 ? cap : c * 2;
    return c < cap ? c : cap;
}

int64_t llmq_backoff_delay_ms(const struct llmq_backoff_policy *policy, int attempt,
                              int64_t hint_ms, uint64_t *rng)
{
    int64_t base = policy && policy->base_ms > 0 ? policy->base_ms : DEFAULT_BASE_MS;
    int64_t cap = policy && policy->cap_ms > 0 ? policy->cap_ms : DEFAULT_CAP_MS;
    int64_t hj = policy && policy->hint_jitter_ms > 0 ? policy->hint_jitter_ms : 0;
    base = base < MAX_MS ? base : MAX_MS;
    cap = cap < MAX_MS ? cap : MAX_MS;
    hj = hj < MAX_MS ? hj : MAX_MS;
    hint_ms = hint_ms < MAX_MS ? hint_ms : MAX_MS;
    if (cap < base)
        cap = base;
    if (attempt < 1)
        attempt = 1;
    int64_t delay = llmq_rng_uniform(rng, ceiling_ms(base, cap, attempt));
    if (hint_ms >= 0) {
        int64_t floor = hint_ms + llmq_rng_uniform(rng, hj);
        if (floor > delay)
            delay = floor;
    }
    return delay;
}

int64_t llmq_backoff_due_ms(const struct llmq_backoff_policy *policy, int attempt, int64_t hint_ms,
                            int64_t now_ms, uint64_t *rng)
{
    return now_ms + llmq_backoff_delay_ms(policy, attempt, hint_ms, rng);
}

int64_t llmq_backoff_reconnect_ms(int64_t *step_ms, int64_t max_ms, uint64_t *rng)
{
    int64_t step = *step_ms < 1 ? 1 : *step_ms < MAX_MS ? *step_ms : MAX_MS;
    int64_t delay = step / 2 + llmq_rng_uniform(rng, step) / 2;
    max_ms = max_ms < step ? step : max_ms;
    *step_ms = step > max_ms / 2 ? max_ms : step * 2;
    return delay;
}
