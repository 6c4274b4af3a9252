/* Fail-open local limiter; see limiter_local.h. A linear table of buckets:
 * a process talks to a handful of paths, so a hash table would buy nothing. */
#include "limiter/limiter_local.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter/path.h"
#include "limiter/reservation.h"

void llmq_local_limiter_init(struct llmq_local_limiter *l, double share)
{
    memset(l, 0, sizeof(*l));
    l->share = share > 0 && share <= 1 ? share : 1.0;
}

void llmq_local_limiter_free(struct llmq_local_limiter *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->buckets[i].key);
        llmq_window_clear(&l->buckets[i].window);
    }
    free(l->buckets);
    memset(l, 0, sizeof(*l));
}

static struct llmq_local_bucket *find(struct llmq_local_limiter *l, const char *account,
                                      const char *bucket)
{
    size_t alen = strlen(account);
    for (size_t i = 0; i < l->count; i++) {
        const char *k = l->buckets[i].key;
        if (strncmp(k, account, alen) == 0 && k[alen] == '|' && strcmp(k + alen + 1, bucket) == 0)
            return &l->buckets[i];
    }
    return NULL;
}

static void copy_name(char *dst, size_t n, const char *src)
{
    size_t len = strnlen(src, n - 1);
    memcpy(dst, src, len);
    dst[len] = '\0';
}

static int64_t share_of(const struct llmq_local_limiter *l, int64_t limit)
{
    return limit < 0 ? -1 : (int64_t)((double)limit * l->share);
}

enum llmq_rc llmq_local_limiter_learn(struct llmq_local_limiter *l, const char *account,
                                      const char *bucket, int64_t requests, int64_t tokens,
                                      int64_t period_ms)
{
    struct llmq_local_bucket *b = find(l, account, bucket);
    if (b != NULL) {
        b->window.requests_limit = share_of(l, requests);
        b->window.tokens_limit = share_of(l, tokens);
        b->window.period_ms = llmq_window_clamp_period(period_ms);
        return LLMQ_OK;
    }
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct llmq_local_bucket *nb = realloc(l->buckets, cap * sizeof(*nb));
        if (nb == NULL)
            return LLMQ_ENOMEM;
        l->buckets = nb;
        l->cap = cap;
    }
    size_t klen = strlen(account) + strlen(bucket) + 2;
    char *key = malloc(klen);
    if (key == NULL)
        return LLMQ_ENOMEM;
    snprintf(key, klen, "%s|%s", account, bucket);
    b = &l->buckets[l->count++];
    b->key = key;
    llmq_window_init(&b->window, share_of(l, requests), share_of(l, tokens), period_ms);
    return LLMQ_OK;
}

enum llmq_rc llmq_local_limiter_acquire(struct llmq_local_limiter *l, const struct llmq_path *path,
                                        int64_t cost, int64_t now_ms, struct llmq_grant *out)
{
    char names[3][LLMQ_BUCKET_NAME_MAX];
    struct llmq_local_bucket *buckets[3];
    int n = llmq_path_bucket_names(path, names);
    memset(out, 0, sizeof(*out));
    out->local = 1;
    out->at_ms = now_ms;
    for (int i = 0; i < n; i++) {
        buckets[i] = find(l, path->account, names[i]);
        if (buckets[i] == NULL)
            continue;
        int64_t wait = llmq_window_wait_ms(&buckets[i]->window, cost, now_ms);
        if (wait < 0) {
            out->decision = LLMQ_NEVER_FITS;
            out->cost = cost;
            out->limit = buckets[i]->window.tokens_limit;
            copy_name(out->bucket, sizeof(out->bucket), names[i]);
            snprintf(out->reason, sizeof(out->reason), "tokens");
            return LLMQ_OK;
        }
        if (wait > out->wait_ms) {
            out->decision = LLMQ_DENIED;
            out->wait_ms = wait;
            copy_name(out->bucket, sizeof(out->bucket), names[i]);
            snprintf(out->reason, sizeof(out->reason), "local");
        }
    }
    if (out->decision == LLMQ_DENIED)
        return LLMQ_OK;
    uint64_t id = ++l->next_id;
    llmq_reservation_format(out->reservation, sizeof(out->reservation), path->account, "L",
                            (int64_t)id, cost, now_ms, "");
    for (int i = 0; i < n; i++) {
        if (buckets[i] != NULL && llmq_window_add(&buckets[i]->window, id, cost, now_ms) != 0)
            return LLMQ_ENOMEM;
        llmq_reservation_add_bucket(out->reservation, sizeof(out->reservation), 'w', names[i]);
    }
    out->reservation_id = (int64_t)id;
    out->decision = LLMQ_GRANTED;
    return LLMQ_OK;
}

int llmq_local_limiter_adjust(struct llmq_local_limiter *l, const char *reservation, int64_t actual)
{
    if (!llmq_reservation_is_local(reservation))
        return 0;
    char account[LLMQ_NAME_MAX + 1];
    const char *handle = llmq_reservation_split(reservation, account, sizeof(account));
    if (handle == NULL)
        return 1;
    char *after_id = NULL;
    uint64_t id = strtoull(handle + 1, &after_id, 10);
    /* The admission ledger: real usage may raise the charge, never lower it. */
    if (actual >= 0 && after_id != NULL && *after_id == '|') {
        int64_t cost = llmq_reservation_cost(handle);
        if (actual < cost)
            actual = cost;
    }
    const char *tag = llmq_reservation_buckets(handle);
    while (tag != NULL && *tag == 'w') {
        char mode, name[LLMQ_BUCKET_NAME_MAX];
        const char *next = llmq_reservation_bucket(tag, &mode, name, sizeof(name));
        if (name[0] != '\0') {
            struct llmq_local_bucket *b = find(l, account, name);
            if (b != NULL)
                llmq_window_adjust(&b->window, id, actual);
        }
        tag = next;
    }
    return 1;
}
