/* The gateway's lease (see lease.h). */
#include "lease.h"

#include <ev.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "redis/script.h"

struct gw_lease {
    struct gw *gw;
    gw_lease_orphan_fn *on_orphan;
    ev_timer timer;
    int renewing; /* a gw_lease call is in flight */
};

static void on_renewed(redisAsyncContext *ac, redisReply *reply, void *privdata)
{
    (void)ac;
    struct gw_lease *l = privdata;
    l->renewing = 0;
    if (reply == NULL)
        return; /* connection lost: renewed again once it is ready */
    if (reply->type != REDIS_REPLY_ARRAY) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: renewing lease %s: %s", l->gw->id,
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        return;
    }
    for (size_t i = 0; i + 1 < reply->elements; i += 2)
        if (reply->element[i]->type == REDIS_REPLY_STRING &&
            reply->element[i + 1]->type == REDIS_REPLY_STRING)
            l->on_orphan(l->gw, reply->element[i]->str, reply->element[i + 1]->str);
}

void gw_lease_renew(struct gw_lease *l)
{
    redisAsyncContext *ac = l ? gw_redis(l->gw) : NULL;
    if (ac == NULL || l->renewing)
        return;
    char ms[24];
    snprintf(ms, sizeof(ms), "%lld", l->gw->cfg->lease_ms);
    const char *argv[] = {l->gw->prefix, l->gw->id, ms};
    if (llmq_script_run_async(ac, LLMQ_SCRIPT_GW_LEASE, 1, 3, argv, NULL, on_renewed, l) == LLMQ_OK)
        l->renewing = 1;
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    gw_lease_renew(t->data);
}

struct gw_lease *gw_lease_new(struct gw *gw, gw_lease_orphan_fn *on_orphan)
{
    struct gw_lease *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->gw = gw;
    l->on_orphan = on_orphan;
    double period = (double)gw->cfg->lease_ms / 3000.0;
    ev_timer_init(&l->timer, on_timer, period, period);
    l->timer.data = l;
    ev_timer_start(gw->loop, &l->timer);
    return l;
}

void gw_lease_free(struct gw_lease *l)
{
    if (l == NULL)
        return;
    ev_timer_stop(l->gw->loop, &l->timer);
    free(l);
}
