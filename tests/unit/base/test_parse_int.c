/* The strict integer parser (common/base/parse_int.c) behind every integer
 * option of llmq and llmq-worker: whole decimal numbers in range only. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cases)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
