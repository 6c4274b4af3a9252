/* SIGTERM drains: the worker stops taking jobs, finishes the calls in flight
 * within the grace period and exits 0; calls still running when the grace
 * ends are handed back untried, their attempt not counted. Nothing stays
 * pending; another worker finishes the rest, one attempt per job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define JOBS 60

static void run_drain(const char *latency, const char *grace, int expect_finished)
{
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "sigterm");
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", latency, NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-sigterm-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "t", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-sigterm-%d.log", (int)getpid());
    const char *args[] = {"--concurrency", "20", "--grace-ms", grace, NULL};
    pid_t w = worker_start(account, &sim, log, args);
    redisContext *c = llmq_test_redis_connect();
    char prefix[128], key[256];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    long long deadline = llmq_test_now_ms() + 20000;
    while (worker_pending(c, prefix, "normal") < 20 && llmq_test_now_ms() < deadline)
        usleep(20000);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 20000), 0);
    assert_int_equal(worker_pending(c, prefix, "normal"), 0);
    snprintf(key, sizeof(key), "%sstats", prefix);
    long long done = redis_int(c, "HGET %s %s", key, "done");
    printf("# latency %s ms, grace %s ms: %lld finished before exit\n", latency, grace, done);
    if (expect_finished)
        assert_int_equal(done, 20);
    else
        assert_true(done <= 0);
    /* A job handed back untried does not count as an attempt: every job not
     * finished is back at attempts 0 (the first worker took 20, and a job is
     * charged an attempt when it is dispatched). */
    int taken_back = 0, counted = 0;
    for (int i = 0; i < JOBS; i++) {
        snprintf(key, sizeof(key), "t-%d", i);
        char *st = llmq_test_job_field(c, prefix, key, "state");
        int is_done = st != NULL && strcmp(st, "done") == 0;
        free(st);
        long long att = llmq_test_job_int(c, prefix, key, "attempts", 0);
        if (!is_done) {
            counted += att != 0;
            taken_back += 1;
        }
    }
    printf("# %d jobs not finished, %d of them with an attempt counted\n", taken_back, counted);
    assert_int_equal(counted, 0);
    snprintf(key, sizeof(key), "%sstats", prefix);
    /* Another worker finishes everything. */
    const char *args2[] = {"--concurrency", "64", "--exit-when-idle-ms", "1500", NULL};
    pid_t w2 = worker_start(account, &sim, log, args2);
    assert_int_equal(worker_wait(w2, 60000), 0);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "done"), JOBS);
    assert_int_equal(worker_event_jobs(c, prefix), JOBS);
    /* Every job was called exactly once for its result: one attempt each. */
    for (int i = 0; i < JOBS; i++) {
        snprintf(key, sizeof(key), "t-%d", i);
        assert_int_equal(llmq_test_job_int(c, prefix, key, "attempts", -1), 1);
    }
    redisFree(c);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(jobs);
    unlink(log);
}

static void test_sigterm_finishes_in_flight(void **state)
{
    (void)state;
    run_drain("800", "10000", 1);
}

static void test_grace_over_hands_back(void **state)
{
    (void)state;
    run_drain("5000", "300", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm_finishes_in_flight),
        cmocka_unit_test(test_grace_over_hands_back),
    };
    return cmocka_run_group_tests_name("worker_sigterm_drain", tests, NULL, NULL);
}
