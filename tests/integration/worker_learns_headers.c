/* The model bucket learns from OpenAI's x-ratelimit-* headers, so every
 * worker slows down before the API starts refusing:
 *   - a limit configured too high: the API's x-ratelimit-limit-tokens binds;
 *   - another client on the same key: when the API says fewer tokens remain
 *     than llmq believes, the difference is recorded in the shared bucket
 *     until the API's window resets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define API_TPM 3000
#define PERIOD_MS 4000
/* llmq's window is longer than the API's by a guard: a request admitted in
 * Redis reaches the API some ms later (more under load), and without the
 * guard the last admission of one llmq window can land in the API's previous
 * window (seen: 1 of 121 refused on a loaded machine). */
#define LLMQ_PERIOD_MS (PERIOD_MS + 400)

/* A field of account's gpt-4o-mini bucket hash. */
static long long bucket_field(const char *account, const char *field)
{
    redisContext *c = llmq_test_redis_connect();
    char key[256];
    snprintf(key, sizeof(key), "llmq:{%s}:limit:gpt-4o-mini", account);
    long long v = redis_int(c, "HGET %s %s", key, field);
    redisFree(c);
    return v;
}

static void set_limit(const char *account, const char *tpm, const char *period)
{
    worker_limits_set(account, "gpt-4o-mini", "--tpm", strtoll(tpm, NULL, 10),
                      strtoll(period, NULL, 10));
}

static void test_limit_configured_too_high(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "learn");
    struct sim_proc sim;
    char tpm[16], period[16];
    snprintf(tpm, sizeof(tpm), "%d", API_TPM);
    snprintf(period, sizeof(period), "%d", PERIOD_MS);
    const char *sim_args[] = {"--tpm", tpm, "--period-ms", period, NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    /* llmq is told 30x the API's real limit. */
    char llmq_period[16];
    snprintf(llmq_period, sizeof(llmq_period), "%d", LLMQ_PERIOD_MS);
    set_limit(account, "90000", llmq_period);
    snprintf(log, sizeof(log), "/tmp/llmq-learn-%d.log", (int)getpid());
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-learn-%d.jsonl", (int)getpid());

    /* One job: its response says the limit is 3,000 tokens. */
    worker_write_jobs(jobs, "first", 1, "gpt-4o-mini", 40, NULL);
    worker_enqueue(account, jobs);
    const char *args1[] = {"--exit-when-idle-ms", "500", NULL};
    assert_int_equal(worker_wait(worker_start(account, &sim, log, args1), 30000), 0);
    assert_int_equal(bucket_field(account, "learned_tokens"), API_TPM);
    assert_int_equal(bucket_field(account, "tokens"), 90000); /* configuration untouched */

    /* Now 120 jobs of ~60 tokens (3.6x what the API allows per period):
     * llmq paces them by what it learned, the API refuses none. */
    worker_write_jobs(jobs, "more", 120, "gpt-4o-mini", 40, NULL);
    worker_enqueue(account, jobs);
    const char *args2[] = {"--concurrency", "8", "--exit-when-idle-ms", "1500", NULL};
    assert_int_equal(worker_wait(worker_start(account, &sim, log, args2), 120000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int ok = 0, limited = 0;
    for (size_t i = 0; i < n; i++) {
        ok += strcmp(e[i].outcome, "ok") == 0;
        limited += strncmp(e[i].outcome, "limit_", 6) == 0;
    }
    printf("# %d ok, %d refused by the API's limit\n", ok, limited);
    assert_int_equal(ok, 121);
    assert_int_equal(limited, 0);
    free(e);
    unlink(jobs);
    unlink(log);
}

static void test_another_client_on_the_key(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], period[16], tpm[16];
    llmq_test_unique_name(account, sizeof(account), "other");
    snprintf(tpm, sizeof(tpm), "%d", API_TPM);
    snprintf(period, sizeof(period), "%d", 20000);
    struct sim_proc sim;
    /* The other client's charge is sized in bytes (--prompt-count bytes). */
    const char *sim_args[] = {"--tpm", tpm, "--period-ms", period, "--prompt-count", "bytes", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    set_limit(account, tpm, period); /* right limit, but not alone on the key */
    /* Another client spends about 2,000 of the 3,000 tokens (8,000 bytes of
     * prompt at 4 bytes a token), with the same key. */
    char body[9000];
    int len = snprintf(body, sizeof(body),
                       "{\"model\":\"gpt-4o-mini\",\"max_tokens\":1,\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"");
    memset(body + len, 'x', 8000);
    snprintf(body + len + 8000, sizeof(body) - (size_t)len - 8000, "\"}]}");
    const char *hdr[] = {"Authorization: Bearer " WORKER_TEST_KEY, NULL};
    struct sim_resp resp;
    sim_http(&sim, "/v1/chat/completions", body, hdr, &resp);
    assert_int_equal(resp.status, 200);
    sim_resp_free(&resp);
    /* One job through llmq: its response's remaining-tokens teaches it. */
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-other-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-other-%d.log", (int)getpid());
    worker_write_jobs(jobs, "o", 1, "gpt-4o-mini", 40, NULL);
    worker_enqueue(account, jobs);
    const char *args[] = {"--exit-when-idle-ms", "500", NULL};
    assert_int_equal(worker_wait(worker_start(account, &sim, log, args), 30000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    long long tok = bucket_field(account, "tok");
    printf("# the bucket now counts %lld tokens (its own job: under 100)\n", tok);
    assert_true(tok >= 2000);
    assert_true(tok <= API_TPM);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_configured_too_high),
        cmocka_unit_test(test_another_client_on_the_key),
    };
    return cmocka_run_group_tests_name("worker_learns_headers", tests, NULL, NULL);
}
