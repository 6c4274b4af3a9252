/* Offload policy auto on a model with named endpoints (docs/DESIGN.md
 * §3.10): the auto step's live budget is the sum of the model's usable
 * endpoints' buckets, not the model's own bucket (which has no limit when
 * endpoints serve the model, so every eligible job would stay live). Real
 * Redis, no worker: the worker-side script pbatch_next is called directly,
 * so nothing runs live and the numbers are exact.
 *   - two endpoints of 8 requests per 1024 ms each, horizon 10 s, low's
 *     headroom 80%: 125 of 200 eligible jobs stay live, 75 are staged;
 *   - one endpoint disabled: the next step keeps 62 (its half), stages 63
 *     more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "offload_support.h"
#include "redis/script.h"

#define N_JOBS 200

/* One call of pbatch_next as a worker holding no endpoint's key: it runs
 * the auto step and makes no batch. */
static void auto_step(struct llmq_test_account *a)
{
    const char *argv[] = {a->prefix, "test-worker", "60000", ""};
    redisReply *x = llmq_script_run(a->c, LLMQ_SCRIPT_PBATCH_NEXT, 1, 4, argv, NULL, NULL);
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_ARRAY);
    assert_int_equal(x->elements, 0);
    freeReplyObject(x);
}

static void auto_budget_is_the_endpoints_sum(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offepauto");
    const char *names[] = {"e0", "e1"};
    for (int i = 0; i < 2; i++) {
        struct cli_run r = ep_cli(a.name, 0, "endpoints", "add", names[i], "--base-url",
                                  "http://127.0.0.1:9", NULL);
        cli_free(&r);
        r = ep_cli(a.name, 0, "limits", "set", MINI, "--endpoint", names[i], "--rpm", "8",
                   "--period-ms", "1024", NULL);
        cli_free(&r);
    }
    struct cli_run r =
        ep_cli(a.name, 0, "offload", "set", MINI, "--mode", "auto", "--horizon-s", "10", NULL);
    cli_free(&r);
    enqueue_marked(a.name, "auto", "a-", N_JOBS);
    assert_int_equal(redis_int(a.c, "LLEN %spbe:%s", a.prefix, MINI), N_JOBS);
    auto_step(&a);
    /* 2 x 8 requests / 1024 ms x 10 s x 0.8 = 125 stay live */
    assert_int_equal(redis_int(a.c, "LLEN %spbe:%s", a.prefix, MINI), 125);
    assert_int_equal(redis_int(a.c, "LLEN %spbs:%s|/v1/chat/completions", a.prefix, MINI), 75);
    r = ep_cli(a.name, 0, "endpoints", "disable", "e1", NULL);
    cli_free(&r);
    /* the next step without waiting out its once-a-second guard */
    redisReply *d = redisCommand(a.c, "DEL %spbau:%s", a.prefix, MINI);
    freeReplyObject(d);
    auto_step(&a);
    assert_int_equal(redis_int(a.c, "LLEN %spbe:%s", a.prefix, MINI), 62);
    assert_int_equal(redis_int(a.c, "LLEN %spbs:%s|/v1/chat/completions", a.prefix, MINI), 138);
    llmq_test_account_close(&a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_budget_is_the_endpoints_sum),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
