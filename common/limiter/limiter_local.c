/* Fail-open local limiter; see limiter_local.h. A linear table of buckets:
 * a process talks to a handful of paths, so a hash table would buy nothing. */
#include "limiter/limiter_local.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter/path.h"

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
    int len = snprintf(out->reservation, sizeof(out->reservation),
                       "%s|L%" PRIu64 "|%" PRId64 "|%" PRId64, path->account, id, cost, now_ms);
    for (int i = 0; i < n; i++) {
        if (buckets[i] != NULL && llmq_window_add(&buckets[i]->window, id, cost, now_ms) != 0)
            return LLMQ_ENOMEM;
        len += snprintf(out->reservation + len, sizeof(out->reservation) - (size_t)len, "|w%s",
                        names[i]);
    }
    out->reservation_id = (int64_t)id;
    out->decision = LLMQ_GRANTED;
    return LLMQ_OK;
}

int llmq_local_limiter_adjust(struct llmq_local_limiter *l, const char *reservation, int64_t actual)
{
    const char *bar = strchr(reservation, '|');
    if (bar == NULL || bar[1] != 'L')
        return 0;
    char account[LLMQ_NAME_MAX + 1];
    size_t alen = (size_t)(bar - reservation);
    if (alen > LLMQ_NAME_MAX)
        return 1;
    memcpy(account, reservation, alen);
    account[alen] = '\0';
    char *after_id = NULL;
    uint64_t id = strtoull(bar + 2, &after_id, 10);
    /* The admission ledger: real usage may raise the charge, never lower it. */
    if (actual >= 0 && after_id != NULL && *after_id == '|') {
        long long cost = strtoll(after_id + 1, NULL, 10);
        if (actual < cost)
            actual = cost;
    }
    /* Skip "L<id>|<cost>|<at>" to the bucket list. */
    const char *p = bar + 1;
    for (int skip = 0; skip < 3 && p != NULL; skip++) {
        p = strchr(p, '|');
        if (p != NULL)
            p++;
    }
    while (p != NULL && *p == 'w') {
        const char *end = strchr(p, '|');
        char name[LLMQ_BUCKET_NAME_MAX];
        size_t len = end ? (size_t)(end - p - 1) : strlen(p + 1);
        if (len < sizeof(name)) {
            memcpy(name, p + 1, len);
            name[len] = '\0';
            struct llmq_local_bucket *b = find(l, account, name);
            if (b != NULL)
                llmq_window_adjust(&b->window, id, actual);
        }
        p = end ? end + 1 : NULL;
    }
    return 1;
}
