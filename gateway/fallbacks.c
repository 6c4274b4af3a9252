/* The gateway's copy of the account's model fallbacks (see fallbacks.h).
 * The map (a JSON object, model -> fallback) is replaced whole by each
 * read's reply; a reply that is not a hash's keeps the one before. */
#include "fallbacks.h"

#include <ev.h>
#include <hiredis/async.h>
#include <jansson.h>
#include <stdlib.h>

#include "base/log.h"
#include "llmq/limiter.h"
#include "redis/keys.h"

struct gw_fallbacks {
    struct gw *gw;
    ev_timer timer;
    json_t *map; /* model -> fallback model (strings); NULL: none known */
    int reading; /* an HGETALL is in flight */
};

static void on_read(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_fallbacks *f = privdata;
    redisReply *r = reply;
    f->reading = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return; /* connection lost, or not a hash: read again on the next tick */
    json_t *map = json_object();
    for (size_t i = 0; map != NULL && i + 1 < r->elements; i += 2) {
        const redisReply *m = r->element[i], *fb = r->element[i + 1];
        if (m->type == REDIS_REPLY_STRING && fb->type == REDIS_REPLY_STRING &&
            fb->len <= LLMQ_NAME_MAX)
            json_object_set_new(map, m->str, json_string(fb->str));
    }
    if (map == NULL)
        return;
    json_decref(f->map);
    f->map = map;
}

void gw_fallbacks_refresh(struct gw_fallbacks *f)
{
    redisAsyncContext *ac = f ? gw_redis(f->gw) : NULL;
    char key[LLMQ_KEY_FIXED_MAX];
    if (ac == NULL || f->reading ||
        llmq_key(key, sizeof(key), f->gw->prefix, LLMQ_KEY_EP_FALLBACKS, NULL, NULL) != LLMQ_OK)
        return;
    if (redisAsyncCommand(ac, on_read, f, "HGETALL %s", key) == REDIS_OK)
        f->reading = 1;
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    gw_fallbacks_refresh(t->data);
}

struct gw_fallbacks *gw_fallbacks_new(struct gw *gw)
{
    struct gw_fallbacks *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->gw = gw;
    double period = GW_FALLBACKS_REFRESH_MS / 1000.0;
    ev_timer_init(&f->timer, on_timer, period, period);
    f->timer.data = f;
    ev_timer_start(gw->loop, &f->timer);
    return f;
}

void gw_fallbacks_free(struct gw_fallbacks *f)
{
    if (f == NULL)
        return;
    ev_timer_stop(f->gw->loop, &f->timer);
    json_decref(f->map);
    free(f);
}

enum llmq_rc gw_fallbacks_map_apply(const json_t *map, struct llmq_job *job, struct llmq_error *err)
{
    const char *fb = map != NULL ? json_string_value(json_object_get(map, job->model)) : NULL;
    if (fb == NULL)
        return LLMQ_OK;
    return llmq_job_estimate_as(job, fb, NULL, err);
}

enum llmq_rc gw_fallbacks_apply(const struct gw_fallbacks *f, struct llmq_job *job,
                                struct llmq_error *err)
{
    return gw_fallbacks_map_apply(f != NULL ? f->map : NULL, job, err);
}

json_t *gw_fallbacks_map(const struct gw_fallbacks *f)
{
    return f != NULL && f->map != NULL ? json_incref(f->map) : NULL;
}
