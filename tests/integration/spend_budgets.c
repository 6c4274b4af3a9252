/* Spend budgets hold exactly under concurrency (docs/spend.md):
 * four workers run two tenants' jobs against openai-sim, tenant acme under
 * a token budget and tenant beta under a USD budget. What each really spent
 * (the results' usage; beta's at data/prices.json's gpt-4o-mini price) is
 * at most its budget and at least 85% of it when the rest parks; the parked
 * jobs stay queued with no attempt counted and show as waiting for budget;
 * the budget's own count is the real spend, half of the prompt tokens
 * reported cached and priced at the cached price. Raising both budgets runs the
 * rest: every job done once (one attempt, one request to the API). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "spend_support.h"

#define ACME_JOBS 80
#define BETA_JOBS 120
#define ACME_TOKENS 2000
#define BETA_USD "0.0012"
#define BETA_NUSD 1200000

static void test_budgets_hold_then_raise(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spend");
    struct sim_proc sim;
    const char *sim_args[] = {"--cached-pct", "50", NULL}; /* cached prompt tokens priced too */
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    char jobs[128];
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-spend-%d.jsonl", (int)getpid());

    const char *b1[] = {"llmq",     "budgets", "set",      "--tenant", "acme",
                        "--tokens", "2000",    "--period", "month",    NULL};
    free(spend_cli(&a, 0, b1));
    const char *b2[] = {"llmq",  "budgets", "set",      "--tenant", "beta",
                        "--usd", BETA_USD,  "--period", "month",    NULL};
    free(spend_cli(&a, 0, b2));
    spend_write_jobs(jobs, "acme", ACME_JOBS, "acme", NULL, 40);
    worker_enqueue(a.name, jobs);
    spend_write_jobs(jobs, "beta", BETA_JOBS, "beta", NULL, 40);
    worker_enqueue(a.name, jobs);

    char logs[4][128];
    pid_t pids[4];
    const char *args[] = {"--concurrency", "16", NULL};
    worker_start_n(a.name, &sim, "spend", 4, logs, pids, args);
    const char *groups[] = {"acme", "beta"};
    const int counts[] = {ACME_JOBS, BETA_JOBS};
    assert_true(spend_wait_settled(&a, groups, counts, 2, 30000));

    struct spend_real acme = spend_real_read(&a, "acme", ACME_JOBS);
    struct spend_real beta = spend_real_read(&a, "beta", BETA_JOBS);
    printf("# acme: %lld done, %lld parked, %lld of %d tokens; beta: %lld done, %lld parked, "
           "%lld of %d nano-USD\n",
           acme.done, acme.queued, acme.total, ACME_TOKENS, beta.done, beta.queued, beta.nusd,
           BETA_NUSD);
    assert_true(acme.total <= ACME_TOKENS);
    assert_true(acme.total * 100 >= ACME_TOKENS * 85LL);
    assert_true(beta.nusd <= BETA_NUSD);
    assert_true(beta.nusd * 100 >= BETA_NUSD * 85LL);
    /* the rest parked: queued, never tried, nothing dead */
    assert_true(acme.queued > 0 && beta.queued > 0);
    assert_int_equal(acme.done + acme.queued, ACME_JOBS);
    assert_int_equal(beta.done + beta.queued, BETA_JOBS);
    for (int i = 0; i < ACME_JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "acme-%d", i);
        char *st = llmq_test_job_field(a.c, a.prefix, id, "state");
        assert_non_null(st);
        if (strcmp(st, "queued") == 0)
            assert_int_equal(llmq_test_job_int(a.c, a.prefix, id, "attempts", -1), 0);
        free(st);
    }
    /* the budgets' own counts are the real spend, and list shows the waiting jobs */
    assert_int_equal(spend_budget_field(&a, "t/acme#tokens/month", "spent"), acme.total);
    assert_int_equal(spend_budget_field(&a, "t/beta#usd/month", "spent"), beta.nusd);
    assert_true(beta.cached > 0 && beta.cached * 2 <= beta.prompt);
    assert_int_equal(spend_budget_field(&a, "t/acme#tokens/month", "waiting_jobs"), acme.queued);
    assert_int_equal(spend_budget_field(&a, "t/beta#usd/month", "waiting_jobs"), beta.queued);
    const char *list[] = {"llmq", "budgets", "list", NULL};
    char *out = spend_cli(&a, 0, list);
    printf("%s", out);
    assert_non_null(strstr(out, "waiting for budget"));
    free(out);

    /* raised: the parked jobs run at once, each once */
    const char *r1[] = {"llmq",     "budgets", "set",      "--tenant", "acme",
                        "--tokens", "1000000", "--period", "month",    NULL};
    free(spend_cli(&a, 0, r1));
    const char *r2[] = {"llmq",  "budgets", "set",      "--tenant", "beta",
                        "--usd", "10",      "--period", "month",    NULL};
    free(spend_cli(&a, 0, r2));
    assert_true(spend_wait_settled(&a, groups, counts, 2, 30000));
    acme = spend_real_read(&a, "acme", ACME_JOBS);
    beta = spend_real_read(&a, "beta", BETA_JOBS);
    assert_int_equal(acme.done, ACME_JOBS);
    assert_int_equal(beta.done, BETA_JOBS);
    assert_int_equal(acme.attempts_1, ACME_JOBS);
    assert_int_equal(beta.attempts_1, BETA_JOBS);
    spend_workers_stop(pids, 4);
    assert_int_equal(sim_proc_stop(&sim), 0);
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int ok = 0, limited = 0;
    sim_log_outcomes(e, n, &ok, &limited);
    assert_int_equal(n, ACME_JOBS + BETA_JOBS);
    assert_int_equal(ok, ACME_JOBS + BETA_JOBS);
    free(e);
    assert_int_equal(spend_budget_field(&a, "t/acme#tokens/month", "spent"), acme.total);
    assert_int_equal(spend_budget_field(&a, "t/beta#usd/month", "spent"), beta.nusd);
    unlink(jobs);
    unlink(sim.log_file);
    for (int i = 0; i < 4; i++)
        unlink(logs[i]);
    spend_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budgets_hold_then_raise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
