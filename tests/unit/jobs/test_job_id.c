/* custom_id <-> job id (jobs/job_id.h): what is escaped and what is kept,
 * the round trip for arbitrary strings (so two custom_ids never share a job
 * id), and the refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/job_id.h"
#include "llmq/llmq.h"
#include "redis/redis.h"

static void expect_id(const char *custom, const char *want)
{
    char id[LLMQ_JOB_ID_MAX + 1], back[LLMQ_JOB_ID_MAX + 1];
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_id_from_custom(custom, strlen(custom), id, sizeof(id), &err),
                     LLMQ_OK);
    assert_string_equal(id, want);
    assert_true(llmq_name_valid(id));
    assert_string_equal(llmq_job_id_to_custom(id, back, sizeof(back)), custom);
}

static void test_escapes(void **state)
{
    (void)state;
    expect_id("req-1", "req-1"); /* a name is its own id */
    expect_id("a:b.c@d_e", "a:b.c@d_e");
    expect_id("has space", "has%20space");
    expect_id("a/b|c{d}", "a%2Fb%7Cc%7Bd%7D");
    expect_id("tab\tnl\n", "tab%09nl%0A");
    expect_id("\x7f", "%7F");
    expect_id("h\xc3\xa9llo", "h\xc3\xa9llo"); /* UTF-8 is kept */
    /* '%' only where it would read as an escape */
    expect_id("100%", "100%");
    expect_id("%zz", "%zz");
    expect_id("%4", "%4");
    expect_id("%41", "%2541");
    expect_id("has%20space", "has%2520space");
    expect_id("%%41", "%%2541");
    expect_id("% 41", "%%2041");
}

/* Every string of bytes from an alphabet rich in what is escaped round-trips
 * (from_custom is one-to-one), and its id is a name. */
static void test_round_trip(void **state)
{
    (void)state;
    static const char alphabet[] = "%%%4AaZz0 /|{}\t-";
    unsigned seed = 12345;
    for (int k = 0; k < 200000; k++) {
        char custom[12];
        size_t len = 1 + (size_t)(k % 11);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            custom[i] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
        }
        custom[len] = '\0';
        char id[LLMQ_JOB_ID_MAX + 1], back[LLMQ_JOB_ID_MAX + 1];
        assert_int_equal(llmq_job_id_from_custom(custom, len, id, sizeof(id), NULL), LLMQ_OK);
        assert_true(llmq_name_valid(id));
        if (strcmp(llmq_job_id_to_custom(id, back, sizeof(back)), custom) != 0)
            fail_msg("'%s' -> '%s' -> '%s'", custom, id, back);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    char id[LLMQ_JOB_ID_MAX + 1], big[LLMQ_JOB_ID_MAX + 2];
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_id_from_custom("", 0, id, sizeof(id), &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "must not be empty"));
    assert_int_equal(llmq_job_id_from_custom("a\0b", 3, id, sizeof(id), &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "NUL"));
    /* 200 bytes fit; 67 spaces would take 201 */
    memset(big, 'x', LLMQ_JOB_ID_MAX);
    assert_int_equal(llmq_job_id_from_custom(big, LLMQ_JOB_ID_MAX, id, sizeof(id), &err), LLMQ_OK);
    assert_int_equal(llmq_job_id_from_custom(big, LLMQ_JOB_ID_MAX + 1, id, sizeof(id), &err),
                     LLMQ_EINVAL);
    memset(big, ' ', 67);
    assert_int_equal(llmq_job_id_from_custom(big, 67, id, sizeof(id), &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "too long"));
    assert_string_equal(id, "");
    assert_int_equal(llmq_job_id_from_custom(big, 66, id, sizeof(id), &err), LLMQ_OK);
    /* a short buffer is refused, not overrun */
    char small[4];
    assert_int_equal(llmq_job_id_from_custom("a b", 3, small, sizeof(small), &err), LLMQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
