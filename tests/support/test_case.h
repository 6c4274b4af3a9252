/* One ctest entry per case of a long cmocka group, so its cases run side by
 * side: tests/CMakeLists.txt registers each case of a test named in
 * LLMQ_SPLIT_TESTS as "<test>.<case>" with LLMQ_TEST_CASE=<case> in its
 * environment, and the test's main narrows its group to that case with
 * LLMQ_TEST_CASE_SELECT before running it. Without LLMQ_TEST_CASE the
 * whole group runs (a test run by hand). Header-only; include after
 * <cmocka.h>. */
#ifndef LLMQ_TEST_CASE_H
#define LLMQ_TEST_CASE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Narrows the next cmocka_run_group_tests* call to the case LLMQ_TEST_CASE
 * names, when it is set; tests[0..n) is the group (borrowed). Returns 0, or
 * -1 with a message when no case has that name: a renamed case fails its
 * old entry instead of passing by running nothing. */
static inline int llmq_test_case_select(const struct CMUnitTest *tests, size_t n)
{
    const char *want = getenv("LLMQ_TEST_CASE");
    if (want == NULL || want[0] == '\0')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (tests[i].name != NULL && strcmp(tests[i].name, want) == 0) {
            cmocka_set_test_filter(want);
            return 0;
        }
    fprintf(stderr, "LLMQ_TEST_CASE=%s: this test has no such case\n", want);
    return -1;
}

#define LLMQ_TEST_CASE_SELECT(tests)                                                               \
    llmq_test_case_select((tests), sizeof(tests) / sizeof((tests)[0]))

#endif
