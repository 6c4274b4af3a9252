/* The reply accessors (common/redis/reply_read.c) on replies decoded by
 * hiredis's own RESP reader from the bytes a server would send: integers
 * and decimal strings read as integers and nothing else does, copies fit or
 * fail without touching the buffer, element access is bounds- and
 * type-checked, and NULL is a missing value everywhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "redis/reply_read.h"

static redisReply *decode_n(const char *resp, size_t len)
{
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    void *reply = NULL;
    int fed = redisReaderFeed(rd, resp, len);
    int got = redisReaderGetReply(rd, &reply);
    redisReaderFree(rd);
    assert_int_equal(fed, REDIS_OK);
    assert_int_equal(got, REDIS_OK);
    assert_non_null(reply);
    return reply;
}

static redisReply *decode(const char *resp)
{
    return decode_n(resp, strlen(resp));
}

static void test_int(void **state)
{
    (void)state;
    static const struct {
        const char *resp;
        int ok;
        int64_t want;
    } cases[] = {
        {":42\r\n", 1, 42},
        {":-7\r\n", 1, -7},
        {"$3\r\n123\r\n", 1, 123},
        {"$2\r\n-5\r\n", 1, -5},
        {"$20\r\n-9223372036854775808\r\n", 1, INT64_MIN},
        {"$19\r\n9223372036854775807\r\n", 1, INT64_MAX},
        {"$19\r\n9223372036854775808\r\n", 0, 0}, /* out of range */
        {"$0\r\n\r\n", 0, 0},
        {"$3\r\n12a\r\n", 0, 0},
        {"$3\r\n 12\r\n", 0, 0}, /* strtoll would skip the space */
        {"$3\r\n+12\r\n", 0, 0},
        {"$21\r\n000000000000000000001\r\n", 0, 0}, /* longer than any int64 */
        {"+OK\r\n", 0, 0},
        {"-ERR x\r\n", 0, 0},
        {"$-1\r\n", 0, 0},
        {"*1\r\n:1\r\n", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        redisReply *r = decode(cases[i].resp);
        int64_t v = 99;
        assert_int_equal(llmq_reply_int(r, &v), cases[i].ok ? 0 : -1);
        assert_true(v == (cases[i].ok ? cases[i].want : 99));
        assert_true(llmq_reply_int_or(r, -3) == (cases[i].ok ? cases[i].want : -3));
        freeReplyObject(r);
    }
    int64_t v = 5;
    assert_int_equal(llmq_reply_int(NULL, &v), -1);
    assert_int_equal(v, 5);
    assert_int_equal(llmq_reply_int_or(NULL, 8), 8);
}

static void test_copy_and_str(void **state)
{
    (void)state;
    redisReply *s = decode("$5\r\nhello\r\n");
    char buf[6] = "xxxxx";
    assert_int_equal(llmq_reply_copy(s, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "hello");
    char small[5] = "abcd";
    assert_int_equal(llmq_reply_copy(s, small, sizeof(small)), -1);
    assert_string_equal(small, "abcd"); /* untouched */
    assert_string_equal(llmq_reply_str_or(s, "-"), "hello");
    freeReplyObject(s);

    redisReply *n = decode(":-12\r\n");
    assert_int_equal(llmq_reply_copy(n, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "-12");
    assert_int_equal(llmq_reply_copy(n, small, 3), -1); /* "-12" needs 4 */
    assert_string_equal(llmq_reply_str_or(n, "-"), "-");
    freeReplyObject(n);

    redisReply *st = decode("+OK\r\n");
    assert_int_equal(llmq_reply_copy(st, buf, sizeof(buf)), -1);
    char *d = llmq_reply_dup(st);
    assert_string_equal(d, "OK");
    free(d);
    freeReplyObject(st);

    /* a string with a NUL inside is copied whole by dup */
    redisReply *z = decode_n("$3\r\na\0b\r\n", 9);
    d = llmq_reply_dup(z);
    assert_non_null(d);
    assert_memory_equal(d, "a\0b", 4);
    free(d);
    freeReplyObject(z);

    redisReply *nil = decode("$-1\r\n");
    assert_null(llmq_reply_dup(nil));
    assert_string_equal(llmq_reply_str_or(nil, "def"), "def");
    freeReplyObject(nil);
    assert_null(llmq_reply_dup(NULL));
    assert_int_equal(llmq_reply_copy(NULL, buf, sizeof(buf)), -1);
    assert_string_equal(llmq_reply_str_or(NULL, "def"), "def");
}

static void test_at(void **state)
{
    (void)state;
    redisReply *a = decode("*2\r\n:1\r\n$1\r\nx\r\n");
    assert_ptr_equal(llmq_reply_at(a, 0), a->element[0]);
    assert_ptr_equal(llmq_reply_at(a, 1), a->element[1]);
    assert_null(llmq_reply_at(a, 2));
    assert_int_equal(llmq_reply_int_or(llmq_reply_at(a, 5), -1), -1);
    freeReplyObject(a);
    redisReply *s = decode("$1\r\nx\r\n");
    assert_null(llmq_reply_at(s, 0)); /* not an array */
    freeReplyObject(s);
    assert_null(llmq_reply_at(NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_copy_and_str),
        cmocka_unit_test(test_at),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
