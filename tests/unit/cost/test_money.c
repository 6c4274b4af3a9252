/* Amounts of nano-USD (common/cost/money.c): what `llmq budgets set --usd`
 * and `llmq prices set` accept, exactly (no float), and how amounts print. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cost/money.h"

static void test_usd_parse(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        long long nano;
    } ok[] = {
        {"0", 0},
        {"12", 12000000000LL},
        {"0.50", 500000000},
        {".5", 500000000},
        {"0.1", 100000000},
        {"0.000000001", 1},
        {"200.", 200000000000LL},
        {"1000000", LLMQ_USD_MAX_NANO},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        long long v = -1;
        struct llmq_error err = {0};
        assert_int_equal(llmq_usd_parse(ok[i].text, 9, LLMQ_USD_MAX_NANO, "--usd", &v, &err),
                         LLMQ_OK);
        assert_int_equal(v, ok[i].nano);
    }
    static const char *const bad[] = {
        "",     ".",           "-1", "1e3",        "1.2.3",
        "0x10", " 1",          "1 ", "1000000.01", "99999999999999999999",
        "1,5",  "0.0000000001"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long long v = -1;
        struct llmq_error err = {0};
        assert_int_equal(llmq_usd_parse(bad[i], 9, LLMQ_USD_MAX_NANO, "--usd", &v, &err),
                         LLMQ_EINVAL);
        assert_non_null(strstr(err.msg, "--usd"));
        assert_int_equal(v, 0);
    }
}

static void test_price_parse(void **state)
{
    (void)state;
    long long v = -1;
    struct llmq_error err = {0};
    assert_int_equal(llmq_price_parse("2.50", "--input-usd-per-1m", &v, &err), LLMQ_OK);
    assert_int_equal(v, 2500); /* nano-USD per token */
    assert_int_equal(llmq_price_parse("0.075", "--x", &v, &err), LLMQ_OK);
    assert_int_equal(v, 75);
    assert_int_equal(llmq_price_parse("0.0001", "--x", &v, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "more than 3 decimals"));
    assert_int_equal(llmq_price_parse("100001", "--x", &v, &err), LLMQ_EINVAL);
}

static void test_usd_format(void **state)
{
    (void)state;
    static const struct {
        long long nano;
        const char *text;
    } cases[] = {
        {0, "0.00"},         {12000000000LL, "12.00"}, {500000000, "0.50"},
        {75000, "0.000075"}, {1, "0.000000001"},       {-2500000000LL, "-2.50"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[40];
        llmq_usd_format(cases[i].nano, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usd_parse),
        cmocka_unit_test(test_price_parse),
        cmocka_unit_test(test_usd_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
