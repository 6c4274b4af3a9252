/* The asynchronous limiter client: hiredis async on a libev loop.
 *
 * The connection and its reconnects are a struct llmq_redis_async.
 *
 * Every user callback runs exactly once: with the script's reply, with the
 * fail policy's answer when the connection drops (hiredis calls pending
 * callbacks with reply == NULL), or with LLMQ_ECLOSED when the limiter is
 * freed. Answers that are known at submit time (Redis down) are deferred to a
 * 0 s timer so a callback never runs before its submit call returns. */
#include <ev.h>
#include <hiredis/async.h>
#include <stdlib.h>
#include <string.h>

#include "limiter/limiter_local.h"
#include "limiter/limiter_reply.h"
#include "llmq/limiter.h"
#include "base/log.h"
#include "redis/redis.h"
#include "redis/redis_async.h"
#include "redis/script.h"

enum call_kind { CALL_ACQUIRE, CALL_SETTLE, CALL_REFUND, CALL_PAUSE };

/* One submitted call, alive until its callback has run. */
struct call {
    struct call *next; /* in the deferred queue */
    struct llmq_alimiter *al;
    enum call_kind kind;
    llmq_alimiter_cb *cb;
    void *privdata;
    struct llmq_path path; /* acquire: for the fail-open fallback */
    int64_t cost;
    enum llmq_rc rc; /* deferred answer */
    struct llmq_grant grant;
    struct llmq_error err;
};

struct llmq_alimiter {
    struct ev_loop *loop;
    enum llmq_fail_policy policy;
    struct llmq_redis_async *conn;
    int closing;
    ev_timer defer_timer;
    struct call *defer_head, *defer_tail;
    struct llmq_local_limiter local;
};

static void on_defer_timer(struct ev_loop *loop, ev_timer *w, int revents);

struct llmq_alimiter *llmq_alimiter_new(struct ev_loop *loop, const struct llmq_limiter_config *cfg,
                                        struct llmq_error *err)
{
    struct llmq_alimiter *al = calloc(1, sizeof(*al));
    if (al == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "limiter: out of memory");
        return NULL;
    }
    const char *url = cfg->redis_url ? cfg->redis_url : getenv("LLMQ_REDIS_URL");
    if (url == NULL || url[0] == '\0')
        url = LLMQ_REDIS_URL_DEFAULT;
    struct llmq_redis_url parsed;
    if (llmq_redis_url_parse(url, &parsed, err) != LLMQ_OK) {
        free(al);
        return NULL;
    }
    al->loop = loop;
    al->policy = cfg->on_redis_down;
    llmq_local_limiter_init(&al->local, cfg->local_share);
    ev_timer_init(&al->defer_timer, on_defer_timer, 0.0, 0.0);
    /* llmq/limiter.h: timeout_ms is the connect and the command timeout. */
    int timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : LLMQ_LIMITER_TIMEOUT_MS_DEFAULT;
    struct llmq_redis_async_config rc = {.timeout_ms = timeout_ms,
                                         .command_timeout_ms = timeout_ms,
                                         .reconnect_min_ms = cfg->reconnect_min_ms,
                                         .reconnect_max_ms = cfg->reconnect_max_ms,
                                         .name = "limiter"};
    al->conn = llmq_redis_async_new(loop, &parsed, &rc, NULL, NULL, err);
    if (al->conn == NULL) {
        llmq_local_limiter_free(&al->local);
        free(al);
        return NULL;
    }
    return al;
}

static void finish(struct call *c, enum llmq_rc rc, const struct llmq_grant *grant,
                   const struct llmq_error *err)
{
    c->cb(c->privdata, rc, grant, err);
    free(c);
}

/* The answer when Redis cannot be asked: the local limiter's decision for a
 * fail-open acquire, LLMQ_EREDIS otherwise, LLMQ_ECLOSED while closing. */
static enum llmq_rc fallback(struct call *c, struct llmq_grant *grant, struct llmq_error *err)
{
    struct llmq_alimiter *al = c->al;
    if (al->closing)
        return llmq_error_set(err, LLMQ_ECLOSED, "limiter: closed");
    if (c->kind == CALL_ACQUIRE && al->policy == LLMQ_FAIL_OPEN)
        return llmq_local_limiter_acquire(&al->local, &c->path, c->cost,
                                          (int64_t)(ev_now(al->loop) * 1000), grant);
    return llmq_error_set(err, LLMQ_EREDIS, "limiter: redis unreachable");
}

static void on_reply(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct call *c = privdata;
    struct llmq_grant grant;
    struct llmq_error err = {0};
    enum llmq_rc rc;
    if (r == NULL) {
        rc = fallback(c, &grant, &err);
    } else if (c->kind == CALL_ACQUIRE) {
        size_t decided;
        rc = llmq_acquire_reply_parse(r, c->path.account, &c->cost, &grant, 1, &decided,
                                      &c->al->local, &err);
    } else {
        static const char *const what[] = {"acquire", "settle", "refund", "pause"};
        rc = llmq_integer_reply_parse(r, what[c->kind], &grant.at_ms, &err);
    }
    finish(c, rc, rc == LLMQ_OK ? &grant : NULL, &err);
}

static void run_deferred(struct llmq_alimiter *al)
{
    struct call *list = al->defer_head;
    al->defer_head = al->defer_tail = NULL;
    while (list != NULL) {
        struct call *c = list;
        list = c->next;
        finish(c, c->rc, c->rc == LLMQ_OK ? &c->grant : NULL, &c->err);
    }
}

static void on_defer_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    run_deferred((struct llmq_alimiter *)((char *)w - offsetof(struct llmq_alimiter, defer_timer)));
}

static void defer(struct llmq_alimiter *al, struct call *c)
{
    c->next = NULL;
    if (al->defer_tail != NULL)
        al->defer_tail->next = c;
    else
        al->defer_head = c;
    al->defer_tail = c;
    if (!ev_is_active(&al->defer_timer)) {
        ev_timer_set(&al->defer_timer, 0.0, 0.0);
        ev_timer_start(al->loop, &al->defer_timer);
    }
}

/* Sends c's script, or defers the fallback answer when Redis is not ready. */
static enum llmq_rc submit(struct llmq_alimiter *al, struct call *c, enum llmq_script_id id,
                           int argc, const char **argv)
{
    if (al->closing) {
        free(c);
        return LLMQ_ECLOSED;
    }
    redisAsyncContext *ac = llmq_redis_async_context(al->conn);
    if (ac != NULL && llmq_script_run_async(ac, id, 1, argc, argv, NULL, on_reply, c) == LLMQ_OK)
        return LLMQ_OK;
    c->rc = fallback(c, &c->grant, &c->err);
    defer(al, c);
    return LLMQ_OK;
}

static struct call *new_call(struct llmq_alimiter *al, enum call_kind kind, llmq_alimiter_cb *cb,
                             void *privdata)
{
    struct call *c = calloc(1, sizeof(*c));
    if (c != NULL) {
        c->al = al;
        c->kind = kind;
        c->cb = cb;
        c->privdata = privdata;
    }
    return c;
}

enum llmq_rc llmq_alimiter_acquire(struct llmq_alimiter *al, const struct llmq_path *path,
                                   int64_t cost_tokens, enum llmq_priority prio,
                                   llmq_alimiter_cb *cb, void *privdata)
{
    static struct llmq_acquire_args a; /* large: off the stack; the loop is one thread */
    if (llmq_acquire_args_build(&a, path, &cost_tokens, 1, prio, NULL) != LLMQ_OK)
        return LLMQ_EINVAL;
    struct call *c = new_call(al, CALL_ACQUIRE, cb, privdata);
    if (c == NULL)
        return LLMQ_ENOMEM;
    c->path = *path;
    c->cost = cost_tokens;
    return submit(al, c, LLMQ_SCRIPT_ACQUIRE, a.argc, a.argv);
}

static enum llmq_rc adjust(struct llmq_alimiter *al, const char *reservation, int64_t actual,
                           llmq_alimiter_cb *cb, void *privdata)
{
    enum call_kind kind = actual >= 0 ? CALL_SETTLE : CALL_REFUND;
    struct call *c = new_call(al, kind, cb, privdata);
    if (c == NULL)
        return LLMQ_ENOMEM;
    if (llmq_local_limiter_adjust(&al->local, reservation, actual)) {
        c->rc = LLMQ_OK;
        defer(al, c);
        return LLMQ_OK;
    }
    struct llmq_adjust_args a;
    if (llmq_adjust_args_build(&a, reservation, actual, NULL) != LLMQ_OK) {
        free(c);
        return LLMQ_EINVAL;
    }
    return submit(al, c, actual >= 0 ? LLMQ_SCRIPT_LIMITER_SETTLE : LLMQ_SCRIPT_REFUND, a.argc,
                  a.argv);
}

enum llmq_rc llmq_alimiter_settle(struct llmq_alimiter *al, const char *reservation,
                                  int64_t actual_tokens, llmq_alimiter_cb *cb, void *privdata)
{
    if (actual_tokens < 0)
        return LLMQ_EINVAL;
    return adjust(al, reservation, actual_tokens, cb, privdata);
}

enum llmq_rc llmq_alimiter_refund(struct llmq_alimiter *al, const char *reservation,
                                  llmq_alimiter_cb *cb, void *privdata)
{
    return adjust(al, reservation, -1, cb, privdata);
}

enum llmq_rc llmq_alimiter_pause(struct llmq_alimiter *al, const char *account, const char *bucket,
                                 int64_t ms, llmq_alimiter_cb *cb, void *privdata)
{
    struct llmq_pause_args a;
    if (llmq_pause_args_build(&a, account, bucket, ms, NULL) != LLMQ_OK)
        return LLMQ_EINVAL;
    struct call *c = new_call(al, CALL_PAUSE, cb, privdata);
    if (c == NULL)
        return LLMQ_ENOMEM;
    return submit(al, c, LLMQ_SCRIPT_PAUSE, 3, a.argv);
}

int llmq_alimiter_ready(const struct llmq_alimiter *al)
{
    return llmq_redis_async_ready(al->conn);
}

void llmq_alimiter_free(struct llmq_alimiter *al)
{
    if (al == NULL)
        return;
    al->closing = 1;
    /* Pending callbacks run now with reply NULL and answer LLMQ_ECLOSED. */
    llmq_redis_async_free(al->conn);
    ev_timer_stop(al->loop, &al->defer_timer);
    run_deferred(al);
    llmq_local_limiter_free(&al->local);
    free(al);
}
