/* Exact sliding-window accounting (see window.h). The log is a ring buffer
 * that doubles when full; its memory is bounded by the admissions of one
 * period, which the limits themselves bound. */
#include "window.h"

#include <stdlib.h>

static struct sim_window_entry *at(const struct sim_window *w, size_t i)
{
    return &w->ring[(w->head + i) % w->cap];
}

void sim_window_free(struct sim_window *w)
{
    if (w == NULL)
        return;
    free(w->ring);
    w->ring = NULL;
    w->cap = w->head = w->len = 0;
    w->used_tokens = 0;
}

void sim_window_expire(struct sim_window *w, int64_t now_ms, int64_t period_ms)
{
    while (w->len > 0) {
        struct sim_window_entry *e = at(w, 0);
        if (e->t_ms + period_ms > now_ms)
            break;
        w->used_tokens -= e->tokens;
        w->head = (w->head + 1) % w->cap;
        w->head_seq++;
        w->len--;
    }
}

/* Wait until the oldest entries have freed enough tokens for `tokens` more. */
static int64_t tokens_wait(const struct sim_window *w, int64_t now_ms, int64_t period_ms,
                           int64_t tpm, int64_t tokens)
{
    int64_t used = w->used_tokens;
    for (size_t i = 0; i < w->len; i++) {
        const struct sim_window_entry *e = at(w, i);
        used -= e->tokens;
        if (used + tokens <= tpm)
            return e->t_ms + period_ms - now_ms;
    }
    return period_ms; /* unreachable when tokens <= tpm: an empty window admits */
}

enum sim_window_verdict sim_window_check(const struct sim_window *w, int64_t now_ms,
                                         int64_t period_ms, int64_t rpm, int64_t tpm,
                                         int64_t tokens, int64_t *wait_ms)
{
    *wait_ms = 0;
    if (rpm > 0 && (int64_t)w->len + 1 > rpm) {
        /* After the oldest len+1-rpm entries expire there is room for one more. */
        size_t k = w->len + 1 - (size_t)rpm;
        *wait_ms = at(w, k - 1)->t_ms + period_ms - now_ms;
        return SIM_WINDOW_DENY_REQUESTS;
    }
    if (tpm > 0 && tokens > tpm)
        return SIM_WINDOW_TOO_LARGE;
    if (tpm > 0 && w->used_tokens + tokens > tpm) {
        *wait_ms = tokens_wait(w, now_ms, period_ms, tpm, tokens);
        return SIM_WINDOW_DENY_TOKENS;
    }
    return SIM_WINDOW_ADMIT;
}

static int grow(struct sim_window *w)
{
    size_t cap = w->cap ? w->cap * 2 : 64;
    struct sim_window_entry *ring = malloc(cap * sizeof(*ring));
    if (ring == NULL)
        return -1;
    for (size_t i = 0; i < w->len; i++)
        ring[i] = *at(w, i);
    free(w->ring);
    w->ring = ring;
    w->cap = cap;
    w->head = 0;
    return 0;
}

int sim_window_add(struct sim_window *w, int64_t now_ms, int64_t tokens, uint64_t *seq)
{
    if (w->len == w->cap && grow(w) != 0)
        return -1;
    struct sim_window_entry *e = &w->ring[(w->head + w->len) % w->cap];
    e->t_ms = now_ms;
    e->tokens = tokens;
    *seq = w->head_seq + w->len;
    w->len++;
    w->used_tokens += tokens;
    return 0;
}

void sim_window_settle(struct sim_window *w, uint64_t seq, int64_t tokens)
{
    if (seq < w->head_seq || seq - w->head_seq >= w->len)
        return;
    struct sim_window_entry *e = at(w, (size_t)(seq - w->head_seq));
    w->used_tokens += tokens - e->tokens;
    e->tokens = tokens;
}

int64_t sim_window_reset_ms(const struct sim_window *w, int64_t now_ms, int64_t period_ms)
{
    if (w->len == 0)
        return 0;
    int64_t ms = at(w, w->len - 1)->t_ms + period_ms - now_ms;
    return ms > 0 ? ms : 0;
}

int64_t sim_window_reset_tokens_ms(const struct sim_window *w, int64_t now_ms, int64_t period_ms)
{
    for (size_t i = w->len; i > 0; i--) {
        const struct sim_window_entry *e = at(w, i - 1);
        if (e->tokens > 0) {
            int64_t ms = e->t_ms + period_ms - now_ms;
            return ms > 0 ? ms : 0;
        }
    }
    return 0;
}
