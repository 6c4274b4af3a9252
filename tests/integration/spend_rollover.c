/* A budget's period rolls over (README "Spend budgets"): a tenant's token
 * budget of a 3-second period parks its jobs once spent and resumes them
 * at each roll-over, by itself (no raise), until all ran: nothing is
 * dead-lettered, every job runs once, and what the jobs granted in one
 * period really used (their results' usage, by the job's run_ms on Redis'
 * clock) stays within the budget in every period. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "spend_support.h"

#define JOBS 30
#define PERIOD_S 3
#define BUDGET 500

static void test_rollover_resumes_parked_jobs(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spendroll");
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    char jobs[128];
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-spendroll-%d.jsonl", (int)getpid());
    const char *b[] = {"llmq",     "budgets", "set",        "--tenant", "acme",
                       "--tokens", "500",     "--period-s", "3",        NULL};
    free(spend_cli(&a, 0, b));
    spend_write_jobs(jobs, "r", JOBS, "acme", NULL, 40);
    worker_enqueue(a.name, jobs);
    char logs[2][128];
    pid_t pids[2];
    worker_start_n(a.name, &sim, "spendroll", 2, logs, pids, NULL);

    /* parked at least once: jobs queued, none running, some done */
    long long deadline = llmq_test_now_ms() + 20000;
    int parked = 0;
    while (!parked && llmq_test_now_ms() < deadline) {
        struct spend_real s = spend_real_read(&a, "r", JOBS);
        parked = s.queued > 0 && s.running == 0 && s.done > 0 &&
                 spend_budget_field(&a, "t/acme#tokens/3s", "waiting_jobs") > 0;
        usleep(50000);
    }
    assert_true(parked);
    /* then every job runs, with no raise */
    deadline = llmq_test_now_ms() + 30000;
    struct spend_real s = {0};
    while (llmq_test_now_ms() < deadline) {
        s = spend_real_read(&a, "r", JOBS);
        if (s.done + s.dead == JOBS)
            break;
        usleep(100000);
    }
    assert_int_equal(s.dead, 0);
    assert_int_equal(s.done, JOBS);
    assert_int_equal(s.attempts_1, JOBS);
    spend_workers_stop(pids, 2);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* per period: what its grants used, within the budget */
    long long used[64] = {0};
    int periods = 0;
    for (int i = 0; i < JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "r-%d", i);
        long long run_ms = llmq_test_job_int(a.c, a.prefix, id, "run_ms", -1);
        char *text = llmq_test_job_result(a.c, a.prefix, id);
        assert_non_null(text);
        json_t *line = json_loads(text, 0, NULL);
        free(text);
        long long tok = json_integer_value(json_object_get(
            json_object_get(json_object_get(json_object_get(line, "response"), "body"), "usage"),
            "total_tokens"));
        json_decref(line);
        long long p = run_ms / (PERIOD_S * 1000);
        used[p % 64] += tok;
    }
    for (int i = 0; i < 64; i++) {
        if (used[i] > 0) {
            periods++;
            assert_true(used[i] <= BUDGET);
        }
    }
    printf("# %d jobs ran over %d periods of %d s\n", JOBS, periods, PERIOD_S);
    assert_true(periods >= 2);
    unlink(jobs);
    unlink(sim.log_file);
    for (int i = 0; i < 2; i++)
        unlink(logs[i]);
    spend_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rollover_resumes_parked_jobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
