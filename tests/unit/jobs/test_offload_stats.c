/* The decoder of lua/offload_stats.lua's reply (common/jobs/offload_stats.c)
 * on replies decoded by hiredis's RESP reader from the bytes a server would
 * send: a model's entry becomes its object (a queue limit of -1 is null, the
 * saving in nano-USD is USD), an entry of the wrong shape is skipped, and a
 * reply that is no array (an error, nil) is NULL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/offload_stats.h"

static redisReply *decode(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    void *reply = NULL;
    assert_int_equal(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &reply), REDIS_OK);
    redisReaderFree(rd);
    assert_non_null(reply);
    return reply;
}

/* One model's 13 values: gpt-4o-mini, all, 3 staged, 40 offloaded, 520
 * tokens, limit LIMIT, states {submitted 1, building 2}, counters 43 40 7 1,
 * saved 1500000000 nano-USD (as text), 2 ended. */
#define ENTRY(LIMIT)                                                                               \
    "*13\r\n$11\r\ngpt-4o-mini\r\n$3\r\nall\r\n:3\r\n:40\r\n:520\r\n" LIMIT                        \
    "*4\r\n$9\r\nsubmitted\r\n:1\r\n$8\r\nbuilding\r\n:2\r\n:43\r\n:40\r\n:7\r\n:1\r\n"            \
    "$10\r\n1500000000\r\n:2\r\n"

static void test_entry(void **state)
{
    (void)state;
    redisReply *r = decode("*1\r\n" ENTRY(":100000\r\n"));
    json_t *a = llmq_offload_stats_json(r);
    freeReplyObject(r);
    assert_int_equal(json_array_size(a), 1);
    json_t *m = json_array_get(a, 0);
    assert_string_equal(json_string_value(json_object_get(m, "model")), "gpt-4o-mini");
    assert_string_equal(json_string_value(json_object_get(m, "mode")), "all");
    static const struct {
        const char *k;
        long long v;
    } want[] = {{"staged", 3},
                {"offloaded", 40},
                {"enqueued_tokens", 520},
                {"queue_limit_tokens", 100000},
                {"staged_ever", 43},
                {"offloaded_ever", 40},
                {"done_ever", 7},
                {"failed_ever", 1},
                {"batches_ended", 2}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_int_equal(json_integer_value(json_object_get(m, want[i].k)), want[i].v);
    json_t *b = json_object_get(m, "batches");
    assert_int_equal(json_object_size(b), 2);
    assert_int_equal(json_integer_value(json_object_get(b, "submitted")), 1);
    assert_int_equal(json_integer_value(json_object_get(b, "building")), 2);
    assert_true(json_real_value(json_object_get(m, "saved_usd")) == 1.5);
    json_decref(a);
}

static void test_no_limit_is_null(void **state)
{
    (void)state;
    redisReply *r = decode("*1\r\n" ENTRY(":-1\r\n"));
    json_t *a = llmq_offload_stats_json(r);
    freeReplyObject(r);
    assert_true(json_is_null(json_object_get(json_array_get(a, 0), "queue_limit_tokens")));
    json_decref(a);
}

static void test_wrong_shapes_skipped(void **state)
{
    (void)state;
    /* too short, not an array, the model not a string, the states not an
     * array; then a good one */
    redisReply *r =
        decode("*5\r\n*2\r\n$1\r\nm\r\n$3\r\nall\r\n:7\r\n"
               "*13\r\n:1\r\n$3\r\nall\r\n:3\r\n:40\r\n:520\r\n:-1\r\n*0\r\n:0\r\n:0\r\n:"
               "0\r\n:0\r\n:0\r\n:0\r\n"
               "*13\r\n$1\r\nm\r\n$3\r\nall\r\n:3\r\n:40\r\n:520\r\n:-1\r\n:9\r\n:0\r\n:"
               "0\r\n:0\r\n:0\r\n:0\r\n:0\r\n" ENTRY(":-1\r\n"));
    json_t *a = llmq_offload_stats_json(r);
    freeReplyObject(r);
    assert_int_equal(json_array_size(a), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "model")),
                        "gpt-4o-mini");
    json_decref(a);
}

static void test_not_an_array(void **state)
{
    (void)state;
    assert_null(llmq_offload_stats_json(NULL));
    const char *replies[] = {"-ERR no such function\r\n", "$-1\r\n", ":1\r\n"};
    for (size_t i = 0; i < 3; i++) {
        redisReply *r = decode(replies[i]);
        assert_null(llmq_offload_stats_json(r));
        freeReplyObject(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entry),
        cmocka_unit_test(test_no_limit_is_null),
        cmocka_unit_test(test_wrong_shapes_skipped),
        cmocka_unit_test(test_not_an_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
