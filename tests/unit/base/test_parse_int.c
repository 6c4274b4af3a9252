/* The strict integer parsers (common/base/parse_int.c): behind every integer
 * option of llmq and llmq-worker, whole decimal numbers in range only; and
 * the bounded one of fields in replies and records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/parse_int.h"

static void test_cases(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t min, max;
        int ok;
        int64_t want;
    } cases[] = {
        {"0", 0, 10, 1, 0},
        {"10", 0, 10, 1, 10},
        {"-5", -10, 10, 1, -5},
        {"65535", 0, 65535, 1, 65535},
        {"9223372036854775807", 0, INT64_MAX, 1, INT64_MAX},
        {"11", 0, 10, 0, 0},
        {"-1", 0, 10, 0, 0},
        {"", 0, 10, 0, 0},
        {" 5", 0, 10, 0, 0},
        {"\n5", 0, 10, 0, 0},
        {"5 ", 0, 10, 0, 0},
        {"5ms", 0, 10, 0, 0},
        {"0x5", 0, 10, 0, 0},
        {"9223372036854775808", 0, INT64_MAX, 0, 0},
        {"soon", 0, 10, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = 42;
        assert_int_equal(llmq_parse_int64(cases[i].s, cases[i].min, cases[i].max, &v),
                         cases[i].ok ? 0 : -1);
        assert_true(v == (cases[i].ok ? cases[i].want : 42));
    }
    int64_t v = 42;
    assert_int_equal(llmq_parse_int64(NULL, 0, 10, &v), -1);
    assert_int_equal(v, 42);
}

/* llmq_parse_digits reads only the len bytes it is given: a field inside a
 * reply or a stored record, with no NUL after it. */
static void test_digits_within_len(void **state)
{
    (void)state;
    int64_t v = 42;
    const char port[] = {'6', '3', '7', '9'}; /* no NUL: reading on would be a bug */
    assert_int_equal(llmq_parse_digits(port, sizeof(port), 1, 65535, &v), 0);
    assert_int_equal(v, 6379);
    assert_int_equal(llmq_parse_digits("6379 rest", 4, 1, 65535, &v), 0);
    assert_int_equal(v, 6379);
    assert_int_equal(llmq_parse_digits("123", 2, 0, 100, &v), 0);
    assert_int_equal(v, 12);
    v = 42;
    assert_int_equal(llmq_parse_digits("", 0, 0, 10, &v), -1);
    assert_int_equal(llmq_parse_digits("-1", 2, -10, 10, &v), -1); /* digits only */
    assert_int_equal(llmq_parse_digits("+1", 2, 0, 10, &v), -1);
    assert_int_equal(llmq_parse_digits("1 ", 2, 0, 10, &v), -1);
    assert_int_equal(llmq_parse_digits("65536", 5, 1, 65535, &v), -1);
    assert_int_equal(llmq_parse_digits("0", 1, 1, 65535, &v), -1);
    assert_int_equal(llmq_parse_digits("1234567890123456789", 19, 0, INT64_MAX, &v), -1);
    assert_int_equal(v, 42);
    assert_int_equal(llmq_parse_digits("999999999999999999", 18, 0, INT64_MAX, &v), 0);
    assert_true(v == 999999999999999999LL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cases),
                                       cmocka_unit_test(test_digits_within_len)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
