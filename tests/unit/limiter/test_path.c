/* Paths and bucket names (common/limiter/path.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "limiter/path.h"

static void test_parse_levels(void **state)
{
    (void)state;
    struct llmq_path p;
    struct llmq_error err = {0};
    char names[3][LLMQ_BUCKET_NAME_MAX];
    assert_int_equal(llmq_path_parse("acct/gpt-4o", &p, &err), LLMQ_OK);
    assert_string_equal(p.account, "acct");
    assert_string_equal(p.model, "gpt-4o");
    assert_string_equal(p.tenant, "");
    assert_int_equal(llmq_path_bucket_names(&p, names), 1);
    assert_int_equal(llmq_path_parse("acct/ft:gpt-4o-mini:org::id/acme/bob@x.io", &p, &err),
                     LLMQ_OK);
    assert_int_equal(llmq_path_bucket_names(&p, names), 3);
    assert_string_equal(names[0], "ft:gpt-4o-mini:org::id");
    assert_string_equal(names[1], "ft:gpt-4o-mini:org::id/t/acme");
    /* a user is a user of its tenant */
    assert_string_equal(names[2], "ft:gpt-4o-mini:org::id/t/acme/u/bob@x.io");
    /* A user without a tenant: a name no tenant's user has. */
    assert_int_equal(llmq_path_parse("a/m//u1", &p, &err), LLMQ_OK);
    assert_int_equal(llmq_path_bucket_names(&p, names), 2);
    assert_string_equal(names[1], "m/u/u1");
}

static void test_parse_rejects(void **state)
{
    (void)state;
    struct llmq_path p;
    struct llmq_error err = {0};
    const char *bad[] = {"",       "acct",  "acct/", "/m",     "a/m/t/u/extra",
                         "a{x}/m", "a/m m", "a/m|x", "a/m/\t", NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        err.msg[0] = '\0';
        assert_int_equal(llmq_path_parse(bad[i], &p, &err), LLMQ_EINVAL);
        assert_true(strlen(err.msg) > 0);
    }
    char longname[300];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(llmq_path_init(&p, "a", longname, NULL, NULL, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "model"));
}

static void test_bucket_name_and_priority(void **state)
{
    (void)state;
    char b[LLMQ_BUCKET_NAME_MAX];
    struct llmq_error err = {0};
    assert_int_equal(llmq_bucket_name(b, sizeof(b), "m", "*", NULL, &err), LLMQ_OK);
    assert_string_equal(b, "m/t/*");
    assert_int_equal(llmq_bucket_name(b, sizeof(b), "m", NULL, "u", &err), LLMQ_OK);
    assert_string_equal(b, "m/u/u");
    /* a tenant's users, its default for them; a user in every tenant */
    assert_int_equal(llmq_bucket_name(b, sizeof(b), "m", "t", "u", &err), LLMQ_OK);
    assert_string_equal(b, "m/t/t/u/u");
    assert_int_equal(llmq_bucket_name(b, sizeof(b), "m", "t", "*", &err), LLMQ_OK);
    assert_string_equal(b, "m/t/t/u/*");
    assert_int_equal(llmq_bucket_name(b, sizeof(b), "m", "*", "u", &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "every tenant"));
    assert_int_equal(llmq_bucket_name(b, sizeof(b), "m", "t/x", "u", &err), LLMQ_EINVAL);
    assert_int_equal(llmq_bucket_name(b, sizeof(b), "m", "t", "u|x", &err), LLMQ_EINVAL);
    assert_int_equal(llmq_bucket_name(b, sizeof(b), "m/x", NULL, NULL, &err), LLMQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_levels),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_bucket_name_and_priority),
    };
    return cmocka_run_group_tests_name("path", tests, NULL, NULL);
}
