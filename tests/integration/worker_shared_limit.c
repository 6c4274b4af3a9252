/* 2,000 jobs, 4 worker processes, one small shared limit (period ~2 s):
 * every job has exactly one result, the API (openai-sim, enforcing the same
 * limit over its own exact window) saw no request over its limit, and the
 * binding budget was >= 95% used in every full period. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define JOBS 2000
#define WORKERS 4
#define RPM 500
#define SIM_PERIOD_MS 2000
/* llmq's window is 5% longer than the API's: requests reach the API a few ms
 * after their admission in Redis, and this margin covers that transit. */
#define LLMQ_PERIOD_MS 2100

static int cmp_entry(const void *a, const void *b)
{
    const struct sim_entry *x = a, *y = b;
    return (x->t_ms > y->t_ms) - (x->t_ms < y->t_ms);
}

static void test_four_workers_share_one_limit(void **state)
{
    (void)state;
    char account[64], jobs[128], logs[WORKERS][128];
    llmq_test_unique_name(account, sizeof(account), "shared");
    struct sim_proc sim;
    char rpm[16], period[16];
    snprintf(rpm, sizeof(rpm), "%d", RPM);
    snprintf(period, sizeof(period), "%d", SIM_PERIOD_MS);
    const char *sim_args[] = {"--rpm", rpm, "--period-ms", period, "--latency-ms", "20", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);

    char llmq_period[16];
    snprintf(llmq_period, sizeof(llmq_period), "%d", LLMQ_PERIOD_MS);
    const char *limits[] = {"llmq", "limits", "set", "gpt-4o-mini", "--rpm", rpm,
                            "--period-ms", llmq_period, NULL};
    struct cli_run r = cli_run(account, limits);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    /* The longer period is this test's guard; no arrival guard on top. */
    const char *policy[] = {"llmq", "limits", "policy", "--window-guard-ms", "0", NULL};
    r = cli_run(account, policy);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-shared-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "j", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);

    pid_t pids[WORKERS];
    const char *args[] = {"--concurrency", "64", "--exit-when-idle-ms", "2000", NULL};
    for (int i = 0; i < WORKERS; i++) {
        snprintf(logs[i], sizeof(logs[i]), "/tmp/llmq-shared-%d-w%d.log", (int)getpid(), i);
        pids[i] = worker_start(account, &sim, logs[i], args);
    }
    for (int i = 0; i < WORKERS; i++)
        assert_int_equal(worker_wait(pids[i], 180000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* Exactly one result per job. */
    redisContext *c = llmq_test_redis_connect();
    char prefix[128], key[256];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    int missing = 0;
    for (int i = 0; i < JOBS; i++) {
        snprintf(key, sizeof(key), "%sres:j-%d", prefix, i);
        missing += redis_int(c, "EXISTS %s", key, NULL) != 1;
    }
    assert_int_equal(missing, 0);
    snprintf(key, sizeof(key), "%sevents", prefix);
    assert_int_equal(redis_int(c, "XLEN %s", key, NULL), JOBS);
    redisFree(c);

    /* The API never saw a request over its limit; the budget was used. */
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int ok = 0, limited = 0;
    for (size_t i = 0; i < n; i++) {
        ok += strcmp(e[i].outcome, "ok") == 0;
        limited += strncmp(e[i].outcome, "limit_", 6) == 0;
    }
    assert_int_equal(limited, 0);
    assert_int_equal(ok, JOBS);
    qsort(e, n, sizeof(*e), cmp_entry);
    long long t0 = e[0].t_ms, periods = (e[n - 1].t_ms - t0) / LLMQ_PERIOD_MS, used = 0;
    assert_true(periods >= 2);
    for (size_t i = 0; i < n && e[i].t_ms < t0 + periods * LLMQ_PERIOD_MS; i++)
        used++;
    double util = (double)used / (double)(periods * RPM);
    printf("# %lld requests in the first %lld full periods: %.1f%% of the budget\n", used,
           periods, util * 100);
    assert_true(util >= 0.95);
    free(e);
    unlink(jobs);
    for (int i = 0; i < WORKERS; i++)
        unlink(logs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_workers_share_one_limit),
    };
    return cmocka_run_group_tests_name("worker_shared_limit", tests, NULL, NULL);
}
