/* A worker killed with SIGKILL mid-run: its jobs are reclaimed by another
 * worker once the visibility timeout passes, and completed, with exactly one
 * result each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define JOBS 40

static void test_killed_worker_jobs_are_reclaimed(void **state)
{
    (void)state;
    char account[64], jobs[128], log_a[128], log_b[128];
    llmq_test_unique_name(account, sizeof(account), "sigkill");
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", "1500", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-sigkill-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "k", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    snprintf(log_a, sizeof(log_a), "/tmp/llmq-sigkill-%d-a.log", (int)getpid());
    snprintf(log_b, sizeof(log_b), "/tmp/llmq-sigkill-%d-b.log", (int)getpid());
    const char *args_a[] = {"--concurrency", "100", "--visibility-ms", "1000", NULL};
    pid_t a = worker_start(account, &sim, log_a, args_a);
    /* A takes every job (calls take 1.5 s), then dies without a word. */
    redisContext *c = llmq_test_redis_connect();
    char prefix[128], key[256];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    long long deadline = llmq_test_now_ms() + 20000;
    while (llmq_test_now_ms() < deadline) {
        if (worker_pending(c, prefix, "normal") == JOBS)
            break;
        usleep(20000);
    }
    kill(a, SIGKILL);
    assert_int_equal(worker_wait(a, 5000), 128 + SIGKILL);

    const char *args_b[] = {
        "--concurrency", "100", "--visibility-ms", "1000", "--exit-when-idle-ms", "3000", NULL};
    pid_t b = worker_start(account, &sim, log_b, args_b);
    assert_int_equal(worker_wait(b, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    int missing = 0, redelivered = 0;
    for (int i = 0; i < JOBS; i++) {
        snprintf(key, sizeof(key), "%sres:k-%d", prefix, i);
        missing += redis_int(c, "EXISTS %s%s", key, "") != 1;
        /* Delivered to A, then reclaimed and delivered to B. */
        snprintf(key, sizeof(key), "k-%d", i);
        redelivered += llmq_test_job_int(c, prefix, key, "attempts", -1) == 2;
    }
    assert_int_equal(missing, 0);
    assert_int_equal(redelivered, JOBS);
    assert_int_equal(worker_event_jobs(c, prefix), JOBS); /* no duplicate results */
    assert_int_equal(worker_pending(c, prefix, "normal"), 0);
    redisFree(c);
    /* B sent every job once it had reclaimed them (A's calls, cut off by the
     * kill, may or may not have been answered: at-least-once delivery). */
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += strcmp(e[i].outcome, "ok") == 0;
    assert_true(ok >= JOBS);
    free(e);
    unlink(jobs);
    unlink(log_a);
    unlink(log_b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_worker_jobs_are_reclaimed),
    };
    return cmocka_run_group_tests_name("worker_sigkill_reclaim", tests, NULL, NULL);
}
