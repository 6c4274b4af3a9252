/* No head-of-line blocking across models: one account, one queue, two models
 * with their own limits (the API enforces the same limits over its own exact
 * windows), jobs interleaved. A job waiting on one model's bucket must not
 * delay the other model's jobs: each model's budget is >= 95% used in every
 * full period while it has work (checked at each period's end), as the API's
 * access log shows, and the API
 * never sees a request over a limit. (The code before per-key queues used
 * about 25% of gpt-4o-mini's budget here.) The run's wall time is printed against
 * the slower model's floor (the bench prints that ratio; not asserted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define N_SLOW 160 /* gpt-4o: 4 windows of work */
#define N_FAST 640 /* gpt-4o-mini: 4 windows of work */
#define RPM_SLOW 40
#define RPM_FAST 160
#define SIM_PERIOD_MS 10000
/* The guard against arrival jitter (as worker_shared_limit, until the
 * limiter builds one in): requests reach the API some ms after Redis admitted
 * them, by a varying delay; llmq's window is this much longer than the API's.
 * Here the first window's requests also open every connection of two
 * workers at once, which on a loaded 2-core machine delayed arrivals by more
 * than 400 ms (22 refusals in one run): 10% of the period. Periods of 10 s
 * keep dispatch delays (100-500 ms under load) small against a period (the
 * property does not depend on the period's length; 20 s doubled the test's
 * time). */
#define ARRIVAL_GUARD_MS 1000
#define LLMQ_PERIOD_MS (SIM_PERIOD_MS + ARRIVAL_GUARD_MS)
#define WORKERS 2

static void test_two_models_interleaved(void **state)
{
    (void)state;
    char account[64], jobs[128], logs[WORKERS][128], lim_slow[32], lim_fast[32], period[16];
    llmq_test_unique_name(account, sizeof(account), "twomodels");
    snprintf(lim_slow, sizeof(lim_slow), "gpt-4o=%d:0", RPM_SLOW);
    snprintf(lim_fast, sizeof(lim_fast), "gpt-4o-mini=%d:0", RPM_FAST);
    snprintf(period, sizeof(period), "%d", SIM_PERIOD_MS);
    struct sim_proc sim;
    /* No rate-limit headers: the buckets must not learn a lower limit from
     * the API's own window (worker_learns_headers tests that learning). */
    const char *sim_args[] = {"--limit",      lim_slow,      "--limit",
                              lim_fast,       "--period-ms", period,
                              "--latency-ms", "20",          "--ratelimit-headers",
                              "none",         NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);

    worker_limits_set(account, "gpt-4o", "--rpm", RPM_SLOW, LLMQ_PERIOD_MS);
    worker_limits_set(account, "gpt-4o-mini", "--rpm", RPM_FAST, LLMQ_PERIOD_MS);

    /* One file, the models alternating until gpt-4o's jobs run out (its share
     * of the queue is not its share of the budget: a model that stops the
     * queue while it waits holds gpt-4o-mini at gpt-4o's pace). */
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-twomodels-%d.jsonl", (int)getpid());
    FILE *f = fopen(jobs, "w");
    assert_non_null(f);
    for (int i = 0, s = 0, k = 0; i < N_SLOW + N_FAST; i++) {
        int slow = i < 2 * N_SLOW && i % 2 == 0;
        fprintf(f,
                "{\"custom_id\":\"%s-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"%s\",\"max_tokens\":20,\"messages\":[{\"role\":\"user\","
                "\"content\":\"question %d\"}]}}\n",
                slow ? "slow" : "fast", slow ? s++ : k++, slow ? "gpt-4o" : "gpt-4o-mini", i);
    }
    fclose(f);
    worker_enqueue(account, jobs);

    pid_t pids[WORKERS];
    const char *args[] = {"--concurrency", "64", "--exit-when-idle-ms", "2000", NULL};
    worker_start_n(account, &sim, "twomodels", WORKERS, logs, pids, args);
    worker_wait_n(pids, WORKERS, 240000);
    assert_int_equal(sim_proc_stop(&sim), 0);

    redisContext *c = llmq_test_redis_connect();
    char key[256];
    snprintf(key, sizeof(key), "llmq:{%s}:stats", account);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "done"), N_SLOW + N_FAST);
    redisFree(c);

    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int ok, limited;
    sim_log_outcomes(e, n, &ok, &limited);
    assert_int_equal(limited, 0);
    assert_int_equal(ok, N_SLOW + N_FAST);
    sim_log_sort(e, n);
    long long s0, s1, f0, f1;
    sim_log_check_budget_used(e, n, "slow-", RPM_SLOW, LLMQ_PERIOD_MS, &s0, &s1);
    sim_log_check_budget_used(e, n, "fast-", RPM_FAST, LLMQ_PERIOD_MS, &f0, &f1);
    /* The slower model's floor: its jobs need ceil(N/RPM) windows, the last
     * one opening (ceil(N/RPM) - 1) periods after the first send. */
    long long floor_ms = (long long)((N_SLOW + RPM_SLOW - 1) / RPM_SLOW - 1) * LLMQ_PERIOD_MS;
    long long wall = (s1 > f1 ? s1 : f1) - (s0 < f0 ? s0 : f0);
    printf("# wall %lld ms, slower model's floor %lld ms: ratio %.3f (slow %lld..%lld, fast "
           "%lld..%lld)\n",
           wall, floor_ms, (double)wall / (double)floor_ms, s0 - s0, s1 - s0, f0 - s0, f1 - s0);
    free(e);
    unlink(jobs);
    for (int i = 0; i < WORKERS; i++)
        unlink(logs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_models_interleaved),
    };
    return cmocka_run_group_tests_name("sched_two_models", tests, NULL, NULL);
}
