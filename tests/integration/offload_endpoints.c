/* Offload on named endpoints, end to end: real Redis, real llmq-workers,
 * one openai-sim per endpoint, each asking for its own key (docs/DESIGN.md
 * §3.10). Two named endpoints (two sims) serve one model under policy `all`:
 *   - each worker holding the key of one endpoint only: the jobs end in
 *     provider batches on both sims; each batch is on the sim of the
 *     endpoint recorded for it (pb:<id> field ep), every call the sims saw
 *     carried their own key (no 401) and named a batch of theirs; each
 *     worker's log names only batches of the endpoint it holds the key of
 *     (a worker without an endpoint's key never touches its batches); each
 *     job is on one line of one input file across both sims and is answered
 *     once, offloaded. The endpoints' file limits (--batch-max-requests)
 *     bound the files below the policy's;
 *   - the batch queue limit per endpoint and model: `llmq limits set MODEL
 *     --endpoint NAME --batch-queue-tokens N` with each sim's own limit
 *     equal to llmq's for that endpoint, one worker holding both keys:
 *     neither sim ever holds more than its limit nor refuses a batch; the
 *     charges are on pbq:<model>@<name> and all given back; the model's own
 *     bucket is not used; `llmq status` shows the model's limit as its
 *     endpoints' together.
 * Each case is its own ctest entry (tests/CMakeLists.txt LLMQ_SPLIT_TESTS).
 * Other tests: offload_endpoints_azure, offload_endpoints_auto. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "offload_support.h"
#include "test_case.h"

#define TWO_JOBS 40
#define Q_JOBS 60

/* Two named endpoints of MINI in account, each its own sim started with
 * sim_args and its own key, added with add_args (NULL: none), with a rate
 * limit far above what a case sends. */
static void two_endpoints_start(const char *account, struct ep_sim eps[2],
                                const char *const *sim_args, const char *const *add_args)
{
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], sim_args);
        ep_add(account, &eps[i], "/v1", add_args);
        ep_limit(account, &eps[i], MINI, 100000, 60000);
    }
}

/* Stops both endpoints' sims and closes the account. */
static void two_endpoints_stop(struct llmq_test_account *a, struct ep_sim eps[2])
{
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
    llmq_test_account_close(a);
}

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
    const char *x[] = {"--batch-max-requests", "4", NULL};
    two_endpoints_start(a.name, eps, sim_args, x);
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
    two_endpoints_stop(&a, eps);
}

static void queue_limit_per_endpoint(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offepq");
    offload_policy_all(a.name, MINI, 5);
    enqueue_marked(a.name, "q", "q-", Q_JOBS);
    long long tokens = 0;
    for (int i = 0; i < Q_JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "q-%d", i);
        tokens += redis_int(a.c, "HGET %sjob:%s est_prompt_tokens", a.prefix, id);
    }
    long long limit = tokens / 6; /* each endpoint's queue holds a sixth */
    char lim[24];
    snprintf(lim, sizeof(lim), "%lld", limit);
    struct ep_sim eps[2];
    const char *sim_args[] = {"--batch-pace-ms", "200", "--batch-queue-tokens", lim, NULL};
    two_endpoints_start(a.name, eps, sim_args, NULL);
    for (int i = 0; i < 2; i++) {
        struct cli_run r = ep_cli(a.name, 0, "limits", "set", MINI, "--endpoint", eps[i].name,
                                  "--batch-queue-tokens", lim, NULL);
        cli_free(&r);
    }
    /* llmq status: the model's queue limit is its endpoints' together */
    const char *st_argv[] = {"llmq", "status", "--json", NULL};
    struct cli_run st = cli_run(a.name, st_argv);
    assert_int_equal(st.status, 0);
    json_t *sj = json_loads(st.out, 0, NULL);
    cli_free(&st);
    assert_non_null(sj);
    size_t k;
    json_t *m;
    int found = 0;
    json_array_foreach(json_object_get(sj, "offload"), k, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "model")), MINI) != 0)
            continue;
        found = 1;
        assert_int_equal(json_integer_value(json_object_get(m, "queue_limit_tokens")), 2 * limit);
    }
    assert_true(found);
    json_decref(sj);
    char log[128], store[2][96];
    worker_log_path(log, "offepq", 0);
    const char *args[8];
    ep_key_args(eps, 2, args, 0, store);
    pid_t w = worker_start(a.name, &eps[0].sim, log, args);
    wait_results(&a, "q-", Q_JOBS);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 60000), 0);
    for (int i = 0; i < 2; i++) {
        json_t *bl = ep_get(&eps[i], "/v1/batches", 0);
        const json_t *q = json_object_get(bl, "sim_queue");
        long long held = json_integer_value(json_object_get(q, "max_tokens"));
        fprintf(stderr, "offload_endpoints: %s: limit %lld, held at most %lld, %zu batches\n",
                eps[i].name, limit, held, json_array_size(json_object_get(bl, "data")));
        assert_true(held > 0);
        assert_true(held <= limit);
        assert_int_equal(json_integer_value(json_object_get(q, "refused")), 0);
        json_decref(bl);
        char bucket[64];
        snprintf(bucket, sizeof(bucket), "%s@%.31s", MINI, eps[i].name);
        assert_int_equal(redis_int(a.c, "HGET %spbq:%s limit", a.prefix, bucket), limit);
        assert_int_equal(redis_int(a.c, "HGET %spbq:%s used", a.prefix, bucket), 0);
    }
    /* the model's own bucket (the implicit endpoint's) took no charge */
    assert_int_equal(redis_int(a.c, "EXISTS %spbq:%s", a.prefix, MINI), 0);
    two_endpoints_stop(&a, eps);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_endpoints_each_with_its_key),
        cmocka_unit_test(queue_limit_per_endpoint),
    };
    if (LLMQ_TEST_CASE_SELECT(tests) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
