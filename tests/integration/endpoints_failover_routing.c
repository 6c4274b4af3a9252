/* Failover away from the endpoint that failed a job, under the routings
 * where that endpoint is the one preferred (endpoints_failover covers
 * balanced routing, where an endpoint that failed a job is only one among
 * equals). Two endpoints of one model with ample budgets; the preferred one
 * answers its first call 500 and every later one 200 (openai-sim
 * --fail-first 1), and one job runs:
 *   - spillover: tier 1 fails it, tier 2 has room;
 *   - fastest: the fast endpoint fails it, the slow one has room;
 * the retry goes to the other endpoint, not back to the one that failed it
 * (which would answer it now): the preferred endpoint sees exactly one call
 * (the 500), the other exactly one (the 200), the job is done and nothing
 * is dead. One failure is below the endpoints' threshold: no cooling is
 * involved, only the job's own record of the endpoints that failed it.
 * The worker's log says what happened: the job failed over (not counted as
 * an attempt), no "retry (attempt 2 of 5)" and, with one attempt allowed
 * (the spillover run), no "dead-lettered: attempts_exhausted". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

/* Runs one job "<tag>-0" of account through one worker holding the keys of
 * both endpoints, allowing it max_attempts, then checks: eps[0] (the
 * preferred one) saw one call, a 500; eps[1] one call, a 200; the job has
 * its result, nothing is dead; the worker logged one failover from eps[0]
 * and neither a retry nor a dead letter, and its summary counts none dead. */
static void run_one_job_and_check(const char *account, struct ep_sim *eps, const char *tag,
                                  int max_attempts)
{
    char jobs[128], logs[1][128], store[2][96];
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-%s-%d.jsonl", tag, (int)getpid());
    char opts[48]; /* the job's own: enqueue stores one for every job */
    snprintf(opts, sizeof(opts), "{\"max_attempts\":%d}", max_attempts);
    worker_write_jobs(jobs, tag, 1, "gpt-4o-mini", 20, opts);
    const char *args[4 + 4 + 1] = {"--concurrency", "1", "--exit-when-idle-ms", "1500"};
    ep_key_args(eps, 2, args, 4, store);
    worker_enqueue(account, jobs); /* first: the worker exits once idle */
    pid_t pid;
    worker_start_n(account, &eps[0].sim, tag, 1, logs, &pid, args);
    worker_wait_n(&pid, 1, 60000);
    ep_assert_results(account, tag, 1, 1);
    size_t n0, n1;
    ep_sim_stop(&eps[0]);
    ep_sim_stop(&eps[1]);
    struct sim_entry *e0 = ep_log(&eps[0], &n0), *e1 = ep_log(&eps[1], &n1);
    printf("# %s: %zu call(s) (first: %d), %s: %zu call(s) (first: %d)\n", eps[0].name, n0,
           n0 > 0 ? e0[0].status : 0, eps[1].name, n1, n1 > 0 ? e1[0].status : 0);
    assert_int_equal(n0, 1);
    assert_int_equal(e0[0].status, 500);
    assert_int_equal(n1, 1);
    assert_int_equal(e1[0].status, 200);
    free(e0);
    free(e1);
    char want[128];
    snprintf(want, sizeof(want), "failed over from endpoint %s", eps[0].name);
    int failed_over = worker_log_count(logs[0], want),
        retried = worker_log_count(logs[0], "retry (attempt"),
        dead = worker_log_count(logs[0], "dead-lettered");
    printf("# log: %d failover(s), %d retry line(s), %d dead letter line(s)\n", failed_over,
           retried, dead);
    assert_int_equal(failed_over, 1);
    assert_int_equal(worker_log_count(logs[0], "not counted as an attempt"), 1);
    assert_int_equal(retried, 0);
    assert_int_equal(dead, 0);
    /* and the exit summary counts no dead letter */
    assert_int_equal(worker_log_count(logs[0], "summary: "), 1);
    assert_int_equal(worker_log_count(logs[0], ", dead 0, "), 1);
    unlink(jobs);
    unlink(logs[0]);
}

static void test_spillover_retry_goes_to_tier_two(void **state)
{
    (void)state;
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "epfospill");
    struct ep_sim eps[2];
    const char *failing[] = {"--fail-first", "1", NULL};
    ep_init(&eps[0], 0);
    ep_init(&eps[1], 1);
    /* tier 2 sorts first by name: only the tiers prefer tier 1 */
    snprintf(eps[0].name, sizeof(eps[0].name), "b-tier1");
    snprintf(eps[1].name, sizeof(eps[1].name), "a-tier2");
    ep_sim_start(&eps[0], failing);
    ep_sim_start(&eps[1], NULL);
    const char *t1[] = {"--tier", "1", NULL}, *t2[] = {"--tier", "2", NULL};
    ep_add(account, &eps[0], "/v1", t1);
    ep_add(account, &eps[1], "/v1", t2);
    for (int i = 0; i < 2; i++)
        ep_limit(account, &eps[i], "gpt-4o-mini", 10000, 60000);
    run_one_job_and_check(account, eps, "fospill", 1);
}

static void test_fastest_retry_goes_to_the_slower_one(void **state)
{
    (void)state;
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "epfofast");
    struct ep_sim eps[2];
    const char *failing[] = {"--fail-first", "1", "--latency-ms", "10", NULL},
               *slow[] = {"--latency-ms", "200", NULL};
    ep_init(&eps[0], 0);
    ep_init(&eps[1], 1);
    /* the slow one sorts first by name: only latency prefers the fast one */
    snprintf(eps[0].name, sizeof(eps[0].name), "b-fast");
    snprintf(eps[1].name, sizeof(eps[1].name), "a-slow");
    ep_sim_start(&eps[0], failing);
    ep_sim_start(&eps[1], slow);
    for (int i = 0; i < 2; i++) {
        ep_add(account, &eps[i], "/v1", NULL);
        ep_limit(account, &eps[i], "gpt-4o-mini", 10000, 60000);
    }
    struct cli_run r = ep_cli(account, 0, "endpoints", "routing", "gpt-4o-mini", "fastest", NULL);
    cli_free(&r);
    /* The latencies earlier calls measured (lat_ms of each endpoint's
     * health, lua/lib/endpoints.lua): the fast one is preferred. */
    redisContext *c = llmq_test_redis_connect();
    const long long lat[2] = {10, 200};
    for (int i = 0; i < 2; i++) {
        redisReply *x =
            redisCommand(c, "HSET llmq:{%s}:eph:%s lat_ms %lld", account, eps[i].name, lat[i]);
        assert_non_null(x);
        assert_int_not_equal(x->type, REDIS_REPLY_ERROR);
        freeReplyObject(x);
    }
    redisFree(c);
    run_one_job_and_check(account, eps, "fofast", 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spillover_retry_goes_to_tier_two),
        cmocka_unit_test(test_fastest_retry_goes_to_the_slower_one),
    };
    return cmocka_run_group_tests_name("endpoints_failover_routing", tests, NULL, NULL);
}
