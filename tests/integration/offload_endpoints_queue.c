/* The batch queue limit per endpoint and model, end to end: real Redis, a
 * real llmq-worker holding two endpoints' keys, one openai-sim per endpoint
 * (docs/DESIGN.md §3.10). `llmq limits set MODEL --endpoint NAME
 * --batch-queue-tokens N` with each sim's own limit equal to llmq's for
 * that endpoint: neither sim ever holds more than its limit nor refuses a
 * batch; the charges are on pbq:<model>@<name> and all given back; the
 * model's own bucket is not used; `llmq status` shows the model's limit as
 * its endpoints' together. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "offload_endpoints_support.h"

#define Q_JOBS 60

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
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], sim_args);
        ep_add(a.name, &eps[i], "/v1", NULL);
        ep_limit(a.name, &eps[i], MINI, 100000, 60000);
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
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
    llmq_test_account_close(&a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(queue_limit_per_endpoint),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
