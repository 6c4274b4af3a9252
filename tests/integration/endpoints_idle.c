/* A worker whose endpoints cannot take work waits idle instead of asking
 * again and again, and is woken when they can. On a private redis-server,
 * so that INFO commandstats counts this test's script calls only (an idle
 * worker's calls are its dispatches; --visibility-ms keeps its reclaim out of
 * the intervals):
 *   disabled  every endpoint of the model disabled, jobs waiting: no
 *             dispatch in 11 s; `llmq endpoints enable` runs them at once
 *             (long before the 60 s safety recheck);
 *   probe     the endpoint cooling after a failure, its probe_ms 60 s: once
 *             the probe answers, the other jobs run at once, not when the
 *             probe's time would have run out;
 *   partial   a worker holding the key of only one endpoint (ep1, model m2)
 *             while jobs of m1 (ep0's) wait for a worker with that key: at
 *             most three dispatches in 11 s (its idle look every 5 s); jobs of m2
 *             wake it and it runs them; ep0's sim never sees it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

/* longer than two of an idle worker's wake reads (5 s each) */
#define WINDOW_MS 11000

static struct llmq_test_redis server;

static int setup(void **state)
{
    (void)state;
    if (llmq_test_redis_start(&server, NULL) != 0)
        return -1;
    setenv("LLMQ_TEST_REDIS_URL", server.url, 1); /* the CLI, workers and checks */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    llmq_test_redis_stop(&server);
    return 0;
}

/* Script calls (FCALL) Redis has run since it started. */
static long long fcalls(void)
{
    redisContext *c = llmq_test_redis_connect();
    redisReply *r = redisCommand(c, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long n = 0;
    const char *p = strstr(r->str, "cmdstat_fcall:calls=");
    if (p != NULL)
        n = strtoll(p + strlen("cmdstat_fcall:calls="), NULL, 10);
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* The script calls of the next WINDOW_MS (nothing but the workers runs). */
static long long fcalls_in_window(void)
{
    long long before = fcalls();
    usleep(WINDOW_MS * 1000);
    return fcalls() - before;
}

/* Waits at most timeout_ms until account has done jobs done; returns how
 * many it has. */
static long long wait_done(const char *account, long long done, long long timeout_ms)
{
    redisContext *c = llmq_test_redis_connect();
    char key[128];
    snprintf(key, sizeof(key), "llmq:{%s}:stats", account);
    long long n = 0, end = llmq_test_now_ms() + timeout_ms;
    for (;;) {
        redisReply *r = redisCommand(c, "HGET %s done", key);
        n = r != NULL && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
        freeReplyObject(r);
        if (n >= done || llmq_test_now_ms() > end)
            break;
        usleep(20000);
    }
    redisFree(c);
    return n;
}

/* A worker of account holding the keys of eps[0..n) (its --base-url: sim). */
static pid_t start_worker(const char *account, struct ep_sim *eps, int n, const char *tag,
                          char log[128])
{
    static char store[EP_MAX][96];
    const char *args[8 + 2 * EP_MAX + 1] = {"--concurrency", "4",           "--visibility-ms",
                                            "600000",        "--log-level", "debug"};
    ep_key_args(eps, n, args, 6, store);
    worker_log_path(log, tag, 0);
    pid_t pid = worker_start(account, &eps[0].sim, log, args);
    assert_true(worker_wait_log(log, "redis connected", 30000));
    return pid;
}

static void stop_worker(pid_t pid, char *log)
{
    kill(pid, SIGTERM);
    assert_int_equal(worker_wait(pid, 20000), 0);
    unlink(log);
}

static void jobs_file(char *path, size_t n, const char *tag, const char *prefix, int count,
                      const char *model)
{
    snprintf(path, n, "/tmp/llmq-%s-%d.jsonl", tag, (int)getpid());
    worker_write_jobs(path, prefix, count, model, 10, "{\"max_attempts\":20}");
}

static void test_all_disabled_waits_for_enable(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "epidle");
    struct ep_sim ep;
    ep_init(&ep, 0);
    ep_sim_start(&ep, NULL);
    ep_add(account, &ep, "/v1", NULL);
    ep_limit(account, &ep, "m1", 1000, 60000);
    struct cli_run r = ep_cli(account, 0, "endpoints", "disable", "ep0", NULL);
    cli_free(&r);
    jobs_file(jobs, sizeof(jobs), "epidle", "d", 3, "m1");
    worker_enqueue(account, jobs);
    pid_t pid = start_worker(account, &ep, 1, "epidle", log);
    /* its first dispatch found the endpoint out and planned its wait */
    assert_true(worker_wait_log(log, "granted, wait", 10000));
    long long calls = fcalls_in_window();
    printf("# every endpoint disabled: %lld script calls in %d ms\n", calls, WINDOW_MS);
    assert_int_equal(calls, 0);
    assert_int_equal(wait_done(account, 3, 0), 0);
    r = ep_cli(account, 0, "endpoints", "enable", "ep0", NULL);
    cli_free(&r);
    assert_int_equal(wait_done(account, 3, 20000), 3); /* not at the 60 s recheck */
    stop_worker(pid, log);
    ep_sim_stop(&ep);
    unlink(jobs);
}

static void test_probe_answer_wakes_the_rest(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "epprobe");
    struct ep_sim ep;
    ep_init(&ep, 0);
    const char *failing[] = {"--fail-500", "100", NULL};
    ep_sim_start(&ep, failing);
    const char *health[] = {"--fail-threshold",
                            "1",
                            "--cooldown-ms",
                            "1500",
                            "--cooldown-max-ms",
                            "1500",
                            "--probe-ms",
                            "60000",
                            NULL};
    ep_add(account, &ep, "/v1", health);
    ep_limit(account, &ep, "m1", 1000, 60000);
    jobs_file(jobs, sizeof(jobs), "epprobe", "p", 1, "m1");
    pid_t pid = start_worker(account, &ep, 1, "epprobe", log);
    worker_enqueue(account, jobs);
    /* its 500 cools the endpoint; the server is well again meanwhile */
    redisContext *c = llmq_test_redis_connect();
    char key[128];
    snprintf(key, sizeof(key), "llmq:{%s}:eph:ep0", account);
    long long end = llmq_test_now_ms() + 10000;
    int cooling = 0;
    while (!cooling && llmq_test_now_ms() < end) {
        redisReply *x = redisCommand(c, "HGET %s state", key);
        cooling = x != NULL && x->type == REDIS_REPLY_STRING && strcmp(x->str, "cooling") == 0;
        freeReplyObject(x);
        usleep(10000);
    }
    redisFree(c);
    assert_true(cooling);
    ep_sim_restart(&ep, 0, NULL, NULL);
    /* more jobs while it cools: the first dispatch after the cooling makes
     * one of them the probe; the others wait for its answer */
    char more[128];
    jobs_file(more, sizeof(more), "epprobe2", "q", 6, "m1");
    worker_enqueue(account, more);
    assert_int_equal(wait_done(account, 7, 20000), 7); /* not at the probe's 60 s */
    stop_worker(pid, log);
    ep_sim_stop(&ep);
    unlink(jobs);
    unlink(more);
}

static void test_partial_keys_idle_until_own_work(void **state)
{
    (void)state;
    char account[64], jobs1[128], jobs2[128], log[128], log0[128];
    llmq_test_unique_name(account, sizeof(account), "eppart");
    struct ep_sim eps[2];
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], NULL);
        ep_add(account, &eps[i], "/v1", NULL);
    }
    ep_limit(account, &eps[0], "m1", 1000, 60000);
    ep_limit(account, &eps[1], "m2", 1000, 60000);
    jobs_file(jobs1, sizeof(jobs1), "eppart1", "a", 3, "m1");
    jobs_file(jobs2, sizeof(jobs2), "eppart2", "b", 3, "m2");
    worker_enqueue(account, jobs1);
    pid_t pid = start_worker(account, &eps[1], 1, "eppart", log);
    assert_true(worker_wait_log(log, "endpoints served: ep1", 1000));
    assert_true(worker_wait_log(log, "granted, wait", 10000));
    long long calls = fcalls_in_window();
    printf("# a worker of ep1 only, jobs of ep0 waiting: %lld script calls in %d ms\n", calls,
           WINDOW_MS);
    assert_true(calls <= 3); /* one look per 5 s: 3 fit in 11 s */
    assert_int_equal(wait_done(account, 1, 0), 0);
    worker_enqueue(account, jobs2); /* work for its endpoint wakes it */
    assert_int_equal(wait_done(account, 3, 20000), 3);
    /* a worker of ep0 takes the rest */
    pid_t pid0 = start_worker(account, &eps[0], 1, "eppart0", log0);
    assert_int_equal(wait_done(account, 6, 20000), 6);
    stop_worker(pid, log);
    stop_worker(pid0, log0);
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
    size_t n;
    struct sim_entry *e = ep_log(&eps[0], &n);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(strncmp(e[k].job, "a-", 2), 0); /* ep0 saw only m1's jobs */
    free(e);
    unlink(jobs1);
    unlink(jobs2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_disabled_waits_for_enable),
        cmocka_unit_test(test_probe_answer_wakes_the_rest),
        cmocka_unit_test(test_partial_keys_idle_until_own_work),
    };
    return cmocka_run_group_tests_name("endpoints_idle", tests, setup, teardown);
}
