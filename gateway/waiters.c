/* Waiters (see waiters.h): a chained hash table of job ids and the events
 * stream reader that feeds it. */
#include "waiters.h"

#include <ev.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "redis/redis.h"

#define BUCKETS 4096
#define EVENTS_COUNT 1000
#define RECHECK_S 30.0

struct gw_waiters {
    struct gw *gw;
    struct gw_waiter *table[BUCKETS];
    size_t count;
    char last_id[64]; /* "" until the tail was read */
    int reading;      /* an XREAD or XREVRANGE is in flight */
    ev_timer recheck;
};

static size_t bucket_of(const char *id)
{
    size_t h = 5381;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = h * 33 + *p;
    return h % BUCKETS;
}

void gw_waiters_add(struct gw_waiters *ws, struct gw_waiter *w)
{
    size_t b = bucket_of(w->job_id);
    w->next = ws->table[b];
    ws->table[b] = w;
    w->registered = 1;
    ws->count++;
    ws->gw->stats.calls_waiting = (long long)ws->count;
}

void gw_waiters_remove(struct gw_waiters *ws, struct gw_waiter *w)
{
    if (!w->registered)
        return;
    struct gw_waiter **p = &ws->table[bucket_of(w->job_id)];
    while (*p != NULL && *p != w)
        p = &(*p)->next;
    if (*p == w)
        *p = w->next;
    w->registered = 0;
    w->next = NULL;
    ws->count--;
    ws->gw->stats.calls_waiting = (long long)ws->count;
}

struct gw_waiter *gw_waiters_find(struct gw_waiters *ws, const char *id,
                                  void (*on_maybe_ended)(struct gw_waiter *w))
{
    for (struct gw_waiter *w = ws->table[bucket_of(id)]; w != NULL; w = w->next)
        if (strcmp(w->job_id, id) == 0 &&
            (on_maybe_ended == NULL || w->on_maybe_ended == on_maybe_ended))
            return w;
    return NULL;
}

void gw_waiters_each(struct gw_waiters *ws, void (*f)(struct gw_waiter *w))
{
    for (size_t b = 0; b < BUCKETS; b++) {
        struct gw_waiter *w = ws->table[b];
        while (w != NULL) {
            struct gw_waiter *next = w->next; /* f may remove w */
            f(w);
            w = next;
        }
    }
}

static void tell_all(struct gw_waiter *w)
{
    w->on_maybe_ended(w);
}

static void read_next(struct gw_waiters *ws);

static void on_events(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_waiters *ws = privdata;
    redisReply *r = reply;
    ws->reading = 0;
    if (r == NULL)
        return; /* connection lost: gw_waiters_events_state(1) starts again */
    if (r->type == REDIS_REPLY_ERROR) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: reading events: %s", r->str);
        llmq_redis_async_reset(ws->gw->events);
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2) {
        const redisReply *entries = r->element[0]->element[1];
        for (size_t i = 0; entries->type == REDIS_REPLY_ARRAY && i < entries->elements; i++) {
            const redisReply *e = entries->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
                e->element[0]->type != REDIS_REPLY_STRING)
                continue;
            snprintf(ws->last_id, sizeof(ws->last_id), "%s", e->element[0]->str);
            /* an entry names every job one call finished */
            size_t pos = 0;
            for (const char *id; (id = llmq_redis_field_next(e->element[1], "id", &pos)) != NULL;) {
                struct gw_waiter *w = gw_waiters_find(ws, id, NULL);
                if (w != NULL)
                    w->on_maybe_ended(w);
            }
        }
    }
    read_next(ws);
}

static void on_tail(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_waiters *ws = privdata;
    redisReply *r = reply;
    ws->reading = 0;
    if (r == NULL)
        return;
    if (r->type != REDIS_REPLY_ARRAY) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: reading the events tail: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        llmq_redis_async_reset(ws->gw->events);
        return;
    }
    snprintf(ws->last_id, sizeof(ws->last_id), "0-0");
    if (r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
        r->element[0]->elements == 2 && r->element[0]->element[0]->type == REDIS_REPLY_STRING)
        snprintf(ws->last_id, sizeof(ws->last_id), "%s", r->element[0]->element[0]->str);
    /* anything that ended before we knew the tail */
    gw_waiters_each(ws, tell_all);
    read_next(ws);
}

static void read_next(struct gw_waiters *ws)
{
    redisAsyncContext *ac = llmq_redis_async_context(ws->gw->events);
    if (ac == NULL || ws->reading)
        return;
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_key(key, sizeof(key), ws->gw->prefix, LLMQ_KEY_EVENTS, NULL, NULL) != LLMQ_OK)
        return; /* cannot happen: the prefix fits LLMQ_KEY_PREFIX_MAX */
    int rc;
    if (ws->last_id[0] == '\0')
        rc = redisAsyncCommand(ac, on_tail, ws, "XREVRANGE %s + - COUNT 1", key);
    else
        rc = redisAsyncCommand(ac, on_events, ws, "XREAD COUNT %d BLOCK %d STREAMS %s %s",
                               EVENTS_COUNT, GW_EVENTS_BLOCK_MS, key, ws->last_id);
    if (rc == REDIS_OK)
        ws->reading = 1;
}

void gw_waiters_events_state(struct gw_waiters *ws, int ready)
{
    if (!ready)
        return;
    /* keep last_id: read on from where we were; tell everyone once in case
     * the stream was trimmed past it meanwhile */
    if (ws->last_id[0] != '\0')
        gw_waiters_each(ws, tell_all);
    read_next(ws);
}

static void on_recheck(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct gw_waiters *ws = t->data;
    gw_waiters_each(ws, tell_all);
}

struct gw_waiters *gw_waiters_new(struct gw *gw)
{
    struct gw_waiters *ws = calloc(1, sizeof(*ws));
    if (ws == NULL)
        return NULL;
    ws->gw = gw;
    ev_timer_init(&ws->recheck, on_recheck, RECHECK_S, RECHECK_S);
    ws->recheck.data = ws;
    ev_timer_start(gw->loop, &ws->recheck);
    return ws;
}

void gw_waiters_free(struct gw_waiters *ws)
{
    if (ws == NULL)
        return;
    ev_timer_stop(ws->gw->loop, &ws->recheck);
    free(ws);
}
