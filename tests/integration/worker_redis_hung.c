/* Redis hung, not gone: redis-server stopped with SIGSTOP keeps its sockets
 * open and answers nothing, so TCP never tells the worker. The worker's
 * command timeout (--redis-timeout-ms) must: log one line naming the address
 * and the bound, turn /readyz to 503, drop and reconnect; after SIGCONT it is
 * ready again and every job completes, with a result each and none dead —
 * also the jobs whose calls or settles were in flight when Redis stopped.
 * Uses a private redis-server (it is stopped); every wait has a deadline, so
 * a worker that hangs fails the test instead of hanging it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define JOBS 30

static struct llmq_test_redis server;

/* Polls /readyz on port until it answers status (deadline against hanging). */
static struct worker_page readyz_wait_status(int port, long status, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    for (;;) {
        struct worker_page pg = worker_http_get(port, "/readyz");
        if (pg.status == status || llmq_test_now_ms() >= deadline)
            return pg;
        free(pg.body);
        usleep(100000);
    }
}

static int results_count(redisContext *c, const char *prefix)
{
    char key[256];
    int n = 0;
    for (int i = 0; i < JOBS; i++) {
        snprintf(key, sizeof(key), "%sres:h-%d", prefix, i);
        n += redis_int(c, "EXISTS %s%s", key, "") == 1;
    }
    return n;
}

static int results_wait(redisContext *c, const char *prefix, int want, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    int n;
    while ((n = results_count(c, prefix)) < want && llmq_test_now_ms() < deadline)
        usleep(50000);
    return n;
}

static void test_worker_recovers_from_a_hung_redis(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], port_s[16], prefix[128], want[160];
    llmq_test_unique_name(account, sizeof(account), "hung");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", "300", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-hung-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "h", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    worker_log_path(log, "hung", 0);
    int port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", port);
    /* A few calls at a time, so calls and settles are in flight at the stop. */
    const char *args[] = {"--metrics-port",
                          port_s,
                          "--metrics-host",
                          "127.0.0.1",
                          "--concurrency",
                          "4",
                          "--redis-timeout-ms",
                          "1000",
                          "--visibility-ms",
                          "3000",
                          NULL};
    pid_t w = worker_start(account, &sim, log, args);
    struct worker_page pg = readyz_wait_status(port, 200, 30000);
    assert_int_equal(pg.status, 200);
    free(pg.body);
    redisContext *c = llmq_test_redis_connect();
    assert_true(results_wait(c, prefix, 4, 30000) >= 4);
    redisFree(c);

    assert_int_equal(kill(server.pid, SIGSTOP), 0);
    /* Generous: the bound is 1 s (6 s for the blocking wake-up read). */
    pg = readyz_wait_status(port, 503, 30000);
    int stopped_status = (int)pg.status;
    int says_why = strstr(pg.body, "no answer within") != NULL;
    free(pg.body);
    snprintf(want, sizeof(want),
             "redis 127.0.0.1:%d: no answer within the command timeout of 1000 ms", server.port);
    int logged = worker_wait_log(log, want, 10000);
    /* It reconnects meanwhile, and an attempt on the hung server fails too. */
    snprintf(want, sizeof(want), "redis 127.0.0.1:%d: no answer within the connect timeout",
             server.port);
    int retried = worker_wait_log(log, want, 20000);
    assert_int_equal(kill(server.pid, SIGCONT), 0);
    assert_int_equal(stopped_status, 503);
    assert_true(says_why);
    assert_true(logged);
    assert_true(retried);

    pg = readyz_wait_status(port, 200, 30000);
    assert_int_equal(pg.status, 200);
    free(pg.body);
    c = llmq_test_redis_connect();
    assert_int_equal(results_wait(c, prefix, JOBS, 60000), JOBS);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 30000), 0);
    assert_int_equal(redis_int(c, "XLEN %sdead", prefix, NULL), 0);
    assert_int_equal(worker_pending(c, prefix, "normal"), 0);
    redisFree(c);
    assert_int_equal(sim_proc_stop(&sim), 0);
    assert_int_equal(worker_log_count(log, "Sanitizer"), 0);
    unlink(jobs);
    unlink(log);
}

static int setup(void **state)
{
    (void)state;
    if (llmq_test_redis_start(&server, NULL) != 0)
        return -1;
    /* Everything of this test (CLI, workers, checks) uses the private server. */
    setenv("LLMQ_TEST_REDIS_URL", server.url, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    llmq_test_redis_stop(&server);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_recovers_from_a_hung_redis),
    };
    return cmocka_run_group_tests_name("worker_redis_hung", tests, setup, teardown);
}
