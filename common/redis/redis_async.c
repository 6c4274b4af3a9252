/* A self-healing async Redis connection; see redis_async.h. */
#include "redis/redis_async.h"

#include <ev.h>
#include <hiredis/adapters/libev.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/backoff.h"
#include "base/log.h"
#include "redis/sentinel.h"

enum ra_state { RA_DISCONNECTED = 0, RA_CONNECTING, RA_READY };

struct llmq_redis_async {
    struct ev_loop *loop;
    struct llmq_redis_url url;
    struct llmq_redis_async_config cfg;
    llmq_redis_async_state_cb *cb;
    void *privdata;
    redisAsyncContext *ac;
    enum ra_state state;
    int closing;
    int64_t backoff_ms; /* the reconnect step (llmq_backoff_reconnect_ms) */
    uint64_t rng;
    ev_timer reconnect_timer;
    ev_timer connect_timer;
};

#define RA_OF(w, member)                                                                           \
    ((struct llmq_redis_async *)((char *)(w) - offsetof(struct llmq_redis_async, member)))

static void start_connect(struct llmq_redis_async *ra);

static void set_state(struct llmq_redis_async *ra, enum ra_state s)
{
    int was_ready = ra->state == RA_READY;
    ra->state = s;
    int ready = s == RA_READY;
    if (was_ready != ready && !ra->closing) {
        LLMQ_LOG(ready ? LLMQ_LOG_INFO : LLMQ_LOG_WARN, "%s: redis %s", ra->cfg.name,
                 ready ? "connected" : "connection lost");
        if (ra->cb != NULL)
            ra->cb(ra, ready, ra->privdata);
    }
}

static void schedule_reconnect(struct llmq_redis_async *ra)
{
    ev_timer_stop(ra->loop, &ra->connect_timer);
    set_state(ra, RA_DISCONNECTED);
    if (ra->closing || ev_is_active(&ra->reconnect_timer))
        return;
    /* Jittered: spread many clients after a Redis restart. */
    double delay_s =
        (double)llmq_backoff_reconnect_ms(&ra->backoff_ms, ra->cfg.reconnect_max_ms, &ra->rng) /
        1000.0;
    ev_timer_set(&ra->reconnect_timer, delay_s, 0.0);
    ev_timer_start(ra->loop, &ra->reconnect_timer);
}

static void on_ping(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct llmq_redis_async *ra = privdata;
    redisReply *r = reply;
    if (r == NULL || ac->data == NULL || ra->ac != ac)
        return; /* the disconnect path handles it */
    if (r->type == REDIS_REPLY_ERROR) {
        LLMQ_LOG(LLMQ_LOG_WARN, "%s: redis refused the connection: %s", ra->cfg.name, r->str);
        redisAsyncDisconnect(ac);
        return;
    }
    ev_timer_stop(ra->loop, &ra->connect_timer);
    ra->backoff_ms = ra->cfg.reconnect_min_ms;
    set_state(ra, RA_READY);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct llmq_redis_async *ra = ac->data;
    if (ra == NULL || status == REDIS_OK)
        return;
    ra->ac = NULL; /* hiredis frees ac after this callback */
    schedule_reconnect(ra);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    struct llmq_redis_async *ra = ac->data;
    if (ra == NULL)
        return;
    ra->ac = NULL;
    schedule_reconnect(ra);
}

static void on_connect_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_redis_async *ra = RA_OF(w, connect_timer);
    if (ra->state == RA_READY || ra->ac == NULL)
        return;
    redisAsyncContext *ac = ra->ac;
    ra->ac = NULL;
    ac->data = NULL; /* its callbacks now see a detached context */
    redisAsyncFree(ac);
    schedule_reconnect(ra);
}

static void on_reconnect_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    start_connect(RA_OF(w, reconnect_timer));
}

static void start_connect(struct llmq_redis_async *ra)
{
    /* Behind Sentinel, ask for the master again at every (re)connect: that
     * is how a failover is followed. */
    if (llmq_sentinel_resolve(&ra->url, ra->cfg.timeout_ms, NULL) != LLMQ_OK) {
        schedule_reconnect(ra);
        return;
    }
    redisAsyncContext *ac = redisAsyncConnect(ra->url.host, ra->url.port);
    if (ac == NULL || ac->err) {
        if (ac != NULL)
            redisAsyncFree(ac);
        schedule_reconnect(ra);
        return;
    }
    ac->data = ra;
    if (redisLibevAttach(ra->loop, ac) != REDIS_OK) {
        ac->data = NULL;
        redisAsyncFree(ac);
        schedule_reconnect(ra);
        return;
    }
    ra->ac = ac;
    ra->state = RA_CONNECTING;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (ra->url.password[0] != '\0') {
        if (ra->url.user[0] != '\0')
            redisAsyncCommand(ac, NULL, NULL, "AUTH %s %s", ra->url.user, ra->url.password);
        else
            redisAsyncCommand(ac, NULL, NULL, "AUTH %s", ra->url.password);
    }
    if (ra->url.db != 0)
        redisAsyncCommand(ac, NULL, NULL, "SELECT %d", ra->url.db);
    redisAsyncCommand(ac, on_ping, ra, "PING");
    ev_timer_set(&ra->connect_timer, ra->cfg.timeout_ms / 1000.0, 0.0);
    ev_timer_start(ra->loop, &ra->connect_timer);
}

struct llmq_redis_async *llmq_redis_async_new(struct ev_loop *loop,
                                              const struct llmq_redis_url *url,
                                              const struct llmq_redis_async_config *cfg,
                                              llmq_redis_async_state_cb *cb, void *privdata,
                                              struct llmq_error *err)
{
    struct llmq_redis_async *ra = calloc(1, sizeof(*ra));
    if (ra == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "redis: out of memory");
        return NULL;
    }
    ra->loop = loop;
    ra->url = *url;
    ra->cfg = *cfg;
    if (ra->cfg.timeout_ms <= 0)
        ra->cfg.timeout_ms = 2000;
    if (ra->cfg.reconnect_min_ms <= 0)
        ra->cfg.reconnect_min_ms = 100;
    if (ra->cfg.reconnect_max_ms <= 0)
        ra->cfg.reconnect_max_ms = 5000;
    if (ra->cfg.name == NULL)
        ra->cfg.name = "redis";
    ra->cb = cb;
    ra->privdata = privdata;
    ra->backoff_ms = ra->cfg.reconnect_min_ms;
    llmq_backoff_rng_seed(&ra->rng, (uint64_t)(uintptr_t)ra ^ (uint64_t)(ev_now(loop) * 1000));
    ev_timer_init(&ra->reconnect_timer, on_reconnect_timer, 0.0, 0.0);
    ev_timer_init(&ra->connect_timer, on_connect_timeout, 0.0, 0.0);
    start_connect(ra);
    return ra;
}

redisAsyncContext *llmq_redis_async_context(struct llmq_redis_async *ra)
{
    return ra->state == RA_READY ? ra->ac : NULL;
}

int llmq_redis_async_ready(const struct llmq_redis_async *ra)
{
    return ra->state == RA_READY;
}

void llmq_redis_async_reset(struct llmq_redis_async *ra)
{
    if (ra->ac != NULL)
        redisAsyncDisconnect(ra->ac); /* on_disconnect schedules the reconnect */
}

void llmq_redis_async_free(struct llmq_redis_async *ra)
{
    if (ra == NULL)
        return;
    ra->closing = 1;
    ev_timer_stop(ra->loop, &ra->reconnect_timer);
    ev_timer_stop(ra->loop, &ra->connect_timer);
    if (ra->ac != NULL) {
        redisAsyncContext *ac = ra->ac;
        ra->ac = NULL;
        redisAsyncFree(ac); /* pending callbacks run now with reply NULL */
    }
    free(ra);
}
