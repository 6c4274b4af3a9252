/* An exact sliding-window limit in process memory: the same arithmetic as
 * lua/lib/limiter_window.lua, for the fail-open local limiter.
 *
 * An admission of `tokens` at now_ms counts for exactly period_ms (while
 * at_ms > now_ms - period_ms). Memory is bounded by the entries inside one
 * period. Pure: time is always a parameter. */
#ifndef LLMQ_WINDOW_H
#define LLMQ_WINDOW_H

#include <stddef.h>
#include <stdint.h>

struct llmq_window_entry {
    int64_t at_ms;
    int64_t tokens;
    uint64_t id;
};

struct llmq_window {
    int64_t period_ms;
    int64_t requests_limit; /* < 0: no request limit */
    int64_t tokens_limit;   /* < 0: no token limit */
    int64_t tokens_sum;     /* of the entries held */
    struct llmq_window_entry *ring;
    size_t head, count, cap;
};

/* Longest period a window accepts: a month. Longer ones (or <= 0, as a
 * broken or hostile reply could carry) are clamped so that time arithmetic
 * can never overflow. */
#define LLMQ_WINDOW_PERIOD_MAX_MS (31LL * 86400000)

/* Initializes w (no allocation until the first add); period_ms is clamped
 * to 1..LLMQ_WINDOW_PERIOD_MAX_MS. */
void llmq_window_init(struct llmq_window *w, int64_t requests_limit, int64_t tokens_limit,
                      int64_t period_ms);

/* period_ms clamped to 1..LLMQ_WINDOW_PERIOD_MAX_MS. */
int64_t llmq_window_clamp_period(int64_t period_ms);

/* Frees w's entries; w may be reused after llmq_window_init. */
void llmq_window_clear(struct llmq_window *w);

/* Drops entries that no longer count at now_ms. */
void llmq_window_evict(struct llmq_window *w, int64_t now_ms);

/* Ms until cost fits at now_ms: 0 fits now, > 0 wait, -1 never fits (cost
 * over the token limit, or a request limit below 1). Evicts first. */
int64_t llmq_window_wait_ms(struct llmq_window *w, int64_t cost, int64_t now_ms);

/* Records an admission (after a 0 wait). Returns 0, or -1 when out of memory. */
int llmq_window_add(struct llmq_window *w, uint64_t id, int64_t tokens, int64_t now_ms);

/* Sets the tokens of entry id to tokens, or removes it when tokens < 0.
 * Returns 1 when found, 0 when it aged out or never was. */
int llmq_window_adjust(struct llmq_window *w, uint64_t id, int64_t tokens);

#endif
