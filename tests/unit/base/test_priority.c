/* The priorities' names table (common/base/priority.c): every name round-trips,
 * the serve order is high, normal, low, zero is normal, and anything else is
 * refused or named "normal". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "llmq/limiter.h"
#include "llmq/llmq.h"
#include "llmq/priority.h"

static void test_names_round_trip(void **state)
{
    (void)state;
    const char *names[] = {"high", "normal", "low"};
    for (int r = 0; r < LLMQ_PRIORITY_COUNT; r++) {
        enum llmq_priority p = llmq_priority_by_rank(r);
        assert_string_equal(llmq_priority_name(p), names[r]);
        enum llmq_priority back = LLMQ_PRIORITY_COUNT;
        assert_int_equal(llmq_priority_parse(names[r], &back), 0);
        assert_int_equal(back, p);
    }
    assert_int_equal(llmq_priority_by_rank(0), LLMQ_PRIORITY_HIGH);
    assert_int_equal(llmq_priority_by_rank(1), LLMQ_PRIORITY_NORMAL);
    assert_int_equal(llmq_priority_by_rank(2), LLMQ_PRIORITY_LOW);
}

static void test_zero_is_normal(void **state)
{
    (void)state;
    struct llmq_job_options o = {0};
    assert_int_equal(o.priority, LLMQ_PRIORITY_NORMAL);
    assert_string_equal(llmq_priority_name(o.priority), "normal");
}

static void test_bad_values(void **state)
{
    (void)state;
    enum llmq_priority p = LLMQ_PRIORITY_LOW;
    const char *bad[] = {"urgent", "", "High", "normal ", "hig"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(llmq_priority_parse(bad[i], &p), -1);
        assert_int_equal(p, LLMQ_PRIORITY_LOW); /* untouched */
    }
    assert_int_equal(llmq_priority_parse(NULL, &p), -1);
    assert_string_equal(llmq_priority_name((enum llmq_priority)7), "normal");
    assert_string_equal(llmq_priority_name((enum llmq_priority) - 1), "normal");
    assert_int_equal(llmq_priority_by_rank(-1), LLMQ_PRIORITY_NORMAL);
    assert_int_equal(llmq_priority_by_rank(LLMQ_PRIORITY_COUNT), LLMQ_PRIORITY_NORMAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_zero_is_normal),
        cmocka_unit_test(test_bad_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
