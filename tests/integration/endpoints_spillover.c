/* Spillover (the default routing): two endpoints of one model, tier 1 and
 * tier 2, 50 requests per 3 s each. Fewer jobs than tier 1's budget all run
 * on tier 1 and tier 2 sees nothing; with more, tier 2 gets a request only
 * while tier 1's budget is >= 95% used (judged at every tier-2 arrival
 * from tier 1's own arrivals in the window around it), and every job still
 * runs once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

#define SIM_PERIOD_MS 3000
#define GUARD_MS 300
#define LLMQ_PERIOD_MS (SIM_PERIOD_MS + GUARD_MS)
#define RPM 50
/* Grants of one dispatch call share their admission ms but reach the API in
 * any order, a few ms apart: a tier-2 request may arrive just before the
 * last tier-1 ones granted with it. */
#define ARRIVAL_SLACK_MS 100
#define LIGHT 30
#define HEAVY 170

static void test_tier_two_only_when_tier_one_is_full(void **state)
{
    (void)state;
    char account[64], jobs[128], logs[2][128], store[2][96];
    llmq_test_unique_name(account, sizeof(account), "epspill");
    struct ep_sim eps[2];
    char rpm_s[16], period_s[16];
    snprintf(rpm_s, sizeof(rpm_s), "%d", RPM);
    snprintf(period_s, sizeof(period_s), "%d", SIM_PERIOD_MS);
    const char *sim_args[] = {
        "--rpm", rpm_s, "--period-ms", period_s, "--latency-ms", "20", "--ratelimit-headers",
        "none",  NULL};
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], sim_args);
    }
    /* tier 2 is added first and sorts first by name: neither may matter */
    snprintf(eps[1].name, sizeof(eps[1].name), "a-tier2");
    snprintf(eps[0].name, sizeof(eps[0].name), "b-tier1");
    const char *t2[] = {"--tier", "2", NULL}, *t1[] = {"--tier", "1", NULL};
    ep_add(account, &eps[1], "/v1", t2);
    ep_add(account, &eps[0], "/v1", t1);
    ep_limit(account, &eps[1], "gpt-4o-mini", RPM, LLMQ_PERIOD_MS);
    ep_limit(account, &eps[0], "gpt-4o-mini", RPM, LLMQ_PERIOD_MS);
    struct cli_run r = ep_cli(account, 0, "limits", "policy", "--window-guard-ms", "0", NULL);
    cli_free(&r);

    const char *args[4 + 4 + 1] = {"--concurrency", "16", "--exit-when-idle-ms", "2500"};
    ep_key_args(eps, 2, args, 4, store);
    pid_t pids[2];

    /* Light: everything fits tier 1. */
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epspill-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "a", LIGHT, "gpt-4o-mini", 20, NULL);
    worker_start_n(account, &eps[0].sim, "epspill", 2, logs, pids, args);
    for (int i = 0; i < 2; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    worker_enqueue(account, jobs);
    worker_wait_n(pids, 2, 60000);
    ep_assert_results(account, "a", LIGHT, LIGHT);
    size_t n0, n1;
    struct sim_entry *e1 = ep_log(&eps[1], &n1);
    assert_int_equal(n1, 0);
    free(e1);

    /* Heavy: tier 2 takes what tier 1 has no room for. */
    worker_write_jobs(jobs, "b", HEAVY, "gpt-4o-mini", 20, NULL);
    worker_start_n(account, &eps[0].sim, "epspill", 2, logs, pids, args);
    for (int i = 0; i < 2; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    worker_enqueue(account, jobs);
    worker_wait_n(pids, 2, 60000);
    ep_assert_results(account, "b", HEAVY, LIGHT + HEAVY);
    for (int i = 0; i < 2; i++)
        assert_int_equal(sim_proc_stop(&eps[i].sim), 0);
    struct sim_entry *e0 = ep_log(&eps[0], &n0);
    e1 = ep_log(&eps[1], &n1);
    assert_true(n1 > 0);
    long long least = -1;
    for (size_t k = 0; k < n1; k++) {
        long long t = e1[k].t_ms, used = 0;
        for (size_t j = 0; j < n0; j++)
            used += e0[j].t_ms > t - LLMQ_PERIOD_MS - 200 && e0[j].t_ms <= t + ARRIVAL_SLACK_MS;
        if (least < 0 || used < least)
            least = used;
    }
    printf("# tier 1: %zu requests, tier 2: %zu; tier 1's use at a tier-2 arrival: at least "
           "%lld of %d\n",
           n0, n1, least, RPM);
    assert_true(least * 100 >= 95 * RPM);
    int ok, limited;
    sim_log_outcomes(e0, n0, &ok, &limited);
    assert_int_equal(limited, 0);
    sim_log_outcomes(e1, n1, &ok, &limited);
    assert_int_equal(limited, 0);
    assert_int_equal(n0 + n1, LIGHT + HEAVY);
    free(e0);
    free(e1);
    unlink(jobs);
    for (int i = 0; i < 2; i++)
        unlink(logs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tier_two_only_when_tier_one_is_full),
    };
    return cmocka_run_group_tests_name("endpoints_spillover", tests, NULL, NULL);
}
