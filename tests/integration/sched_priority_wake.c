/* Priority that wakes workers: a low-priority backlog saturates its share of
 * the bucket (low may fill 80% of a limit, the headroom rule) and the worker
 * sleeps on the limiter's wait, which is most of a long period. High jobs
 * enqueued then fit the headroom low may not use: they must be sent at once,
 * woken through the wake stream, not when the low window reopens. The
 * assertion is an order, not a time: every high job has its result while
 * the low backlog still waits for its window (no further low job was sent),
 * and the low jobs enqueued earlier than the high ones are sent after them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define RPM 50          /* low may use 40 of them */
#define PERIOD_MS 60000 /* long: the low window does not reopen during the test */
#define N_LOW 100
#define N_HIGH 8

static void test_high_jobs_wake_a_sleeping_worker(void **state)
{
    (void)state;
    char account[64], jobs_low[128], jobs_high[128], log[128], rpm[16], period[16];
    llmq_test_unique_name(account, sizeof(account), "prio");
    snprintf(rpm, sizeof(rpm), "%d", RPM);
    snprintf(period, sizeof(period), "%d", PERIOD_MS);
    struct sim_proc sim;
    const char *sim_args[] = {"--rpm", rpm, "--period-ms", period, "--latency-ms", "10", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    worker_limits_set(account, "gpt-4o-mini", "--rpm", RPM, PERIOD_MS);
    snprintf(jobs_low, sizeof(jobs_low), "/tmp/llmq-prio-%d-low.jsonl", (int)getpid());
    snprintf(jobs_high, sizeof(jobs_high), "/tmp/llmq-prio-%d-high.jsonl", (int)getpid());
    worker_write_jobs(jobs_low, "low", N_LOW, "gpt-4o-mini", 20, "{\"priority\":\"low\"}");
    worker_write_jobs(jobs_high, "high", N_HIGH, "gpt-4o-mini", 20, "{\"priority\":\"high\"}");
    worker_enqueue(account, jobs_low);

    snprintf(log, sizeof(log), "/tmp/llmq-prio-%d.log", (int)getpid());
    const char *args[] = {"--concurrency", "16", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    redisContext *c = llmq_test_redis_connect();
    char stats[256], blk[256];
    snprintf(stats, sizeof(stats), "llmq:{%s}:stats", account);
    snprintf(blk, sizeof(blk), "llmq:{%s}:sblk", account);
    const long long low_share = RPM * 80 / 100;
    /* Low has used its share and its key is blocked on the bucket: the
     * worker now sleeps on the limiter's wait. */
    while (redis_int(c, "HGET %s %s", stats, "done") < low_share ||
           redis_int(c, "ZCARD %s", blk, NULL) < 1)
        usleep(10000);
    worker_enqueue(account, jobs_high);
    /* Until every high job has its result, or half the period has passed:
     * then the high jobs waited for the low window (the bound is the
     * property under test, "before the window reopens", not a speed). */
    long long give_up_ms = llmq_test_now_ms() + PERIOD_MS / 2;
    for (;;) {
        if (llmq_test_now_ms() > give_up_ms)
            fail_msg("the high jobs were not sent while the low backlog waited for its window");
        int have = 0;
        for (int i = 0; i < N_HIGH; i++) {
            char key[256];
            snprintf(key, sizeof(key), "llmq:{%s}:res:high-%d", account, i);
            have += redis_int(c, "EXISTS %s%s", key, "") == 1;
        }
        if (have == N_HIGH)
            break;
        usleep(10000);
    }
    /* ... and the low backlog is still waiting for its window. */
    assert_int_equal(redis_int(c, "HGET %s %s", stats, "done"), low_share + N_HIGH);
    char backlog[256];
    snprintf(backlog, sizeof(backlog), "llmq:{%s}:backlog:low", account);
    assert_int_equal(redis_int(c, "LLEN %s", backlog, NULL), N_LOW - low_share);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 30000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    /* The API saw the high jobs right after the low share, nothing else. */
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int ok_high = 0, ok_low = 0, limited = 0;
    for (size_t i = 0; i < n; i++) {
        limited += strncmp(e[i].outcome, "limit_", 6) == 0;
        if (strcmp(e[i].outcome, "ok") == 0)
            *(strncmp(e[i].job, "high", 4) == 0 ? &ok_high : &ok_low) += 1;
    }
    assert_int_equal(limited, 0);
    assert_int_equal(ok_high, N_HIGH);
    assert_int_equal(ok_low, low_share);
    free(e);
    redisFree(c);
    unlink(jobs_low);
    unlink(jobs_high);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_high_jobs_wake_a_sleeping_worker),
    };
    return cmocka_run_group_tests_name("sched_priority_wake", tests, NULL, NULL);
}
