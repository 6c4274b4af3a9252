/* The spend gauges of /metrics, and what the response cache saved; see
 * metrics_spend.h. */
#include "admin/metrics_spend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redis/keys.h"
#include "redis/script.h"

#define SLOTS 16
#define NANO_PER_USD 1e9

/* One account's reads in flight: their replies' destination. */
struct spend_probe {
    struct worker_spend_metrics *s;
    int slot;
    int kind; /* 0: budget_list; 1: HGETALL spend:<today>; 2: HGETALL caches */
    char account[128];
};

struct worker_spend_metrics {
    struct llmq_metric *limit, *spent, *left, *waiting;
    struct llmq_metric *jobs, *tokens, *usd;
    struct llmq_metric *cache_req, *cache_stored, *cache_bytes, *cache_saved, *cache_saved_usd;
    struct spend_probe probes[SLOTS][3];
    int pending[SLOTS];
};

struct worker_spend_metrics *llmq_worker_spend_metrics_new(struct llmq_metrics *reg)
{
    static const char *const abu[] = {"account", "budget", "unit", NULL};
    static const char *const ab[] = {"account", "budget", NULL};
    static const char *const amt[] = {"account", "model", "tenant", NULL};
    enum llmq_metric_type g = LLMQ_METRIC_GAUGE;
    struct worker_spend_metrics *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->limit = llmq_metrics_register(reg, "llmq_budget_limit",
                                     "A spend budget's limit per period (tokens, or USD).", g, abu,
                                     NULL, 0);
    s->spent = llmq_metrics_register(
        reg, "llmq_budget_spent",
        "What a budget's period has spent: reservations at their worst case, settled to real "
        "usage (tokens, or USD; polled).",
        g, abu, NULL, 0);
    s->left =
        llmq_metrics_register(reg, "llmq_budget_remaining",
                              "What is left of a budget this period (polled).", g, abu, NULL, 0);
    s->waiting =
        llmq_metrics_register(reg, "llmq_budget_waiting_jobs",
                              "Jobs parked on an exhausted budget (polled).", g, ab, NULL, 0);
    s->jobs = llmq_metrics_register(reg, "llmq_spend_today_jobs",
                                    "Jobs done today (UTC) by model and tenant (polled).", g, amt,
                                    NULL, 0);
    s->tokens = llmq_metrics_register(reg, "llmq_spend_today_tokens",
                                      "Tokens used today (UTC) by model and tenant (polled).", g,
                                      amt, NULL, 0);
    s->usd = llmq_metrics_register(
        reg, "llmq_spend_today_usd",
        "USD spent today (UTC) by model and tenant, at llmq's prices (polled).", g, amt, NULL, 0);
    static const char *const ar[] = {"account", "result", NULL};
    static const char *const a[] = {"account", NULL};
    s->cache_req = llmq_metrics_register(
        reg, "llmq_cache_requests",
        "Requests that asked the response cache, by result: hit (answered from an entry), miss "
        "(called the API), coalesced (waited for an identical call in flight); totals (polled).",
        g, ar, NULL, 0);
    s->cache_stored =
        llmq_metrics_register(reg, "llmq_cache_stored_answers",
                              "Answers the response cache stored, total (polled).", g, a, NULL, 0);
    s->cache_bytes = llmq_metrics_register(
        reg, "llmq_cache_stored_bytes",
        "Bytes of the answers the response cache stored (packed lines), total (polled).", g, a,
        NULL, 0);
    s->cache_saved = llmq_metrics_register(
        reg, "llmq_cache_saved_tokens",
        "Tokens cache hits did not spend (the estimate each hit would have reserved), total "
        "(polled).",
        g, a, NULL, 0);
    s->cache_saved_usd = llmq_metrics_register(
        reg, "llmq_cache_saved_usd",
        "USD cache hits did not spend: what their original calls cost at llmq's prices, total "
        "(polled).",
        g, a, NULL, 0);
    if (!s->limit || !s->spent || !s->left || !s->waiting || !s->jobs || !s->tokens || !s->usd ||
        !s->cache_req || !s->cache_stored || !s->cache_bytes || !s->cache_saved ||
        !s->cache_saved_usd) {
        free(s);
        return NULL;
    }
    return s;
}

static long long elem_ll(const redisReply *e)
{
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    return e->type == REDIS_REPLY_STRING ? strtoll(e->str, NULL, 10) : 0;
}

static void on_budgets(struct worker_spend_metrics *s, const char *account, const redisReply *r)
{
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *b = r->element[i];
        if (b->type != REDIS_REPLY_ARRAY || b->elements != 11 ||
            b->element[0]->type != REDIS_REPLY_STRING || b->element[2]->type != REDIS_REPLY_STRING)
            continue;
        int usd = strcmp(b->element[2]->str, "usd") == 0;
        double div = usd ? NANO_PER_USD : 1;
        double limit = (double)elem_ll(b->element[3]), spent = (double)elem_ll(b->element[6]);
        const char *l[] = {account, b->element[0]->str, b->element[2]->str};
        llmq_metrics_set(s->limit, l, limit / div);
        llmq_metrics_set(s->spent, l, spent / div);
        llmq_metrics_set(s->left, l, (limit > spent ? limit - spent : 0) / div);
        llmq_metrics_set(s->waiting, l, (double)elem_ll(b->element[10]));
    }
}

/* Sums the day's fields "<model>|<tenant>|<user>|<kind>" per model and
 * tenant into the gauges. */
static void on_spend(struct worker_spend_metrics *s, const char *account, const redisReply *r)
{
    struct sum {
        char model[128], tenant[128];
        double n, tok, nusd;
    } sums[64];
    size_t n = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const char *f = r->element[i]->str;
        const char *b1 = f ? strchr(f, '|') : NULL, *b2 = b1 ? strchr(b1 + 1, '|') : NULL;
        const char *b3 = b2 ? strchr(b2 + 1, '|') : NULL;
        if (b3 == NULL || (size_t)(b1 - f) >= 128 || (size_t)(b2 - b1 - 1) >= 128)
            continue;
        size_t k = 0;
        while (k < n && !(strncmp(sums[k].model, f, (size_t)(b1 - f)) == 0 &&
                          sums[k].model[b1 - f] == '\0' &&
                          strncmp(sums[k].tenant, b1 + 1, (size_t)(b2 - b1 - 1)) == 0 &&
                          sums[k].tenant[b2 - b1 - 1] == '\0'))
            k++;
        if (k == n) {
            if (n == sizeof(sums) / sizeof(sums[0]))
                continue;
            memset(&sums[n], 0, sizeof(sums[n]));
            snprintf(sums[n].model, sizeof(sums[n].model), "%.*s", (int)(b1 - f), f);
            snprintf(sums[n].tenant, sizeof(sums[n].tenant), "%.*s", (int)(b2 - b1 - 1), b1 + 1);
            n++;
        }
        double v = (double)elem_ll(r->element[i + 1]);
        const char *kind = b3 + 1;
        if (strcmp(kind, "n") == 0)
            sums[k].n += v;
        else if (strcmp(kind, "tok") == 0)
            sums[k].tok += v;
        else if (strcmp(kind, "nusd") == 0)
            sums[k].nusd += v;
    }
    for (size_t k = 0; k < n; k++) {
        const char *l[] = {account, sums[k].model, sums[k].tenant};
        llmq_metrics_set(s->jobs, l, sums[k].n);
        llmq_metrics_set(s->tokens, l, sums[k].tok);
        llmq_metrics_set(s->usd, l, sums[k].nusd / NANO_PER_USD);
    }
}

/* The account's cache counters (P caches: hits, misses, coalesced, stored,
 * stored_bytes, saved_tokens, saved_nusd; lua/lib/cache.lua) into the gauges. */
static void on_cache(struct worker_spend_metrics *s, const char *account, const redisReply *r)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const char *f = r->element[i]->str;
        double v = (double)elem_ll(r->element[i + 1]);
        if (f == NULL)
            continue;
        const char *res = strcmp(f, "hits") == 0        ? "hit"
                          : strcmp(f, "misses") == 0    ? "miss"
                          : strcmp(f, "coalesced") == 0 ? "coalesced"
                                                        : NULL;
        const char *l[] = {account, res};
        if (res != NULL)
            llmq_metrics_set(s->cache_req, l, v);
        else if (strcmp(f, "stored") == 0)
            llmq_metrics_set(s->cache_stored, l, v);
        else if (strcmp(f, "stored_bytes") == 0)
            llmq_metrics_set(s->cache_bytes, l, v);
        else if (strcmp(f, "saved_tokens") == 0)
            llmq_metrics_set(s->cache_saved, l, v);
        else if (strcmp(f, "saved_nusd") == 0)
            llmq_metrics_set(s->cache_saved_usd, l, v / 1e9);
    }
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct spend_probe *p = privdata;
    p->s->pending[p->slot]--;
    const redisReply *r = reply;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return; /* lost or refused: the last values stay */
    if (p->kind == 0)
        on_budgets(p->s, p->account, r);
    else if (p->kind == 1)
        on_spend(p->s, p->account, r);
    else
        on_cache(p->s, p->account, r);
}

static void on_script_reply(redisAsyncContext *ac, redisReply *reply, void *privdata)
{
    on_reply(ac, reply, privdata);
}

void llmq_worker_spend_metrics_poll(struct worker_spend_metrics *s, int slot, redisAsyncContext *ac,
                                    const char *prefix, const char *account)
{
    if (s == NULL || ac == NULL || slot < 0 || slot >= SLOTS || s->pending[slot] > 0)
        return;
    for (int k = 0; k < 3; k++) {
        struct spend_probe *p = &s->probes[slot][k];
        *p = (struct spend_probe){.s = s, .slot = slot, .kind = k};
        snprintf(p->account, sizeof(p->account), "%s", account);
    }
    const char *argv[] = {prefix};
    if (llmq_script_run_async(ac, LLMQ_SCRIPT_BUDGET_LIST, 1, 1, argv, NULL, on_script_reply,
                              &s->probes[slot][0]) == LLMQ_OK)
        s->pending[slot]++;
    char day[16], key[LLMQ_KEY_FIXED_MAX + 16];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(day, sizeof(day), "%Y-%m-%d", &tm);
    if (llmq_key(key, sizeof(key), prefix, LLMQ_KEY_SPEND, day, NULL) != LLMQ_OK)
        return;
    const char *hv[] = {"HGETALL", key};
    if (redisAsyncCommandArgv(ac, on_reply, &s->probes[slot][1], 2, hv, NULL) == REDIS_OK)
        s->pending[slot]++;
    char ck[LLMQ_KEY_FIXED_MAX + 16];
    if (llmq_key(ck, sizeof(ck), prefix, LLMQ_KEY_CACHE_STATS, NULL, NULL) != LLMQ_OK)
        return;
    const char *cv[] = {"HGETALL", ck};
    if (redisAsyncCommandArgv(ac, on_reply, &s->probes[slot][2], 2, cv, NULL) == REDIS_OK)
        s->pending[slot]++;
}

void llmq_worker_spend_metrics_free(struct worker_spend_metrics *s)
{
    free(s);
}
