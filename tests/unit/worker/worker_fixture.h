/* A worker set up by hand around real parts, for unit tests of its flows: a
 * libev loop, the real metrics registry, one account "acct" whose async
 * Redis connection never becomes ready (nothing listens on port 1), so a
 * settle is kept for a resend as when Redis is away (once the loop ran:
 * worker_fixture_run_settles), and no HTTP client
 * (w.http == NULL: llmq_http_submit fails as for a client that is closing).
 * One fixture at a time (static storage: the worker is large). */
#ifndef LLMQ_TEST_WORKER_FIXTURE_H
#define LLMQ_TEST_WORKER_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "admin/metrics_worker.h"
#include "config.h"
#include "job_settle.h"
#include "redis/redis_async.h"
#include "worker.h"

static struct llmq_worker_config worker_fixture_cfg;
static struct llmq_worker worker_fixture_w;

/* Returns the worker, its account 0 ready to take jobs (asserting). */
static inline struct llmq_worker *worker_fixture_start(void)
{
    struct llmq_worker_config *cfg = &worker_fixture_cfg;
    struct llmq_worker *w = &worker_fixture_w;
    memset(cfg, 0, sizeof(*cfg));
    memset(w, 0, sizeof(*w));
    snprintf(cfg->base_url, sizeof(cfg->base_url), "http://127.0.0.1:9");
    snprintf(cfg->accounts[0].name, sizeof(cfg->accounts[0].name), "acct");
    cfg->n_accounts = 1;
    cfg->backoff_base_ms = 100;
    cfg->backoff_cap_ms = 1000;
    w->loop = ev_loop_new(EVFLAG_AUTO);
    w->cfg = cfg;
    w->n_accounts = 1;
    struct worker_account *a = &w->accounts[0];
    a->w = w;
    a->cfg = &cfg->accounts[0];
    snprintf(a->prefix, sizeof(a->prefix), "llmq:{acct}:");
    struct llmq_redis_url url;
    struct llmq_error err = {0};
    assert_int_equal(llmq_redis_url_parse("redis://127.0.0.1:1/0", &url, &err), LLMQ_OK);
    struct llmq_redis_async_config rc = {.name = "worker"};
    a->cmd = llmq_redis_async_new(w->loop, &url, &rc, NULL, NULL, &err);
    assert_non_null(a->cmd);
    llmq_worker_settle_start(a);
    assert_int_equal(llmq_worker_metrics_start(w), 0);
    return w;
}

/* Runs w's loop until account 0 holds a settle for a resend (the settle
 * queue is sent by a timer of the next loop turn); bounded. */
static inline void worker_fixture_run_settles(struct llmq_worker *w)
{
    for (int i = 0; i < 100 && llmq_worker_settle_waiting_first(&w->accounts[0]) == NULL; i++)
        ev_run(w->loop, EVRUN_NOWAIT);
}

static inline void worker_fixture_stop(struct llmq_worker *w)
{
    llmq_worker_settle_stop(&w->accounts[0]);
    llmq_worker_settle_free(&w->accounts[0]);
    llmq_redis_async_free(w->accounts[0].cmd);
    llmq_worker_metrics_free(w);
    ev_loop_destroy(w->loop);
}

#endif
