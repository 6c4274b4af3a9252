/* llmq-gateway: the process-wide state every module borrows, owned by
 * gateway.c (its identity and settings) and service.h (what runs: the
 * connections, the servers, the lease, the waiters, the offload thread).
 *
 * One libev loop runs everything: libmicrohttpd (external polling on its
 * epoll fd, http.c), two hiredis async connections (commands; blocking reads
 * of the events stream, waiters.c) and the timers of waiting requests.
 * Checking an uploaded file runs on one offload thread (offload.h), and the
 * check's result is what a batch made of the file reads back (file_jobs.h):
 * nothing parses a file's JSON on the loop. All state is in Redis (keys.h): a
 * gateway can be restarted or run beside others behind a load balancer. */
#ifndef LLMQ_GW_GATEWAY_H
#define LLMQ_GW_GATEWAY_H

#include "config.h"
#include "redis/keys.h"
#include "redis/redis_async.h"
#include "redis/redis_url.h"

struct ev_loop;
struct gw_http;
struct gw_waiters;
struct gw_offload;
struct gw_lease;
struct gw_fallbacks;
struct gw_stage;
struct gw_streams;
struct gw_dash;

/* Counters for /metrics (monotonic since start). */
struct gw_stats {
    unsigned long long requests, responses_2xx, responses_4xx, responses_5xx;
    unsigned long long calls_enqueued, calls_cancelled, calls_timed_out;
    /* 429s llmq gave itself (call_job.c): a call waited --max-wait-ms, or a
     * spend budget refused it */
    unsigned long long own_429_wait, own_429_budget;
    unsigned long long call_bodies_decoded; /* each call's body, once (calls.h) */
    unsigned long long files_created, batches_created, batches_cancelled;
    unsigned long long body_timeouts; /* connections closed: a body too slow (http.c) */
    long long calls_waiting;
    long long uploads_validating; /* files being checked now */
    /* batches made of a file stored before layout jobs1, whose requests were
     * checked again (off the loop, batch_input.h) */
    unsigned long long batch_inputs_checked_again;
};

struct gw {
    struct ev_loop *loop;
    const struct gw_config *cfg;
    char prefix[LLMQ_KEY_PREFIX_MAX];
    struct llmq_redis_url url;
    struct llmq_redis_async *redis;  /* commands */
    struct llmq_redis_async *events; /* XREAD BLOCK of P events only */
    struct gw_http *http;
    struct gw_http *metrics_http; /* NULL: none */
    struct gw_waiters *waiters;
    struct gw_streams *streams; /* streamed calls and their relay connection (stream.h) */
    struct gw_offload *offload; /* checks uploaded files off the loop */
    char id[40];                /* this process's id, "gw-<24 hex>": its lease (lease.h) */
    struct gw_lease *lease;
    struct gw_fallbacks *fallbacks; /* the account's model fallbacks (fallbacks.h) */
    struct gw_stage *stages;        /* batches this process is creating or recovering (batches.c) */
    struct gw_dash *dash;           /* the dashboard's feed and viewers (dashboard/dashboard.h) */
    long long job_body_max;         /* P settings max_body_bytes, read when Redis is ready */
    struct gw_stats stats;
};

/* Fills the identity and settings of a gateway for cfg (borrowed until the
 * gateway is done) on loop: the account prefix, the Redis URL, a new id, the
 * job body limit's default; everything else NULL/0 until
 * gw_service_start. Returns LLMQ_OK, or a configuration error in err. */
enum llmq_rc gw_init(struct gw *gw, const struct gw_config *cfg, struct ev_loop *loop,
                     struct llmq_error *err);

/* Forgets what gw_init filled (the URL may hold a password). */
void gw_clear(struct gw *gw);

/* The command connection, or NULL while Redis is not ready. */
redisAsyncContext *gw_redis(struct gw *gw);

#endif
