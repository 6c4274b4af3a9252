/* common/jobs/calibration.c, the pure part: one sample's increments, sums
 * of several (llmq_calib_sum_add: field by field the sum of each sample's
 * increments, whatever the order) and the calib_add arguments built from a
 * sum. Reading and writing against Redis: calibration_record_read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/calibration.h"

static void test_sum_is_the_sum_of_the_increments(void **state)
{
    (void)state;
    const long long samples[][2] = {{90, 100}, {110, 100}, {0, 0}, {5, 0}, {1, 1000000}, {7, 7}};
    struct llmq_calib_increments sum = {0}, want = {0};
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        struct llmq_calib_increments one;
        llmq_calib_increments(samples[i][0], samples[i][1], &one);
        assert_int_equal(one.n, 1);
        want.n += one.n;
        want.est += one.est;
        want.act += one.act;
        want.abs += one.abs;
        want.under += one.under;
        want.rel_bp += one.rel_bp;
        want.rel2_bp += one.rel2_bp;
        assert_int_equal(llmq_calib_sum_add(&sum, samples[i][0], samples[i][1]), LLMQ_OK);
    }
    assert_memory_equal(&sum, &want, sizeof(sum));
    assert_int_equal(sum.n, 6);
    assert_int_equal(sum.est, 90 + 110 + 0 + 5 + 1 + 7);
    assert_int_equal(sum.abs, 10 + 10 + 0 + 5 + 999999 + 0);
    assert_int_equal(sum.under, 2);                                /* 90/100 and 1/1000000 */
    assert_int_equal(sum.rel_bp, 1000 - 1000 + 0 - 10000 + 10000); /* ±10%, nothing sent, ~100% */
    /* A negative count is refused and leaves the sum as it was. */
    assert_int_equal(llmq_calib_sum_add(&sum, -1, 5), LLMQ_EINVAL);
    assert_int_equal(llmq_calib_sum_add(&sum, 5, -1), LLMQ_EINVAL);
    assert_memory_equal(&sum, &want, sizeof(sum));
}

static void test_add_argv(void **state)
{
    (void)state;
    struct llmq_calib_increments sum = {0};
    assert_int_equal(llmq_calib_sum_add(&sum, 90, 100), LLMQ_OK);
    assert_int_equal(llmq_calib_sum_add(&sum, 110, 100), LLMQ_OK);
    struct llmq_calib_add_argv a;
    struct llmq_error err = {0};
    assert_int_equal(llmq_calib_add_argv(&a, "acct", "gpt-4o", &sum, &err), LLMQ_OK);
    const char *want[LLMQ_CALIB_ADD_ARGC] = {"llmq:{acct}:", "gpt-4o", "2", "200",    "200",
                                             "20",           "1",      "0", "2000000"};
    for (int i = 0; i < LLMQ_CALIB_ADD_ARGC; i++)
        assert_string_equal(a.argv[i], want[i]);
    /* Refused: no samples, a bad account, a model with '|' or too long. */
    struct llmq_calib_increments none = {0};
    assert_int_equal(llmq_calib_add_argv(&a, "acct", "gpt-4o", &none, &err), LLMQ_EINVAL);
    assert_int_equal(llmq_calib_add_argv(&a, "a{b}", "gpt-4o", &sum, &err), LLMQ_EINVAL);
    assert_int_equal(llmq_calib_add_argv(&a, "acct", "a|b", &sum, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "model"));
    char longname[300];
    memset(longname, 'm', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(llmq_calib_add_argv(&a, "acct", longname, &sum, &err), LLMQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_is_the_sum_of_the_increments),
        cmocka_unit_test(test_add_argv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
