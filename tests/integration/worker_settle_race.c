/* Two settles of one job race, and exactly one of them ends it.
 *
 * Worker A takes the job and calls the API (openai-sim answers after
 * LATENCY_MS). A is then frozen (SIGSTOP) past the visibility timeout, so
 * worker B reclaims the job, calls the API again and stores the result.
 * Then A is thawed (SIGCONT): its own call's answer has been waiting in its
 * socket, and it settles the same job a second time. The job must end with
 * one result, one event, one "done" count, and the API must have seen two
 * calls (delivery is at-least-once, results exactly-once). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define LATENCY_MS "2500"
#define VISIBILITY_MS "1000"

/* Calls the API saw for job id (by X-Client-Request-Id) with outcome "ok". */
static int sim_calls_ok(const char *log_path, const char *id)
{
    size_t n;
    struct sim_entry *e = sim_log_read(log_path, &n);
    int calls = 0;
    for (size_t i = 0; i < n; i++)
        calls += strcmp(e[i].job, id) == 0 && strcmp(e[i].outcome, "ok") == 0;
    free(e);
    return calls;
}

/* Waits up to timeout_ms until `cmd key` (an integer reply) reaches want. */
static int wait_int(redisContext *c, const char *cmd, const char *key, long long want,
                    long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    while (llmq_test_now_ms() < deadline) {
        if (redis_int(c, cmd, key, NULL) >= want)
            return 1;
        usleep(20000);
    }
    return 0;
}

static void test_two_settles_of_one_job(void **state)
{
    (void)state;
    char account[64], jobs[128], log_a[128], log_b[128], prefix[128], key[256];
    llmq_test_unique_name(account, sizeof(account), "race");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", LATENCY_MS, NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-race-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "r", 1, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    snprintf(log_a, sizeof(log_a), "/tmp/llmq-race-%d-a.log", (int)getpid());
    snprintf(log_b, sizeof(log_b), "/tmp/llmq-race-%d-b.log", (int)getpid());

    const char *args[] = {
        "--visibility-ms", VISIBILITY_MS, "--exit-when-idle-ms", "1000", "--log-level",
        "debug",           NULL};
    pid_t a = worker_start(account, &sim, log_a, args);
    redisContext *c = llmq_test_redis_connect();
    /* A has the job once it logs the dispatch (its call is submitted then;
     * whether the request left before the freeze does not matter: A's call
     * is answered after the thaw either way, and its settle comes second). */
    assert_true(worker_wait_log(log_a, "dispatched:", 20000));
    kill(a, SIGSTOP);

    /* B reclaims the job once A has been silent past the visibility timeout
     * (B stays up longer than that while idle), calls the API and stores the
     * result. */
    const char *args_b[] = {
        "--visibility-ms", VISIBILITY_MS, "--exit-when-idle-ms", "4000", "--log-level",
        "debug",           NULL};
    pid_t b = worker_start(account, &sim, log_b, args_b);
    snprintf(key, sizeof(key), "%sres:r-0", prefix);
    assert_true(wait_int(c, "EXISTS %s", key, 1, 30000));
    assert_int_equal(worker_wait(b, 30000), 0);
    assert_int_equal(worker_event_jobs(c, prefix), 1);

    /* A wakes up to its own answer and settles the job again. */
    kill(a, SIGCONT);
    assert_int_equal(worker_wait(a, 30000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    assert_int_equal(sim_calls_ok(sim.log_file, "r-0"), 2);
    char *text = cli_slurp(log_a);
    int a_settled = strstr(text, "settled: done") != NULL;
    if (!a_settled)
        fprintf(stderr, "worker A's log:\n%s\n", text);
    free(text);
    assert_true(a_settled);

    assert_int_equal(worker_event_jobs(c, prefix), 1);
    snprintf(key, sizeof(key), "%sstats", prefix);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "done"), 1);
    snprintf(key, sizeof(key), "%sdone", prefix);
    assert_int_equal(redis_int(c, "LLEN %s", key, NULL), 1);
    char *st = llmq_test_job_field(c, prefix, "r-0", "state");
    assert_non_null(st);
    assert_string_equal(st, "done");
    free(st);
    assert_int_equal(worker_pending(c, prefix, "normal"), 0);
    redisFree(c);
    unlink(jobs);
    unlink(log_a);
    unlink(log_b);
    unlink(sim.log_file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_settles_of_one_job),
    };
    return cmocka_run_group_tests_name("worker_settle_race", tests, NULL, NULL);
}
