/* The synchronous limiter client.
 *
 * One hiredis connection. A connection error drops it; the next call after a
 * backoff (doubling from reconnect_min_ms to reconnect_max_ms, with jitter)
 * reconnects. While Redis is unreachable, fail-closed calls return LLMQ_EREDIS
 * and fail-open acquires are decided by the local limiter (limiter_local.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/backoff.h"
#include "base/clock.h"
#include "limiter/limiter_local.h"
#include "limiter/limiter_reply.h"
#include "llmq/limiter.h"
#include "redis/redis.h"
#include "redis/script.h"

struct llmq_limiter {
    struct llmq_redis_url url;
    int timeout_ms;
    enum llmq_fail_policy policy;
    int reconnect_min_ms, reconnect_max_ms;
    redisContext *c;
    int64_t next_connect_ms; /* monotonic; no reconnect before this */
    int64_t backoff_ms;      /* the reconnect step (llmq_backoff_reconnect_ms) */
    uint64_t rng;
    struct llmq_local_limiter local;
};

static void drop_connection(struct llmq_limiter *lim)
{
    if (lim->c != NULL)
        redisFree(lim->c);
    lim->c = NULL;
    /* Jittered, so many clients do not reconnect in step after a Redis restart. */
    lim->next_connect_ms =
        llmq_monotonic_ms() +
        llmq_backoff_reconnect_ms(&lim->backoff_ms, lim->reconnect_max_ms, &lim->rng);
}

static int ensure_connected(struct llmq_limiter *lim, struct llmq_error *err)
{
    if (lim->c != NULL)
        return 1;
    if (llmq_monotonic_ms() < lim->next_connect_ms) {
        llmq_error_set(err, LLMQ_EREDIS, "redis unreachable (reconnect backing off)");
        return 0;
    }
    lim->c = llmq_redis_connect_parsed(&lim->url, lim->timeout_ms, err);
    if (lim->c == NULL) {
        drop_connection(lim);
        return 0;
    }
    lim->backoff_ms = lim->reconnect_min_ms;
    return 1;
}

struct llmq_limiter *llmq_limiter_new(const struct llmq_limiter_config *cfg, struct llmq_error *err)
{
    struct llmq_limiter *lim = calloc(1, sizeof(*lim));
    if (lim == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "limiter: out of memory");
        return NULL;
    }
    const char *url = cfg->redis_url ? cfg->redis_url : getenv("LLMQ_REDIS_URL");
    if (url == NULL || url[0] == '\0')
        url = LLMQ_REDIS_URL_DEFAULT;
    if (llmq_redis_url_parse(url, &lim->url, err) != LLMQ_OK) {
        free(lim);
        return NULL;
    }
    lim->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : LLMQ_LIMITER_TIMEOUT_MS_DEFAULT;
    lim->policy = cfg->on_redis_down;
    lim->reconnect_min_ms = cfg->reconnect_min_ms > 0 ? cfg->reconnect_min_ms : 100;
    lim->reconnect_max_ms = cfg->reconnect_max_ms > 0 ? cfg->reconnect_max_ms : 5000;
    lim->backoff_ms = lim->reconnect_min_ms;
    llmq_rng_seed(&lim->rng, (uint64_t)llmq_monotonic_ms() ^ (uint64_t)(uintptr_t)lim);
    llmq_local_limiter_init(&lim->local, cfg->local_share);
    if (!ensure_connected(lim, err) && lim->policy == LLMQ_FAIL_CLOSED) {
        llmq_limiter_free(lim);
        return NULL;
    }
    return lim;
}

void llmq_limiter_free(struct llmq_limiter *lim)
{
    if (lim == NULL)
        return;
    if (lim->c != NULL)
        redisFree(lim->c);
    llmq_local_limiter_free(&lim->local);
    free(lim);
}

/* Runs a script; on a connection failure drops the connection and returns
 * NULL with err set (rc LLMQ_EREDIS). */
static redisReply *run(struct llmq_limiter *lim, enum llmq_script_id id, int argc,
                       const char **argv, struct llmq_error *err)
{
    if (!ensure_connected(lim, err))
        return NULL;
    redisReply *r = llmq_script_run(lim->c, id, 1, argc, argv, NULL, err);
    if (r == NULL || lim->c->err) {
        if (r != NULL)
            freeReplyObject(r);
        drop_connection(lim);
        return NULL;
    }
    return r;
}

enum llmq_rc llmq_limiter_acquire_many(struct llmq_limiter *lim, const struct llmq_path *path,
                                       const int64_t *costs, size_t n, enum llmq_priority prio,
                                       struct llmq_grant *out, size_t *decided,
                                       struct llmq_error *err)
{
    static __thread struct llmq_acquire_args a; /* large: keep it off the stack */
    *decided = 0;
    enum llmq_rc rc = llmq_acquire_args_build(&a, path, costs, n, prio, err);
    if (rc != LLMQ_OK)
        return rc;
    redisReply *r = run(lim, LLMQ_SCRIPT_ACQUIRE, a.argc, a.argv, err);
    if (r == NULL) {
        if (lim->policy == LLMQ_FAIL_CLOSED)
            return LLMQ_EREDIS;
        for (size_t i = 0; i < n; i++) {
            rc = llmq_local_limiter_acquire(&lim->local, path, costs[i], llmq_monotonic_ms(),
                                            &out[i]);
            if (rc != LLMQ_OK)
                return rc;
            *decided = i + 1;
            if (out[i].decision != LLMQ_GRANTED)
                break;
        }
        return LLMQ_OK;
    }
    rc = llmq_acquire_reply_parse(r, path->account, costs, out, n, decided, &lim->local, err);
    freeReplyObject(r);
    return rc;
}

enum llmq_rc llmq_limiter_acquire(struct llmq_limiter *lim, const struct llmq_path *path,
                                  int64_t cost_tokens, enum llmq_priority prio,
                                  struct llmq_grant *out, struct llmq_error *err)
{
    size_t decided;
    return llmq_limiter_acquire_many(lim, path, &cost_tokens, 1, prio, out, &decided, err);
}

static enum llmq_rc adjust(struct llmq_limiter *lim, const char *reservation, int64_t actual,
                           struct llmq_error *err)
{
    if (reservation != NULL && llmq_local_limiter_adjust(&lim->local, reservation, actual))
        return LLMQ_OK;
    struct llmq_adjust_args a;
    enum llmq_rc rc = llmq_adjust_args_build(&a, reservation, actual, err);
    if (rc != LLMQ_OK)
        return rc;
    enum llmq_script_id id = actual >= 0 ? LLMQ_SCRIPT_LIMITER_SETTLE : LLMQ_SCRIPT_REFUND;
    redisReply *r = run(lim, id, a.argc, a.argv, err);
    if (r == NULL)
        return LLMQ_EREDIS;
    rc = llmq_integer_reply_parse(r, actual >= 0 ? "settle" : "refund", NULL, err);
    freeReplyObject(r);
    return rc;
}

enum llmq_rc llmq_limiter_settle(struct llmq_limiter *lim, const char *reservation,
                                 int64_t actual_tokens, struct llmq_error *err)
{
    if (actual_tokens < 0)
        return llmq_error_set(err, LLMQ_EINVAL, "settle: actual tokens must be >= 0");
    return adjust(lim, reservation, actual_tokens, err);
}

enum llmq_rc llmq_limiter_refund(struct llmq_limiter *lim, const char *reservation,
                                 struct llmq_error *err)
{
    return adjust(lim, reservation, -1, err);
}

enum llmq_rc llmq_limiter_pause(struct llmq_limiter *lim, const char *account, const char *bucket,
                                int64_t ms, int64_t *until_ms, struct llmq_error *err)
{
    struct llmq_pause_args a;
    enum llmq_rc rc = llmq_pause_args_build(&a, account, bucket, ms, err);
    if (rc != LLMQ_OK)
        return rc;
    redisReply *r = run(lim, LLMQ_SCRIPT_PAUSE, 3, a.argv, err);
    if (r == NULL)
        return LLMQ_EREDIS;
    rc = llmq_integer_reply_parse(r, "pause", until_ms, err);
    freeReplyObject(r);
    return rc;
}
