/* worker/call.c: how an attempt that ends before any response is counted.
 * A job on its last attempt whose request cannot be submitted dies; the
 * worker's summary counters (w->stats, printed at exit) and its metrics
 * (llmq_jobs_dead_total) must both count it, once.
 *
 * The worker is set up by hand around real parts: a libev loop, the real
 * metrics registry, and a real async Redis connection that never becomes
 * ready (nothing listens on its port), so the settle is kept for a resend as
 * when Redis is away. There is no HTTP client (w.http == NULL), which makes
 * llmq_http_submit fail the way it does for a client that is closing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admin/metrics_worker.h"
#include "config.h"
#include "redis/redis_async.h"
#include "testsupport.h"
#include "worker.h"

static struct worker_job *new_job(struct worker_account *a, int attempts, int max_attempts)
{
    struct worker_job *job = calloc(1, sizeof(*job));
    assert_non_null(job);
    job->acct = a;
    snprintf(job->eid, sizeof(job->eid), "1-0");
    snprintf(job->prio, sizeof(job->prio), "normal");
    job->id = strdup("j-1");
    job->handle = strdup("h-1");
    job->model = strdup("gpt-4o-mini");
    job->url_path = strdup("/v1/chat/completions");
    job->body = strdup("{\"model\":\"gpt-4o-mini\",\"messages\":[]}");
    job->attempts = attempts;
    job->max_attempts = max_attempts;
    job->cost = 50;
    job->est_prompt_tokens = -1;
    return job;
}

static void test_submit_failure_on_last_attempt_counts_dead_once(void **state)
{
    (void)state;
    static struct llmq_worker_config cfg;
    static struct llmq_worker w;
    memset(&cfg, 0, sizeof(cfg));
    memset(&w, 0, sizeof(w));
    snprintf(cfg.base_url, sizeof(cfg.base_url), "http://127.0.0.1:9");
    snprintf(cfg.accounts[0].name, sizeof(cfg.accounts[0].name), "acct");
    cfg.n_accounts = 1;
    cfg.backoff_base_ms = 100;
    cfg.backoff_cap_ms = 1000;
    w.loop = ev_loop_new(EVFLAG_AUTO);
    w.cfg = &cfg;
    w.n_accounts = 1;
    struct worker_account *a = &w.accounts[0];
    a->w = &w;
    a->cfg = &cfg.accounts[0];
    snprintf(a->prefix, sizeof(a->prefix), "llmq:{acct}:");
    struct llmq_redis_url url;
    struct llmq_error err = {0};
    assert_int_equal(llmq_redis_url_parse("redis://127.0.0.1:1/0", &url, &err), LLMQ_OK);
    struct llmq_redis_async_config rc = {.name = "worker"};
    a->cmd = llmq_redis_async_new(w.loop, &url, &rc, NULL, NULL, &err);
    assert_non_null(a->cmd);
    assert_int_equal(llmq_worker_metrics_start(&w), 0);

    struct worker_job *job = new_job(a, 1, 1);
    llmq_worker_call(&w, job);

    assert_int_equal(job->settle.mode, WORKER_SETTLE_DEAD);
    assert_int_equal(w.stats.dead, 1);
    assert_int_equal(w.stats.retried, 0);
    size_t len = 0;
    char *text = llmq_worker_metrics_render(&w, &len);
    assert_non_null(text);
    assert_non_null(strstr(
        text,
        "llmq_jobs_dead_total{account=\"acct\",model=\"gpt-4o-mini\",status=\"not_sent\"} 1\n"));
    free(text);
    assert_ptr_equal(a->settle_retry, job); /* kept: Redis is not there */

    a->settle_retry = NULL;
    llmq_worker_job_free(job);
    llmq_redis_async_free(a->cmd);
    llmq_worker_metrics_free(&w);
    ev_loop_destroy(w.loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submit_failure_on_last_attempt_counts_dead_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
