/* Jobs that cannot succeed reach the dead-letter stream with a reason: a 4xx
 * from the API (at once, with the response), a deadline passed before the
 * call (without a call), a 429 insufficient_quota (not a rate limit: not
 * retried), and a cost that can never fit the model's limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

/* Counts entries of P dead whose reason starts with reason. */
static int dead_with(redisContext *c, const char *prefix, const char *reason)
{
    char key[256];
    snprintf(key, sizeof(key), "%sdead", prefix);
    redisReply *r = redisCommand(c, "XRANGE %s - +", key);
    int n = 0;
    for (size_t i = 0; r && i < r->elements; i++) {
        redisReply *f = r->element[i]->element[1];
        for (size_t j = 0; j + 1 < f->elements; j += 2)
            if (strcmp(f->element[j]->str, "reason") == 0 &&
                strncmp(f->element[j + 1]->str, reason, strlen(reason)) == 0)
                n++;
    }
    freeReplyObject(r);
    return n;
}

static void run_worker(const char *account, const struct sim_proc *sim)
{
    char log[128];
    snprintf(log, sizeof(log), "/tmp/llmq-dead-%d.log", (int)getpid());
    const char *args[] = {"--exit-when-idle-ms", "1500", "--backoff-base-ms", "50", NULL};
    assert_int_equal(worker_wait(worker_start(account, sim, log, args), 60000), 0);
    unlink(log);
}

static void test_dead_letter_reasons(void **state)
{
    (void)state;
    char account[64], jobs[128], prefix[128];
    llmq_test_unique_name(account, sizeof(account), "dead");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-dead-%d.jsonl", (int)getpid());
    struct sim_proc sim;
    const char *sim_args[] = {"--models", "gpt-4o-mini", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    /* 404: a model the API does not know. */
    worker_write_jobs(jobs, "nf", 3, "gpt-unknown", 20, NULL);
    worker_enqueue(account, jobs);
    /* Expired: a 1 ms TTL, run after it passed. */
    worker_write_jobs(jobs, "ex", 3, "gpt-4o-mini", 20, "{\"ttl_ms\":1}");
    worker_enqueue(account, jobs);
    /* Never fits: 5,000 reserved tokens against a 1,000-token limit. */
    const char *limits[] = {"llmq", "limits", "set", "gpt-4o-mini", "--tpm", "1000", NULL};
    struct cli_run r = cli_run(account, limits);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    worker_write_jobs(jobs, "big", 2, "gpt-4o-mini", 5000, NULL);
    worker_enqueue(account, jobs);
    usleep(20000);
    run_worker(account, &sim);
    assert_int_equal(sim_proc_stop(&sim), 0);

    redisContext *c = llmq_test_redis_connect();
    assert_int_equal(dead_with(c, prefix, "http 404"), 3);
    assert_int_equal(dead_with(c, prefix, "expired"), 3);
    assert_int_equal(dead_with(c, prefix, "never_fits"), 2);
    /* The 404's result carries the API's response. */
    redisReply *res = redisCommand(c, "GET %sres:nf-0", prefix);
    assert_non_null(strstr(res->str, "\"status_code\":404"));
    freeReplyObject(res);
    /* Expired and hopeless jobs never reached the API. */
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    for (size_t i = 0; i < n; i++)
        assert_true(strncmp(e[i].job, "ex-", 3) != 0 && strncmp(e[i].job, "big-", 4) != 0);
    assert_int_equal(n, 3);
    free(e);

    /* insufficient_quota: dead at once, one call each, never retried. */
    char account2[64], prefix2[128];
    llmq_test_unique_name(account2, sizeof(account2), "quota");
    snprintf(prefix2, sizeof(prefix2), "llmq:{%s}:", account2);
    const char *quota_args[] = {"--insufficient-quota", "100", NULL};
    assert_int_equal(sim_proc_start(&sim, quota_args), 0);
    worker_write_jobs(jobs, "q", 4, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account2, jobs);
    run_worker(account2, &sim);
    assert_int_equal(sim_proc_stop(&sim), 0);
    assert_int_equal(dead_with(c, prefix2, "insufficient_quota"), 4);
    /* counted for status as 429s that are not rate limits */
    assert_int_equal(llmq_test_redis_int(c, "HGET %sstats %s", prefix2, "insufficient_quota"), 4);
    assert_int_equal(llmq_test_redis_int(c, "HGET %sstats %s", prefix2, "http_429"), 4);
    e = sim_log_read(sim.log_file, &n);
    assert_int_equal(n, 4);
    free(e);
    redisFree(c);
    unlink(jobs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dead_letter_reasons),
    };
    return cmocka_run_group_tests_name("worker_dead_letters", tests, NULL, NULL);
}
