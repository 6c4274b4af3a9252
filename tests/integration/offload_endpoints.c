/* Offload on named endpoints, end to end: real Redis, two real
 * llmq-workers, one openai-sim per endpoint, each asking for its own key
 * (docs/DESIGN.md §3.10). One model served by two named endpoints (two
 * sims), policy `all`, each worker holding the key of one endpoint only:
 * the jobs end in provider batches on both sims; each batch is on the sim
 * of the endpoint recorded for it (pb:<id> field ep), every call the sims
 * saw carried their own key (no 401) and named a batch of theirs; each
 * worker's log names only batches of the endpoint it holds the key of (a
 * worker without an endpoint's key never touches its batches); each job is
 * on one line of one input file across both sims and is answered once,
 * offloaded. The endpoints' file limits (--batch-max-requests) bound the
 * files below the policy's. Other tests: offload_endpoints_azure,
 * offload_endpoints_queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "offload_endpoints_support.h"

#define TWO_JOBS 40

static void two_endpoints_each_with_its_key(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offep2");
    struct ep_sim eps[2];
    /* each sim's first upload answers 3 s late: whichever worker starts
     * first cannot make every batch before the other one looks */
    const char *sim_args[] = {"--batch-pace-ms",
                              "200",
                              "--batch-api-slow-ms",
                              "3000",
                              "--batch-api-slow-first",
                              "1",
                              NULL};
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], sim_args);
        const char *x[] = {"--batch-max-requests", "4", NULL};
        ep_add(a.name, &eps[i], "/v1", x);
        ep_limit(a.name, &eps[i], MINI, 100000, 60000);
    }
    offload_policy_all(a.name, MINI, 8); /* the endpoints' 4 binds */
    pid_t w[2];
    char logs[2][128];
    for (int i = 0; i < 2; i++) {
        worker_log_path(logs[i], "offep2", i);
        char consumer[64], store[1][96];
        snprintf(consumer, sizeof(consumer), "offep2-w%d", i);
        const char *args[8] = {"--consumer", consumer};
        ep_key_args(&eps[i], 1, args, 2, store);
        w[i] = worker_start(a.name, &eps[0].sim, logs[i], args);
    }
    for (int i = 0; i < 2; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    enqueue_marked(a.name, "two", "e-", TWO_JOBS);
    wait_results(&a, "e-", TWO_JOBS);
    for (int i = 0; i < 2; i++) {
        kill(w[i], SIGTERM);
        assert_int_equal(worker_wait(w[i], 60000), 0);
    }
    /* every call with the sim's own key, about a batch of its endpoint
     * (read before the test's own calls below join the access logs) */
    for (int i = 0; i < 2; i++)
        assert_true(ep_check_log(a.c, a.prefix, &eps[i], 0) > 0);
    /* each job on one line of one input file, across both sims */
    int seen[TWO_JOBS] = {0};
    size_t batches[2];
    for (int i = 0; i < 2; i++)
        batches[i] = ep_count_lines(&eps[i], 0, "e-", seen, TWO_JOBS, MINI, "/v1/chat/completions");
    for (int k = 0; k < TWO_JOBS; k++)
        assert_int_equal(seen[k], 1);
    fprintf(stderr, "offload_endpoints: %zu batches on ep0, %zu on ep1\n", batches[0], batches[1]);
    assert_true(batches[0] >= 1 && batches[1] >= 1);
    assert_true(batches[0] + batches[1] >= TWO_JOBS / 4);
    /* each worker touched only the batches of the endpoint it holds */
    for (int i = 0; i < 2; i++)
        assert_true(log_batches_on(a.c, a.prefix, logs[i], eps[i].name) > 0);
    /* the queue charges are on the endpoints' buckets, all given back */
    for (int i = 0; i < 2; i++) {
        char bucket[64];
        snprintf(bucket, sizeof(bucket), "%s@%.31s", MINI, eps[i].name);
        assert_int_equal(redis_int(a.c, "HGET %spbq:%s used", a.prefix, bucket), 0);
    }
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
    llmq_test_account_close(&a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_endpoints_each_with_its_key),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
