/* Exact sliding-window rate accounting for one (API key, model) pair.
 *
 * The window is a log of admissions: each entry is (admission time, charged
 * tokens). An admission counts for exactly period_ms after its time and then
 * expires. Requests used = number of live entries; tokens used = sum of their
 * tokens. An entry's tokens can be settled (lowered or raised) later by its
 * sequence number; settling an entry that has already expired is a no-op.
 *
 * Pure logic: every function takes now_ms (monotonic milliseconds) from the
 * caller, so tests can drive it with a fake clock. */
#ifndef SIM_WINDOW_H
#define SIM_WINDOW_H

#include <stddef.h>
#include <stdint.h>

struct sim_window_entry {
    int64_t t_ms;
    int64_t tokens;
};

struct sim_window {
    struct sim_window_entry *ring; /* owned; cap entries */
    size_t cap;
    size_t head;       /* index of the oldest live entry */
    size_t len;        /* live entries */
    uint64_t head_seq; /* sequence number of ring[head] */
    int64_t used_tokens;
};

/* Verdict of sim_window_check(). */
enum sim_window_verdict {
    SIM_WINDOW_ADMIT = 0,
    SIM_WINDOW_DENY_REQUESTS,
    SIM_WINDOW_DENY_TOKENS,
    SIM_WINDOW_TOO_LARGE /* the request alone exceeds the token limit: never fits */
};

/* Frees the log; the window is empty afterwards. NULL is a no-op. */
void sim_window_free(struct sim_window *w);

/* Drops entries admitted at or before now_ms - period_ms. */
void sim_window_expire(struct sim_window *w, int64_t now_ms, int64_t period_ms);

/* Checks whether one more request charging tokens fits under rpm and tpm
 * (0 = unlimited). Call sim_window_expire first. On a denial *wait_ms is the
 * exact time until it would fit (0 for TOO_LARGE). */
enum sim_window_verdict sim_window_check(const struct sim_window *w, int64_t now_ms,
                                         int64_t period_ms, int64_t rpm, int64_t tpm,
                                         int64_t tokens, int64_t *wait_ms);

/* Logs an admission at now_ms charging tokens. Returns 0 and its sequence
 * number in *seq, or -1 when memory runs out. */
int sim_window_add(struct sim_window *w, int64_t now_ms, int64_t tokens, uint64_t *seq);

/* Replaces the tokens of entry seq with tokens, if it is still live. */
void sim_window_settle(struct sim_window *w, uint64_t seq, int64_t tokens);

/* Milliseconds until every live entry has expired (the window is back to its
 * initial state); 0 when empty. */
int64_t sim_window_reset_ms(const struct sim_window *w, int64_t now_ms, int64_t period_ms);

/* Milliseconds until the live entries that carry tokens have all expired. */
int64_t sim_window_reset_tokens_ms(const struct sim_window *w, int64_t now_ms, int64_t period_ms);

#endif
