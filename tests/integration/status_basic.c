/* llmq status against a known state: per priority queued / in flight /
 * dead, totals, consumers with idle times, buckets with limits (through the
 * limiter's bucket_usage script), settings; text and --json; --all-accounts. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs_cli_run.h"
#include "jobs_fake_worker.h"
#include "account.h"
#include "llmq/llmq.h"
#include "redis/redis.h"
#include "testsupport.h"

#define BODY "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"

static long long jint(json_t *o, const char *a, const char *b)
{
    return json_integer_value(json_object_get(json_object_get(o, a), b));
}

static void test_status(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "status");
    /* low: 2 jobs ended by the fake worker (1 dead); then 5 normal, 3 high */
    for (int i = 0; i < 2; i++) {
        struct llmq_job_options jo = {.priority = LLMQ_PRIORITY_LOW};
        assert_int_equal(
            llmq_producer_enqueue(a.producer, "/v1/chat/completions", BODY, &jo, NULL, NULL),
            LLMQ_OK);
    }
    assert_int_equal(fake_worker_run(a.c, a.prefix, 10, 100, 2), 2);
    for (int i = 0; i < 8; i++) {
        struct llmq_job_options jo = {.priority =
                                          i < 5 ? LLMQ_PRIORITY_NORMAL : LLMQ_PRIORITY_HIGH};
        assert_int_equal(
            llmq_producer_enqueue(a.producer, "/v1/chat/completions", BODY, &jo, NULL, NULL),
            LLMQ_OK);
        if (i == 4) {
            /* a worker "w-busy" takes 2 normal jobs and holds them in flight */
            const char *dargv[] = {a.prefix, "w-busy", "2"};
            redisReply *d = llmq_script_run(a.c, LLMQ_SCRIPT_DISPATCH, 1, 3, dargv, NULL, NULL);
            assert_true(d != NULL && d->type == REDIS_REPLY_ARRAY && d->elements == 6);
            freeReplyObject(d);
        }
    }
    freeReplyObject(redisCommand(a.c,
                                 "HSET %slimit:gpt-4o-mini requests 100 tokens 10000 "
                                 "period_ms 60000 mode window",
                                 a.prefix));
    freeReplyObject(redisCommand(a.c, "HSET %ssettings result_max 777", a.prefix));

    const char *argv[] = {"llmq", "status", "--json", NULL};
    struct cli_run r = cli_run(a.name, argv);
    assert_int_equal(r.status, 0);
    json_t *s = json_loads(r.out, 0, NULL);
    assert_non_null(s);
    json_t *q = json_object_get(s, "queues");
    assert_int_equal(jint(q, "high", "queued"), 3);
    assert_int_equal(jint(q, "normal", "queued"), 3);
    assert_int_equal(jint(q, "normal", "in_flight"), 2);
    assert_int_equal(jint(q, "low", "queued"), 0);
    assert_int_equal(jint(q, "low", "dead"), 1);
    assert_int_equal(jint(s, "totals", "dead"), 1);
    assert_int_equal(jint(s, "totals", "results_kept"), 1);
    assert_int_equal(jint(s, "totals", "done_ever"), 1);
    assert_int_equal(jint(s, "settings", "result_max"), 777);
    json_t *cons = json_object_get(s, "consumers");
    int busy = 0;
    for (size_t i = 0; i < json_array_size(cons); i++) {
        json_t *x = json_array_get(cons, i);
        if (strcmp(json_string_value(json_object_get(x, "name")), "w-busy") == 0) {
            busy = 1;
            assert_int_equal(json_integer_value(json_object_get(x, "pending")), 2);
            assert_true(json_integer_value(json_object_get(x, "idle_ms")) >= 0);
        }
    }
    assert_true(busy);
    json_t *b = json_array_get(json_object_get(s, "buckets"), 0);
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "name")), "gpt-4o-mini");
    assert_int_equal(json_integer_value(json_object_get(b, "requests_limit")), 100);
    assert_int_equal(json_integer_value(json_object_get(b, "tokens_limit")), 10000);
    json_decref(s);
    cli_free(&r);

    const char *text[] = {"llmq", "status", NULL};
    r = cli_run(a.name, text);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "account "));
    assert_non_null(strstr(r.out, "w-busy"));
    assert_non_null(strstr(r.out, "gpt-4o-mini"));
    cli_free(&r);

    const char *all[] = {"llmq", "status", "--json", "--all-accounts", NULL};
    r = cli_run(a.name, all);
    if (r.status != 0)
        fprintf(stderr, "llmq status --all-accounts: %s\n", r.err);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, a.name));
    cli_free(&r);
    llmq_test_account_close(&a);
}

/* Low jobs held back by the low-priority headroom: status says that this is
 * what holds them (the counts alone showed only "queued"). */
static void test_low_headroom_said(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "headroom");
    freeReplyObject(redisCommand(
        a.c, "HSET %slimit:gpt-4o-mini requests 10 period_ms 600000 mode window", a.prefix));
    for (int i = 0; i < 10; i++) {
        struct llmq_job_options jo = {.priority = LLMQ_PRIORITY_LOW};
        assert_int_equal(
            llmq_producer_enqueue(a.producer, "/v1/chat/completions", BODY, &jo, NULL, NULL),
            LLMQ_OK);
    }
    /* 8 of 10 requests (80%, the default headroom_low): the other 2 stay */
    const char *dargv[] = {a.prefix, "w-low", "10"};
    redisReply *d = llmq_script_run(a.c, LLMQ_SCRIPT_DISPATCH, 1, 3, dargv, NULL, NULL);
    assert_true(d != NULL && d->type == REDIS_REPLY_ARRAY);
    assert_int_equal(d->elements - 4, 8);
    freeReplyObject(d);
    const char *argv[] = {"llmq", "status", NULL};
    struct cli_run r = cli_run(a.name, argv);
    assert_int_equal(r.status, 0);
    if (!strstr(r.out, "low jobs held: gpt-4o-mini is at or above 80% of its limit (low "
                       "headroom)") ||
        !strstr(r.out, "low-priority jobs run only while their buckets are below 80%"))
        fail_msg("status does not say what holds the low jobs:\n%s", r.out);
    cli_free(&r);
    llmq_test_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_status),
                                       cmocka_unit_test(test_low_headroom_said)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
