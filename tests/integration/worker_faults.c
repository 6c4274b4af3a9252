/* The API misbehaves (5% 500, 5% 503, 5% spurious 429 with a 300 ms retry
 * hint, 2% connection resets): every job still completes, and retries wait:
 * never sooner than a 429's hint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define JOBS 400
#define HINT_MS 300

static void test_all_jobs_complete_through_faults(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "faults");
    struct sim_proc sim;
    const char *sim_args[] = {
        "--fail-500",          "5",   "--fail-503",   "5", "--spurious-429", "5", "--reset", "2",
        "--spurious-retry-ms", "300", "--latency-ms", "5", "--seed",         "7", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-faults-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "f", JOBS, "gpt-4o-mini", 20, "{\"max_attempts\":12}");
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-faults-%d.log", (int)getpid());
    const char *args[] = {"--concurrency",
                          "32",
                          "--backoff-base-ms",
                          "50",
                          "--backoff-cap-ms",
                          "400",
                          "--exit-when-idle-ms",
                          "2000",
                          NULL};
    pid_t a = worker_start(account, &sim, log, args);
    pid_t b = worker_start(account, &sim, log, args);
    assert_int_equal(worker_wait(a, 120000), 0);
    assert_int_equal(worker_wait(b, 120000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    redisContext *c = llmq_test_redis_connect();
    char prefix[128], key[256];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(key, sizeof(key), "%sstats", prefix);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "done"), JOBS);
    assert_true(redis_int(c, "HGET %s %s", key, "dead") <= 0);
    redisFree(c);

    /* Each spurious 429 is followed by that job's next attempt no sooner
     * than the hint; every kind of fault was met and retried. */
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int faults[4] = {0}, waited = 0, ok = 0;
    const char *kinds[4] = {"fail_500", "fail_503", "spurious_429", "reset"};
    for (size_t i = 0; i < n; i++) {
        ok += strcmp(e[i].outcome, "ok") == 0;
        for (int k = 0; k < 4; k++)
            faults[k] += strcmp(e[i].outcome, kinds[k]) == 0;
        if (strcmp(e[i].outcome, "spurious_429") != 0)
            continue;
        long long next = -1;
        for (size_t j = 0; j < n; j++)
            if (strcmp(e[j].job, e[i].job) == 0 && e[j].t_ms > e[i].t_ms &&
                (next < 0 || e[j].t_ms < next))
                next = e[j].t_ms;
        assert_true(next > 0);
        assert_true(next - e[i].t_ms >= HINT_MS);
        waited++;
    }
    printf("# %d ok; faults: 500 %d, 503 %d, 429 %d, reset %d\n", ok, faults[0], faults[1],
           faults[2], faults[3]);
    assert_int_equal(ok, JOBS);
    for (int k = 0; k < 4; k++)
        assert_true(faults[k] > 0);
    assert_int_equal(waited, faults[2]);
    free(e);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_jobs_complete_through_faults),
    };
    return cmocka_run_group_tests_name("worker_faults", tests, NULL, NULL);
}
