/* Offload across a worker's death (docs/DESIGN.md §3.10): a worker killed
 * with SIGKILL right after the provider answered its upload, or its batch
 * creation, before it recorded that in Redis (the worker's test hook
 * LLMQ_TEST_PBATCH_CRASH), leaves the provider batch in uploading or
 * creating. A second worker takes it over when the lease ends, finds the
 * provider's file (by its name, "<id>.jsonl") or batch (by its metadata
 * llmq_batch_id) instead of sending it again, and finishes: no provider
 * batch or file twice, no job lost, none answered twice. One killed during
 * the collection, after lines were settled, leaves it collecting: the taker
 * downloads and settles again, and no job gets a second result. The
 * account's own batch price (`llmq prices set MODEL@batch`) is what the
 * spend counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "account.h"
#include "offload_support.h"

#define JOBS 100

static void killed_at(const char *hook, const char *takeover_says)
{
    struct sim_proc sim;
    const char *sim_args[] = {"--batch-pace-ms", "200", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offcrash");
    offload_policy_all(a.name, "gpt-4o-mini", 50);
    const char *price[] = {"llmq",
                           "prices",
                           "set",
                           "gpt-4o-mini@batch",
                           "--input-usd-per-1m",
                           "0.01",
                           "--output-usd-per-1m",
                           "0.02",
                           NULL};
    struct cli_run pr = cli_run(a.name, price);
    assert_int_equal(pr.status, 0);
    cli_free(&pr);
    const char *path = "/tmp/offload-crash.jsonl";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    offload_write_jobs(f, "c-", JOBS, "gpt-4o-mini", 1, NULL);
    fclose(f);
    worker_enqueue(a.name, path);
    char *ids[JOBS];
    for (int i = 0; i < JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "c-%d", i);
        ids[i] = strdup(id);
    }
    char log1[128], log2[128];
    worker_log_path(log1, "offcrash", 1);
    worker_log_path(log2, "offcrash", 2);
    const char *extra1[] = {"--consumer", "crash-w1", "--offload-lease-ms", "1000", NULL};
    setenv("LLMQ_TEST_PBATCH_CRASH", hook, 1);
    pid_t w1 = worker_start(a.name, &sim, log1, extra1);
    unsetenv("LLMQ_TEST_PBATCH_CRASH");
    assert_int_equal(worker_wait(w1, 60000), 128 + SIGKILL);
    const char *extra2[] = {"--consumer", "crash-w2", "--offload-lease-ms", "1000", NULL};
    pid_t w2 = worker_start(a.name, &sim, log2, extra2);
    offload_wait_all(a.c, a.prefix, ids, JOBS);
    offload_wait_ended(a.c, a.prefix);
    kill(w2, SIGTERM);
    assert_int_equal(worker_wait(w2, 60000), 0);
    /* the taker found what the dead worker had done at the provider */
    assert_true(worker_log_count(log2, takeover_says) >= 1);
    /* every provider batch once: one input file and one batch per llmq id */
    redisReply *pbs = redisCommand(a.c, "ZRANGE %spbl 0 -1", a.prefix);
    assert_int_equal(pbs->elements, JOBS / 50);
    for (size_t i = 0; i < pbs->elements; i++) {
        int files, batches;
        offload_sim_count(&sim, pbs->element[i]->str, &files, &batches);
        assert_int_equal(files, 1);
        assert_int_equal(batches, 1);
    }
    freeReplyObject(pbs);
    /* every job answered, once, from a provider batch */
    long long want_nusd = 0;
    for (int i = 0; i < JOBS; i++) {
        char *text = offload_result(a.c, a.prefix, ids[i]);
        json_t *l = json_loads(text, 0, NULL);
        const json_t *u =
            json_object_get(json_object_get(json_object_get(l, "response"), "body"), "usage");
        want_nusd += json_integer_value(json_object_get(u, "prompt_tokens")) * 10 +
                     json_integer_value(json_object_get(u, "completion_tokens")) * 20;
        assert_true(json_is_true(json_object_get(l, "offloaded")));
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(l, "response"), "status_code")),
            200);
        json_decref(l);
        free(text);
        free(ids[i]);
    }
    assert_int_equal(redis_int(a.c, "HGET %sstats %s", a.prefix, "done"), JOBS);
    /* spend at the account's batch price: 0.01 and 0.02 USD per 1M = 10 and
     * 20 nano-USD per token */
    redisReply *k = redisCommand(a.c, "KEYS %sspend:*", a.prefix);
    long long nusd = 0;
    for (size_t i = 0; i < k->elements; i++)
        nusd += redis_int(a.c, "HGET %s %s", k->element[i]->str, "gpt-4o-mini|||nusd");
    freeReplyObject(k);
    assert_int_equal(nusd, want_nusd);
    assert_int_equal(sim_proc_stop(&sim), 0);
    llmq_test_account_close(&a);
}

static void killed_after_upload(void **state)
{
    (void)state;
    killed_at("after_upload", "not uploading again");
}

static void killed_after_create(void **state)
{
    (void)state;
    killed_at("after_create", "not creating another");
}

static void killed_while_collecting(void **state)
{
    (void)state;
    killed_at("after_settle", "again (a turn ended mid-way)");
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(killed_after_upload),
        cmocka_unit_test(killed_after_create),
        cmocka_unit_test(killed_while_collecting),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
