/* worker/admin/metrics_worker.c: llmq_worker_count_outcome is the one place
 * an attempt's outcome is counted, so the exit summary (w->stats) and the
 * metrics agree for every settle mode: an authpause is a job handed back in
 * both (the summary used to leave it out), and the tokens used are the
 * same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../worker_fixture.h"

/* The sum of every series of family name in Prometheus text. */
static double family_sum(const char *text, const char *name)
{
    double sum = 0;
    size_t n = strlen(name);
    for (const char *s = text; s != NULL && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
        if (strncmp(s, name, n) != 0 || (s[n] != '{' && s[n] != ' '))
            continue;
        const char *v = strchr(s, ' ');
        const char *brace = strchr(s, '}');
        const char *eol = strchr(s, '\n');
        if (brace != NULL && (eol == NULL || brace < eol))
            v = strchr(brace, ' ');
        sum += strtod(v, NULL);
    }
    return sum;
}

static void test_every_outcome_counts_the_same_in_summary_and_metrics(void **state)
{
    (void)state;
    struct llmq_worker *w = worker_fixture_start();
    struct worker_account *a = &w->accounts[0];

    /* Each mode once, authpause and done twice (one done with no usage). */
    static const enum worker_settle_mode modes[] = {
        WORKER_SETTLE_DONE,      WORKER_SETTLE_DONE,     WORKER_SETTLE_RETRY,
        WORKER_SETTLE_DEAD,      WORKER_SETTLE_HANDBACK, WORKER_SETTLE_AUTHPAUSE,
        WORKER_SETTLE_AUTHPAUSE,
    };
    static const int64_t actual[] = {120, -1, 0, 30, 0, 0, 0};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        struct worker_job *job = llmq_worker_job_new(&w->slots, a);
        assert_non_null(job);
        job->model = strdup("gpt-4o-mini");
        job->settle.mode = modes[i];
        job->settle.actual_tokens = actual[i];
        llmq_worker_count_outcome(w, job, NULL);
        /* a dead decision counts nothing until its settle wrote the letter */
        if (modes[i] == WORKER_SETTLE_DEAD) {
            assert_int_equal(w->stats.dead, 0);
            assert_string_equal(job->settle.status_label, "not_sent");
            llmq_worker_count_dead_letter(w, job);
        }
        llmq_worker_job_free(job);
    }
    /* Not decided: counted nowhere. */
    struct worker_job *job = llmq_worker_job_new(&w->slots, a);
    job->model = strdup("gpt-4o-mini");
    llmq_worker_count_outcome(w, job, NULL);
    llmq_worker_job_free(job);

    size_t len = 0;
    char *text = llmq_worker_metrics_render(w, &len);
    assert_non_null(text);
    assert_int_equal(w->stats.succeeded, 2);
    assert_int_equal(w->stats.retried, 1);
    assert_int_equal(w->stats.dead, 1);
    assert_int_equal(w->stats.handed_back, 3);
    assert_int_equal(w->stats.tokens_used, 120);
    assert_true(family_sum(text, "llmq_jobs_succeeded_total") == (double)w->stats.succeeded);
    assert_true(family_sum(text, "llmq_jobs_retried_total") == (double)w->stats.retried);
    assert_true(family_sum(text, "llmq_jobs_dead_total") == (double)w->stats.dead);
    assert_true(family_sum(text, "llmq_jobs_handed_back_total") == (double)w->stats.handed_back);
    assert_true(family_sum(text, "llmq_tokens_used_total") == (double)w->stats.tokens_used);
    free(text);
    worker_fixture_stop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_outcome_counts_the_same_in_summary_and_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
