/* llmq-worker: takes jobs from Redis when the shared limiter grants their
 * budget and calls the API with them. See worker.h for the parts. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "base/backoff.h"
#include "base/clock.h"
#include "base/log.h"
#include "admin/metrics_worker.h"
#include "redis/redis.h"
#include "model_state.h"
#include "pbatch/pbatch.h"
#include "dispatch.h"
#include "job_settle.h"
#include "recover.h"
#include "spool.h"
#include "stream_relay.h"
#include "worker.h"

/* SIGTERM and SIGINT are held (blocked) from the first line of main until
 * the loop's handlers exist (llmq_worker_recover_start): one that arrives
 * while the worker starts (reading its key files, connecting to Redis,
 * loading its spool, binding its admin port) then stays pending and is
 * delivered to those handlers, which drain as for any later signal, instead
 * of killing the process with the default action (status 143). Threads
 * started meanwhile inherit the mask, so the signal reaches the main
 * thread. */
static void hold_stop_signals(int how)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    pthread_sigmask(how, &s, NULL);
}

static void print_summary(const struct llmq_worker *w)
{
    const struct llmq_worker_stats *s = &w->stats;
    LLMQ_LOG(LLMQ_LOG_INFO,
             "summary: dispatched %lld, succeeded %lld, retried %lld, dead %lld, 429s %lld, "
             "5xx %lld, transport errors %lld, invalid responses %lld, keys refused %lld, "
             "handed back %lld, tokens reserved %lld, used %lld",
             (long long)s->dispatched, (long long)s->succeeded, (long long)s->retried,
             (long long)s->dead, (long long)s->rate_limited, (long long)s->server_errors,
             (long long)s->transport_errors, (long long)s->invalid_responses,
             (long long)s->auth_refused, (long long)s->handed_back, (long long)s->tokens_reserved,
             (long long)s->tokens_used);
}

/* A worker that exits cleanly takes its heartbeat out of P workers, so
 * status does not list it as live, and what it said it is out of P winfo
 * (keys.h). The loop has ended: a short
 * blocking connection is fine here; failing to reach Redis only leaves the
 * entry to age out. */
static void forget_heartbeats(const struct llmq_worker *w)
{
    redisContext *c = llmq_redis_connect_parsed(&w->cfg->redis, 1000, NULL);
    if (c == NULL)
        return;
    for (int i = 0; i < w->n_accounts; i++) {
        for (int k = 0; k < 2; k++) {
            char key[LLMQ_KEY_FIXED_MAX];
            if (llmq_key(key, sizeof(key), w->accounts[i].prefix,
                         k == 0 ? LLMQ_KEY_WORKERS : LLMQ_KEY_WORKER_INFO, NULL, NULL) != LLMQ_OK)
                continue;
            redisReply *r = redisCommand(c, "HDEL %s %s", key, w->cfg->consumer);
            if (r != NULL)
                freeReplyObject(r);
        }
    }
    redisFree(c);
}

static int run(struct llmq_worker_config *cfg)
{
    static struct llmq_worker w;
    struct llmq_error err = {0};
    w.loop = ev_default_loop(EVFLAG_AUTO);
    w.cfg = cfg;
    llmq_worker_slots_init(&w.slots);
    llmq_rng_seed(&w.rng, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
    /* Connections are kept per endpoint (origin) by what it speaks
     * (worker/http/http.h): one per call for HTTP/1.1 (cleartext, --http1, or
     * an https:// endpoint that negotiated it), so up to the concurrency; a few
     * for HTTP/2 over TLS, which multiplexes ~100 streams each (curl 7.88
     * opens a new connection per overflowing transfer unless capped, so cap
     * at what the concurrency needs). */
    struct llmq_http_config hc = {
        .max_connections = cfg->concurrency,
        .h2_host_connections = cfg->concurrency / 100 + 2,
        .connect_timeout_ms = (long)cfg->connect_timeout_ms,
        .timeout_ms = (long)cfg->request_timeout_ms,
        .ca_file = cfg->ca_file[0] ? cfg->ca_file : NULL,
        .version = cfg->http1_only ? LLMQ_HTTP_1_1 : LLMQ_HTTP_PREFER_H2,
        .max_body_bytes = (size_t)cfg->max_response_bytes,
    };
    w.http = llmq_http_new(w.loop, &hc, &err);
    if (w.http == NULL) {
        fprintf(stderr, "llmq-worker: %s\n", err.msg);
        return 1;
    }
    w.n_accounts = cfg->n_accounts;
    for (int i = 0; i < cfg->n_accounts; i++) {
        struct worker_account *a = &w.accounts[i];
        a->w = &w;
        a->cfg = &cfg->accounts[i];
        llmq_account_prefix(a->cfg->name, a->prefix, sizeof(a->prefix), NULL);
        llmq_worker_account_start(a);
        llmq_worker_spool_load(a); /* a previous run's results, sent once redis answers */
        /* offload: the steps of provider batches (llmq offload) */
        llmq_worker_pbatch_start(a);
        LLMQ_LOG(LLMQ_LOG_INFO, "serving account %s (key %s…) as %s, concurrency %d", a->cfg->name,
                 a->cfg->api_key ? a->cfg->key_id : "none: endpoints only", cfg->consumer,
                 cfg->concurrency);
    }
    for (int i = 0; i < cfg->n_endpoint_keys; i++)
        LLMQ_LOG(LLMQ_LOG_INFO, "serving endpoint %s (key %s…)", cfg->endpoint_keys[i].name,
                 cfg->endpoint_keys[i].key_id);
    if (cfg->n_endpoint_keys > 0) {
        LLMQ_LOG(LLMQ_LOG_INFO, "endpoints served: %s%s",
                 cfg->serves[0] == ',' ? cfg->serves + 1 : cfg->serves,
                 cfg->serves[0] == ',' ? ", and the implicit endpoint (models without endpoints)"
                                       : "; not the implicit one (no account key)");
    }
    w.slots.last_busy_ms = llmq_monotonic_ms();
    llmq_worker_recover_start(&w);
    hold_stop_signals(SIG_UNBLOCK); /* a signal held since main runs its handler now */
    if (llmq_worker_metrics_start(&w) == 0)
        ev_run(w.loop, 0);
    else
        w.exit_code = 1; /* asked to be scraped but cannot listen */
    /* Shutdown order: curl while the loop lives, then Redis, then the loop. */
    for (int i = 0; i < w.n_accounts; i++)
        llmq_worker_pbatch_stop(&w.accounts[i]); /* a step in flight is taken over later */
    llmq_http_free(w.http);
    w.http = NULL;
    for (int i = 0; i < w.n_accounts; i++) {
        struct worker_account *a = &w.accounts[i];
        llmq_worker_account_stop(a);
        llmq_worker_pbatch_free(a); /* after the connection: its callbacks use it */
        llmq_worker_models_free(a); /* after the connection: its callbacks use them */
        /* Results redis never took (it is away): kept for the next start. */
        if (llmq_worker_spool_write(a) < 0)
            w.exit_code = 1;
        llmq_worker_spool_free(a);
        llmq_worker_settle_free(a);
    }
    ev_timer_stop(w.loop, &w.grace_timer);
    forget_heartbeats(&w);
    llmq_worker_relays_free(&w);  /* after the accounts: their publishes point into it */
    llmq_worker_metrics_free(&w); /* after the accounts: their depth reads point into it */
    print_summary(&w);
    ev_loop_destroy(w.loop);
    return w.exit_code;
}

int main(int argc, char **argv)
{
    hold_stop_signals(SIG_BLOCK);
    struct llmq_worker_config cfg;
    int rc = llmq_worker_config_parse(&cfg, argc, argv);
    if (rc != 0) {
        llmq_worker_config_free(&cfg);
        return rc == 1 ? 0 : 2;
    }
    llmq_log_configure(cfg.log_level, cfg.log_format);
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "llmq-worker: curl_global_init failed\n");
        return 1;
    }
    rc = run(&cfg);
    llmq_worker_config_free(&cfg);
    curl_global_cleanup();
    return rc;
}
