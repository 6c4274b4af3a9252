/* A running gateway put together (see service.h). */
#include "service.h"

#include <ev.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "batches.h"
#include "call_wait.h"
#include "dashboard/dashboard.h"
#include "fallbacks.h"
#include "http.h"
#include "lease.h"
#include "llmq/priority.h"
#include "offload.h"
#include "redis/keys.h"
#include "router.h"
#include "stream.h"
#include "waiters.h"

static const struct gw_http_hooks router_hooks = {
    .admit = gw_router_admit,
    .handle = gw_router_handle,
};

static void on_settings(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw *gw = privdata;
    redisReply *r = reply;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        long long v = atoll(r->str);
        if (v > 0 && v < (1LL << 40))
            gw->job_body_max = v;
    }
}

static void on_redis_state(struct llmq_redis_async *ra, int ready, void *privdata)
{
    struct gw *gw = privdata;
    LLMQ_LOG(ready ? LLMQ_LOG_INFO : LLMQ_LOG_WARN, "gateway: redis %s",
             ready ? "connected" : "disconnected");
    redisAsyncContext *ac = llmq_redis_async_context(ra);
    if (!ready || ac == NULL)
        return;
    gw_lease_renew(gw->lease);
    gw_fallbacks_refresh(gw->fallbacks);
    /* the prefix fits LLMQ_KEY_PREFIX_MAX, so these fixed keys fit their buffer */
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_key(key, sizeof(key), gw->prefix, LLMQ_KEY_SETTINGS, NULL, NULL) == LLMQ_OK)
        redisAsyncCommand(ac, on_settings, gw, "HGET %s max_body_bytes", key);
    /* the queue streams and group, as llmq_job_store_prepare makes them */
    for (int i = 0; i < LLMQ_PRIORITY_COUNT; i++)
        if (llmq_key(key, sizeof(key), gw->prefix, LLMQ_KEY_QUEUE,
                     llmq_priority_name(llmq_priority_by_rank(i)), NULL) == LLMQ_OK)
            redisAsyncCommand(ac, NULL, NULL, "XGROUP CREATE %s %s 0 MKSTREAM", key, LLMQ_GROUP);
}

static void on_events_state(struct llmq_redis_async *ra, int ready, void *privdata)
{
    (void)ra;
    struct gw *gw = privdata;
    gw_waiters_events_state(gw->waiters, ready);
}

/* Puts what in front of err's message. */
static void name_failure(struct llmq_error *err, const char *what)
{
    char msg[sizeof(err->msg)];
    snprintf(msg, sizeof(msg), "%s", err->msg);
    llmq_error_set(err, err->rc ? err->rc : LLMQ_EIO, "%s: %s", what, msg);
}

/* Stops what was started, in the order the parts need (see service.h). */
static void stop_parts(struct gw *gw)
{
    gw_streams_shutdown(gw->streams); /* an error event ends each stream */
    gw_dash_shutdown(gw->dash);       /* its event streams end */
    if (gw->waiters != NULL)
        gw_waiters_each(gw->waiters, gw_call_wait_shutdown_one);
    gw_offload_free(gw->offload); /* uploads still being checked get a 503 */
    gw->offload = NULL;
    /* let answers already queued reach their sockets */
    for (int i = 0; i < 50; i++)
        ev_run(gw->loop, EVRUN_NOWAIT);
    gw_http_free(gw->metrics_http);
    gw_http_free(gw->http);
    gw->metrics_http = gw->http = NULL;
    gw_streams_free(gw->streams);
    gw->streams = NULL;
    llmq_redis_async_free(gw->events);
    llmq_redis_async_free(gw->redis);
    gw->events = gw->redis = NULL;
    gw_dash_free(gw->dash); /* after the connection: its last replies name it */
    gw->dash = NULL;
    gw_lease_free(gw->lease); /* after the connection: its last reply names it */
    gw->lease = NULL;
    gw_fallbacks_free(gw->fallbacks); /* after the connection too */
    gw->fallbacks = NULL;
    gw_waiters_free(gw->waiters);
    gw->waiters = NULL;
}

int gw_service_start(struct gw *gw, int *port, struct llmq_error *err)
{
    const struct gw_config *cfg = gw->cfg;
    gw->lease = gw_lease_new(gw, gw_batches_recover);
    gw->fallbacks = gw_fallbacks_new(gw);
    gw->waiters = gw_waiters_new(gw);
    gw->offload = gw_offload_new(gw->loop, err);
    gw->dash = gw_dash_new(gw);
    if (gw->dash == NULL || gw->lease == NULL || gw->fallbacks == NULL || gw->waiters == NULL ||
        gw->offload == NULL) {
        if (err->msg[0] == '\0')
            llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
        stop_parts(gw);
        return 1;
    }
    /* the addresses first: a configuration that cannot be served fails
     * before anything connects (nothing runs until the loop does) */
    gw->http = gw_http_start(gw, cfg->listen_host, cfg->listen_port, 0, &router_hooks, port, err);
    if (gw->http == NULL) {
        name_failure(err, "--listen");
        stop_parts(gw);
        return 2;
    }
    if (cfg->metrics_host[0] != '\0') {
        gw->metrics_http =
            gw_http_start(gw, cfg->metrics_host, cfg->metrics_port, 1, &router_hooks, NULL, err);
        if (gw->metrics_http == NULL) {
            name_failure(err, "--metrics-listen");
            stop_parts(gw);
            return 2;
        }
    }
    struct llmq_redis_async_config rc = {.name = "gateway",
                                         .command_timeout_ms = cfg->redis_timeout_ms};
    struct llmq_redis_async_config ec = {.name = "gateway-events",
                                         .command_timeout_ms = cfg->redis_timeout_ms,
                                         .block_ms = GW_EVENTS_BLOCK_MS};
    gw->redis = llmq_redis_async_new(gw->loop, &gw->url, &rc, on_redis_state, gw, err);
    gw->events =
        gw->redis ? llmq_redis_async_new(gw->loop, &gw->url, &ec, on_events_state, gw, err) : NULL;
    gw->streams = gw->events ? gw_streams_new(gw, err) : NULL;
    if (gw->events == NULL || gw->streams == NULL) {
        if (err->msg[0] == '\0')
            llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
        stop_parts(gw);
        return 1;
    }
    return 0;
}

void gw_service_stop(struct gw *gw)
{
    stop_parts(gw);
}
