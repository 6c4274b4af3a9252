/* A second SIGINT or SIGTERM during the grace period stops at once: the
 * calls in flight are cancelled and their jobs handed back untried (attempt
 * not counted), nothing is left pending, nothing dead or lost, exit 0. The
 * API takes 120 s and the grace is 120 s, so a worker that waited for either
 * would still be running when the test's 30 s deadline (against hanging, not
 * a timing check) ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define JOBS 6

static void run_twice(int first, int second)
{
    char account[64], jobs[128], log[128], prefix[128], key[256];
    llmq_test_unique_name(account, sizeof(account), "sig2");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", "120000", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-sig2-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "s", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-sig2-%d.log", (int)getpid());
    const char *args[] = {"--grace-ms", "120000", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    redisContext *c = llmq_test_redis_connect();
    long long deadline = llmq_test_now_ms() + 30000;
    while (worker_pending(c, prefix, "normal") < JOBS && llmq_test_now_ms() < deadline)
        usleep(20000);
    assert_int_equal(worker_pending(c, prefix, "normal"), JOBS);
    kill(w, first);
    /* The first signal has been handled once the log says so. */
    deadline = llmq_test_now_ms() + 30000;
    while (worker_log_count(log, "draining") == 0 && llmq_test_now_ms() < deadline)
        usleep(20000);
    assert_int_equal(worker_log_count(log, "draining"), 1);
    kill(w, second);
    assert_int_equal(worker_wait(w, 30000), 0);
    assert_int_equal(worker_log_count(log, "again: stopping now"), 1);
    assert_int_equal(worker_pending(c, prefix, "normal"), 0);
    snprintf(key, sizeof(key), "%sstats", prefix);
    assert_true(redis_int(c, "HGET %s %s", key, "dead") <= 0);
    assert_true(redis_int(c, "HGET %s %s", key, "done") <= 0);
    for (int i = 0; i < JOBS; i++) {
        char jk[256];
        snprintf(jk, sizeof(jk), "%sjob:s-%d", prefix, i);
        assert_int_equal(redis_int(c, "HGET %s %s", jk, "attempts"), 0); /* handed back */
    }
    snprintf(key, sizeof(key), "%sdelayed", prefix);
    assert_int_equal(redis_int(c, "ZCARD %s", key, NULL), JOBS);
    redisFree(c);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(jobs);
    unlink(log);
}

static void test_second_sigint_stops_at_once(void **state)
{
    (void)state;
    run_twice(SIGINT, SIGINT);
}

static void test_second_sigterm_stops_at_once(void **state)
{
    (void)state;
    run_twice(SIGTERM, SIGTERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_sigint_stops_at_once),
        cmocka_unit_test(test_second_sigterm_stops_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
