/* llmq-gateway: configuration, the loop, Redis connections, signals.
 * SIGTERM/SIGINT: waiting callers get a 503 (their jobs, if unsent, are
 * cancelled), the server stops, exit 0. */
#include <ev.h>
#include <hiredis/async.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "jobs/job.h"
#include "llmq/priority.h"
#include "llmq/tokens.h"
#include "files.h"
#include "http.h"
#include "lease.h"
#include "offload.h"
#include "base/log.h"
#include "redis/redis.h"
#include "waiters.h"

void gw_calls_shutdown_one(struct gw_waiter *w);

redisAsyncContext *gw_redis(struct gw *gw)
{
    return llmq_redis_async_context(gw->redis);
}

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

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)revents;
    LLMQ_LOG(LLMQ_LOG_INFO, "gateway: signal %d, stopping", w->signum);
    ev_break(loop, EVBREAK_ALL);
}

static int write_port(const char *path, int port)
{
    char tmp[1100];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    return 0;
}

static void drain(struct ev_loop *loop)
{
    /* let answers already queued reach their sockets */
    for (int i = 0; i < 50; i++)
        ev_run(loop, EVRUN_NOWAIT);
}

int main(int argc, char **argv)
{
    struct gw_config cfg;
    int prc = gw_config_parse(&cfg, argc, argv);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    llmq_log_configure(cfg.log_level, cfg.log_format);
    signal(SIGPIPE, SIG_IGN);
    /* every waiting caller holds a socket: allow as many as the hard limit */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct gw gw = {.cfg = &cfg, .job_body_max = LLMQ_JOB_MAX_BODY_BYTES_DEFAULT};
    struct llmq_error err = {0};
    if (llmq_redis_url_parse(cfg.redis_url, &gw.url, &err) != LLMQ_OK ||
        llmq_account_prefix(cfg.account, gw.prefix, sizeof(gw.prefix), &err) != LLMQ_OK) {
        fprintf(stderr, "llmq-gateway: %s\n", err.msg);
        return 2;
    }
    llmq_redis_url_route(&gw.url, cfg.account); /* a cluster: the account's node */
    /* Cost estimates need the vocabularies; loading one takes about a second,
     * which would stall every request on the loop: load them before listening. */
    for (int e = 0; e < LLMQ_ENCODING_COUNT; e++)
        if (llmq_tokens_load((enum llmq_encoding)e, &err) != LLMQ_OK) {
            fprintf(stderr, "llmq-gateway: %s\n", err.msg);
            return 1;
        }
    gw.loop = ev_default_loop(EVFLAG_AUTO);
    gw_new_id("gw-", gw.id, sizeof(gw.id));
    gw.lease = gw_lease_new(&gw);
    gw.waiters = gw_waiters_new(&gw);
    gw.offload = gw_offload_new(gw.loop, &err);
    struct llmq_redis_async_config rc = {.name = "gateway",
                                         .command_timeout_ms = cfg.redis_timeout_ms};
    struct llmq_redis_async_config ec = {.name = "gateway-events",
                                         .command_timeout_ms = cfg.redis_timeout_ms,
                                         .block_ms = GW_EVENTS_BLOCK_MS};
    gw.redis = llmq_redis_async_new(gw.loop, &gw.url, &rc, on_redis_state, &gw, &err);
    gw.events =
        gw.redis ? llmq_redis_async_new(gw.loop, &gw.url, &ec, on_events_state, &gw, &err) : NULL;
    int port = 0;
    if (gw.lease == NULL || gw.waiters == NULL || gw.offload == NULL || gw.events == NULL) {
        fprintf(stderr, "llmq-gateway: %s\n", err.msg[0] ? err.msg : "out of memory");
        return 1;
    }
    gw.http = gw_http_start(&gw, cfg.listen_host, cfg.listen_port, 0, &port, &err);
    if (gw.http == NULL) {
        fprintf(stderr, "llmq-gateway: --listen: %s\n", err.msg);
        return 2;
    }
    if (cfg.metrics_host[0] != '\0') {
        gw.metrics_http = gw_http_start(&gw, cfg.metrics_host, cfg.metrics_port, 1, NULL, &err);
        if (gw.metrics_http == NULL) {
            fprintf(stderr, "llmq-gateway: --metrics-listen: %s\n", err.msg);
            return 2;
        }
    }
    if (cfg.port_file[0] != '\0' && write_port(cfg.port_file, port) != 0) {
        fprintf(stderr, "llmq-gateway: --port-file: cannot write %s\n", cfg.port_file);
        return 2;
    }
    LLMQ_LOG(LLMQ_LOG_INFO, "gateway: listening on %s:%d%s, account %s, lease %s", cfg.listen_host,
             port, cfg.tls_cert[0] ? " (TLS)" : "", cfg.account, gw.id);
    ev_signal sigterm, sigint;
    ev_signal_init(&sigterm, on_signal, SIGTERM);
    ev_signal_init(&sigint, on_signal, SIGINT);
    ev_signal_start(gw.loop, &sigterm);
    ev_signal_start(gw.loop, &sigint);
    ev_run(gw.loop, 0);
    gw_waiters_each(gw.waiters, gw_calls_shutdown_one);
    gw_offload_free(gw.offload); /* uploads still being checked get a 503 */
    drain(gw.loop);
    gw_http_free(gw.metrics_http);
    gw_http_free(gw.http);
    llmq_redis_async_free(gw.events);
    llmq_redis_async_free(gw.redis);
    gw_lease_free(gw.lease); /* after the connection: its last reply names it */
    gw_waiters_free(gw.waiters);
    ev_loop_destroy(gw.loop);
    memset(&gw.url, 0, sizeof(gw.url));
    return 0;
}
