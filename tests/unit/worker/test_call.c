/* worker/call.c: how an attempt that ends before any response is counted.
 * A job on its last attempt whose request cannot be submitted dies; the
 * worker's summary counters (w->stats, printed at exit) and its metrics
 * (llmq_jobs_dead_total) must both count it, once.
 *
 * The worker is worker_fixture.h's: real parts, Redis away, no HTTP client
 * (which makes llmq_http_submit fail). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admin/metrics_worker.h"
#include "call.h"
#include "testsupport.h"
#include "worker_fixture.h"

static struct worker_job *new_job(struct worker_account *a, int attempts, int max_attempts)
{
    struct worker_job *job = llmq_worker_job_new(&a->w->slots, a); /* as dispatch makes it */
    assert_non_null(job);
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
    llmq_worker_job_hold(job);
    return job;
}

static void test_submit_failure_on_last_attempt_counts_dead_once(void **state)
{
    (void)state;
    struct llmq_worker *w = worker_fixture_start();
    struct worker_account *a = &w->accounts[0];

    struct worker_job *job = new_job(a, 1, 1);
    llmq_worker_call(w, job);

    assert_int_equal(job->settle.mode, WORKER_SETTLE_DEAD);
    /* a dead letter is counted once its settle says it was written, not at
     * the decision (the settle can find the job cancelled meanwhile) */
    assert_int_equal(w->stats.dead, 0);
    assert_int_equal(w->stats.retried, 0);
    size_t len = 0;
    char *text = llmq_worker_metrics_render(w, &len);
    assert_non_null(text);
    assert_null(strstr(text, "llmq_jobs_dead_total{account=\"acct\""));
    free(text);
    llmq_worker_count_dead_letter(w, job); /* what the settle's reply "written" does */
    assert_int_equal(w->stats.dead, 1);
    text = llmq_worker_metrics_render(w, &len);
    assert_non_null(text);
    assert_non_null(strstr(
        text,
        "llmq_jobs_dead_total{account=\"acct\",model=\"gpt-4o-mini\",status=\"not_sent\"} 1\n"));
    free(text);
    worker_fixture_run_settles(w);
    assert_ptr_equal(llmq_worker_settle_waiting_first(a), job); /* kept: Redis is not there */

    worker_fixture_stop(w); /* frees it with the account's waiting settles */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submit_failure_on_last_attempt_counts_dead_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
