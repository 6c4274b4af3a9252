/* In-memory exact sliding window; see window.h. Entries sit in a ring in
 * admission order, oldest at head, so eviction and "when will enough free"
 * both walk from the head. */
#include "limiter/window.h"

#include <stdlib.h>
#include <string.h>

void llmq_window_init(struct llmq_window *w, int64_t requests_limit, int64_t tokens_limit,
                      int64_t period_ms)
{
    memset(w, 0, sizeof(*w));
    w->requests_limit = requests_limit;
    w->tokens_limit = tokens_limit;
    w->period_ms = llmq_window_clamp_period(period_ms);
}

int64_t llmq_window_clamp_period(int64_t period_ms)
{
    if (period_ms < 1)
        return 1;
    return period_ms > LLMQ_WINDOW_PERIOD_MAX_MS ? LLMQ_WINDOW_PERIOD_MAX_MS : period_ms;
}

void llmq_window_clear(struct llmq_window *w)
{
    free(w->ring);
    w->ring = NULL;
    w->head = w->count = w->cap = 0;
    w->tokens_sum = 0;
}

static struct llmq_window_entry *entry_at(const struct llmq_window *w, size_t i)
{
    return &w->ring[(w->head + i) % w->cap];
}

void llmq_window_evict(struct llmq_window *w, int64_t now_ms)
{
    while (w->count > 0) {
        struct llmq_window_entry *e = entry_at(w, 0);
        if (e->at_ms > now_ms - w->period_ms)
            break;
        w->tokens_sum -= e->tokens;
        w->head = (w->head + 1) % w->cap;
        w->count--;
    }
}

/* Ms until the oldest entries have freed `need` requests (by_tokens 0) or
 * tokens (by_tokens 1). */
static int64_t free_wait(const struct llmq_window *w, int64_t need, int by_tokens, int64_t now_ms)
{
    int64_t freed = 0;
    for (size_t i = 0; i < w->count; i++) {
        const struct llmq_window_entry *e = entry_at(w, i);
        freed += by_tokens ? e->tokens : 1;
        if (freed >= need)
            return e->at_ms + w->period_ms - now_ms;
    }
    return w->period_ms;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

int64_t llmq_window_wait_ms(struct llmq_window *w, int64_t cost, int64_t now_ms)
{
    if ((w->requests_limit >= 0 && w->requests_limit < 1) ||
        (w->tokens_limit >= 0 && cost > w->tokens_limit))
        return -1;
    llmq_window_evict(w, now_ms);
    int64_t wait = 0;
    if (w->requests_limit >= 0) {
        int64_t need = (int64_t)w->count + 1 - w->requests_limit;
        if (need > 0) {
            int64_t t = free_wait(w, need, 0, now_ms);
            wait = t > wait ? t : wait;
        }
    }
    if (w->tokens_limit >= 0) {
        /* An idle window admits any cost within the limit. */
        int64_t need = min64(w->tokens_sum + cost - w->tokens_limit, w->tokens_sum);
        if (need > 0) {
            int64_t t = free_wait(w, need, 1, now_ms);
            wait = t > wait ? t : wait;
        }
    }
    return wait;
}

int llmq_window_add(struct llmq_window *w, uint64_t id, int64_t tokens, int64_t now_ms)
{
    if (w->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        struct llmq_window_entry *ring = malloc(cap * sizeof(*ring));
        if (ring == NULL)
            return -1;
        for (size_t i = 0; i < w->count; i++)
            ring[i] = *entry_at(w, i);
        free(w->ring);
        w->ring = ring;
        w->cap = cap;
        w->head = 0;
    }
    struct llmq_window_entry *e = &w->ring[(w->head + w->count) % w->cap];
    *e = (struct llmq_window_entry){.at_ms = now_ms, .tokens = tokens, .id = id};
    w->count++;
    w->tokens_sum += tokens;
    return 0;
}

int llmq_window_adjust(struct llmq_window *w, uint64_t id, int64_t tokens)
{
    for (size_t i = 0; i < w->count; i++) {
        struct llmq_window_entry *e = entry_at(w, i);
        if (e->id != id)
            continue;
        w->tokens_sum -= e->tokens;
        if (tokens >= 0) {
            e->tokens = tokens;
            w->tokens_sum += tokens;
            return 1;
        }
        /* Removal: shift the newer entries down one place, keeping order. */
        for (size_t j = i; j + 1 < w->count; j++)
            *entry_at(w, j) = *entry_at(w, j + 1);
        w->count--;
        return 1;
    }
    return 0;
}
