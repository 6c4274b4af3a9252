/* The reservation text (common/limiter/reservation.c): built from acquire's
 * parts and split again as lua/lib/handle.lua states its format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "limiter/path.h"
#include "limiter/reservation.h"
#include "llmq/limiter.h"

static void test_format_then_split(void **state)
{
    (void)state;
    char r[LLMQ_RESERVATION_MAX];
    assert_int_equal(llmq_reservation_format(r, sizeof(r), "acct", "", 42, 300, 1700000000123,
                                             "|wgpt-4o|Ggpt-4o/t/acme"),
                     0);
    assert_string_equal(r, "acct|42|300|1700000000123|wgpt-4o|Ggpt-4o/t/acme");
    assert_false(llmq_reservation_is_local(r));
    char account[LLMQ_NAME_MAX + 1];
    const char *handle = llmq_reservation_split(r, account, sizeof(account));
    assert_non_null(handle);
    assert_string_equal(account, "acct");
    assert_string_equal(handle, "42|300|1700000000123|wgpt-4o|Ggpt-4o/t/acme");
    assert_int_equal(llmq_reservation_cost(handle), 300);

    char mode, name[LLMQ_BUCKET_NAME_MAX];
    const char *tag = llmq_reservation_buckets(handle);
    assert_non_null(tag);
    tag = llmq_reservation_bucket(tag, &mode, name, sizeof(name));
    assert_int_equal(mode, 'w');
    assert_string_equal(name, "gpt-4o");
    assert_non_null(tag);
    tag = llmq_reservation_bucket(tag, &mode, name, sizeof(name));
    assert_int_equal(mode, 'G');
    assert_string_equal(name, "gpt-4o/t/acme");
    assert_null(tag);
}

static void test_local_grant(void **state)
{
    (void)state;
    char r[LLMQ_RESERVATION_MAX];
    assert_int_equal(llmq_reservation_format(r, sizeof(r), "acct", "L", 7, 50, 1000, ""), 0);
    assert_int_equal(llmq_reservation_add_bucket(r, sizeof(r), 'w', "m"), 0);
    assert_string_equal(r, "acct|L7|50|1000|wm");
    assert_true(llmq_reservation_is_local(r));
}

static void test_no_bucket_no_account(void **state)
{
    (void)state;
    char account[LLMQ_NAME_MAX + 1];
    /* A handle without buckets has no first tag. */
    assert_null(llmq_reservation_buckets("42|300|1000"));
    /* No '|': no account; an account longer than a name: refused. */
    assert_null(llmq_reservation_split("acct", account, sizeof(account)));
    assert_null(llmq_reservation_split(NULL, account, sizeof(account)));
    char long_one[LLMQ_NAME_MAX + 8];
    memset(long_one, 'a', LLMQ_NAME_MAX + 1);
    memcpy(long_one + LLMQ_NAME_MAX + 1, "|1|2|3", 7);
    assert_null(llmq_reservation_split(long_one, account, sizeof(account)));
    assert_int_equal(llmq_reservation_cost("42"), -1);
}

static void test_too_long_is_refused(void **state)
{
    (void)state;
    char r[16];
    assert_int_equal(llmq_reservation_format(r, sizeof(r), "acct", "", 1, 2, 3, "|wmodel-name"),
                     -1);
    assert_int_equal(llmq_reservation_format(r, sizeof(r), "a", "", 1, 2, 3, ""), 0);
    assert_int_equal(llmq_reservation_add_bucket(r, sizeof(r), 'w', "a-long-bucket"), -1);
    assert_true(strlen(r) < sizeof(r));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_then_split),
        cmocka_unit_test(test_local_grant),
        cmocka_unit_test(test_no_bucket_no_account),
        cmocka_unit_test(test_too_long_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
