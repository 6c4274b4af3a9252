/* The worker against APIs that answer differently: Azure OpenAI (deployment
 * URLs, api-version, api-key auth, Azure 429 bodies), rate-limit headers
 * missing, -1, 0 or *_usage_based, and a server that always fails (attempts
 * run out: dead-lettered with the last error after exactly max_attempts
 * calls). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define JOBS 6

/* Runs JOBS jobs for a new account against a sim started with sim_args and a
 * worker with worker_args; returns the account's done count and fills the
 * sim's access-log entries. */
static long long run_batch(const char *const *sim_args, const char *const *worker_args,
                           const char *llmq_opts, char *account, size_t account_len,
                           struct sim_entry **entries, size_t *n_entries)
{
    char jobs[128], log[128], key[256];
    llmq_test_unique_name(account, account_len, "variant");
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-variant-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "v", JOBS, "gpt-4o-mini", 20, llmq_opts);
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-variant-%d.log", (int)getpid());
    const char *args[24];
    int argc = 0;
    for (int i = 0; worker_args != NULL && worker_args[i] != NULL && argc < 20; i++)
        args[argc++] = worker_args[i];
    args[argc++] = "--exit-when-idle-ms";
    args[argc++] = "1500";
    args[argc] = NULL;
    assert_int_equal(worker_wait(worker_start(account, &sim, log, args), 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    *entries = sim_log_read(sim.log_file, n_entries);
    redisContext *c = llmq_test_redis_connect();
    snprintf(key, sizeof(key), "llmq:{%s}:stats", account);
    long long done = redis_int(c, "HGET %s %s", key, "done");
    redisFree(c);
    unlink(jobs);
    unlink(log);
    return done;
}

static void test_azure_deployment(void **state)
{
    (void)state;
    char account[64];
    struct sim_entry *e;
    size_t n;
    static char base[128];
    const char *sim_args[] = {"--azure", "--rpm", "1000", "--period-ms", "60000", NULL};
    /* The deployment URL is the base: the flag given here comes after
     * worker_start's own --base-url, and the last one wins. */
    struct sim_proc sim;
    char jobs[128], log[128], key[256];
    llmq_test_unique_name(account, sizeof(account), "azure");
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(base, sizeof(base), "http://127.0.0.1:%d/openai/deployments/gpt-4o-mini", sim.port);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-azure-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "az", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-azure-%d.log", (int)getpid());
    const char *args[] = {
        "--base-url", base, "--azure-api-version", "2024-10-21", "--exit-when-idle-ms",
        "1500",       NULL};
    assert_int_equal(worker_wait(worker_start(account, &sim, log, args), 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    e = sim_log_read(sim.log_file, &n);
    assert_int_equal(n, JOBS);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(e[i].outcome, "ok");
    free(e);
    redisContext *c = llmq_test_redis_connect();
    snprintf(key, sizeof(key), "llmq:{%s}:stats", account);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "done"), JOBS);
    redisFree(c);
    unlink(jobs);
    unlink(log);
}

static void test_rate_limit_header_variants(void **state)
{
    (void)state;
    const char *variants[] = {"none", "negative", "zero", "usage_based"};
    for (size_t v = 0; v < 4; v++) {
        char account[64];
        struct sim_entry *e;
        size_t n;
        const char *sim_args[] = {"--rpm",     "1000", "--tpm", "1000000", "--ratelimit-headers",
                                  variants[v], NULL};
        long long done = run_batch(sim_args, NULL, NULL, account, sizeof(account), &e, &n);
        printf("# headers %s: %lld done, %zu calls\n", variants[v], done, n);
        assert_int_equal(done, JOBS);
        assert_int_equal(n, JOBS);
        free(e);
    }
}

static void test_attempts_run_out(void **state)
{
    (void)state;
    char account[64], prefix[128], key[256];
    struct sim_entry *e;
    size_t n;
    const char *sim_args[] = {"--fail-503", "100", NULL};
    const char *worker_args[] = {"--backoff-base-ms", "20", "--backoff-cap-ms", "50", NULL};
    long long done =
        run_batch(sim_args, worker_args, "{\"max_attempts\":3}", account, sizeof(account), &e, &n);
    assert_true(done <= 0);
    assert_int_equal(n, 3 * JOBS); /* exactly max_attempts calls per job */
    free(e);
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    redisContext *c = llmq_test_redis_connect();
    snprintf(key, sizeof(key), "%sstats", prefix);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "dead"), JOBS);
    redisReply *r = redisCommand(c, "XRANGE %sdead - + COUNT 1", prefix);
    assert_int_equal(r->elements, 1);
    int found = 0;
    redisReply *f = r->element[0]->element[1];
    for (size_t j = 0; j + 1 < f->elements; j += 2)
        found |= strcmp(f->element[j]->str, "reason") == 0 &&
                 strstr(f->element[j + 1]->str, "attempts_exhausted: http 503") != NULL;
    assert_true(found);
    freeReplyObject(r);
    redisFree(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_azure_deployment),
        cmocka_unit_test(test_rate_limit_header_variants),
        cmocka_unit_test(test_attempts_run_out),
    };
    return cmocka_run_group_tests_name("worker_api_variants", tests, NULL, NULL);
}
