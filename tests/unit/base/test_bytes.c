/* base/bytes.h: appends keep every byte (NULs too) and a NUL after them,
 * across growth; an empty append on a new buffer makes an empty string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/bytes.h"

static void test_append(void **state)
{
    (void)state;
    char *p = NULL;
    size_t len = 0, cap = 0;
    assert_int_equal(llmq_bytes_append(&p, &len, &cap, "", 0), 0);
    assert_non_null(p);
    assert_int_equal(len, 0);
    assert_string_equal(p, "");
    char chunk[700];
    for (size_t i = 0; i < sizeof(chunk); i++)
        chunk[i] = (char)(i % 251);
    for (int k = 0; k < 10; k++)
        assert_int_equal(llmq_bytes_append(&p, &len, &cap, chunk, sizeof(chunk)), 0);
    assert_int_equal(len, 7000);
    assert_true(cap > len);
    assert_int_equal(p[len], '\0');
    for (int k = 0; k < 10; k++)
        assert_memory_equal(p + (size_t)k * sizeof(chunk), chunk, sizeof(chunk));
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
