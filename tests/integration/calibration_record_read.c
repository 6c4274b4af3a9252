/* Calibration against a real redis-server: samples recorded with the
 * one-command argv (sync and pipelined, as a worker appends it), read back as
 * per-model statistics, the suggested margin, and reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/calibration.h"
#include "testsupport.h"

static void record(redisContext *c, const char *account, const char *model, long long est,
                   long long act)
{
    struct llmq_calib_cmd cmd;
    struct llmq_error err = {0};
    assert_int_equal(llmq_calib_record_cmd(&cmd, account, model, est, act, &err), LLMQ_OK);
    redisReply *r = redisCommandArgv(c, cmd.argc, cmd.argv, cmd.argvlen);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_INTEGER)
        fail_msg("calib record reply type %d: %s", r->type, r->str ? r->str : "");
    freeReplyObject(r);
}

static void test_record_and_read(void **state)
{
    (void)state;
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "calib");
    redisContext *c = llmq_test_redis_connect();
    record(c, account, "gpt-4o", 90, 100);  /* 10% low */
    record(c, account, "gpt-4o", 110, 100); /* 10% high */
    record(c, account, "gpt-4o", 100, 100);
    /* Pipelined, the way a worker appends it to its own stream. */
    struct llmq_calib_cmd cmd;
    assert_int_equal(llmq_calib_record_cmd(&cmd, account, "gpt-3.5-turbo", 50, 100, NULL), LLMQ_OK);
    assert_int_equal(redisAppendCommandArgv(c, cmd.argc, cmd.argv, cmd.argvlen), REDIS_OK);
    void *reply = NULL;
    assert_int_equal(redisGetReply(c, &reply), REDIS_OK);
    assert_int_equal(((redisReply *)reply)->type, REDIS_REPLY_INTEGER);
    freeReplyObject(reply);

    struct llmq_calib_stats *s = NULL;
    size_t n = 0;
    struct llmq_error err = {0};
    assert_int_equal(llmq_calib_read(c, account, &s, &n, &err), LLMQ_OK);
    assert_int_equal(n, 2);
    assert_string_equal(s[0].model, "gpt-3.5-turbo");
    assert_int_equal(s[0].samples, 1);
    assert_true(fabs(s[0].bias_pct - 50.0) < 1e-9);
    assert_string_equal(s[1].model, "gpt-4o");
    assert_int_equal(s[1].samples, 3);
    assert_int_equal(s[1].est_tokens, 300);
    assert_int_equal(s[1].actual_tokens, 300);
    assert_int_equal(s[1].abs_error_tokens, 20);
    assert_int_equal(s[1].under_samples, 1);
    assert_true(fabs(s[1].bias_pct) < 1e-9);
    assert_true(fabs(s[1].mean_abs_pct - 20.0 / 3.0) < 1e-9);
    assert_true(fabs(s[1].mean_rel_pct) < 1e-9);
    assert_true(fabs(s[1].stddev_rel_pct - sqrt(200.0 / 3.0)) < 1e-6);
    /* mean 0 + 2 × 8.16% → 17%; too few samples → the floor. */
    assert_int_equal(llmq_calib_margin_pct(&s[1], 10, 3), 17);
    assert_int_equal(llmq_calib_margin_pct(&s[1], 10, 100), 10);
    assert_int_equal(llmq_calib_margin_pct(NULL, 10, 1), 10);
    free(s);

    assert_int_equal(llmq_calib_reset(c, account, &err), LLMQ_OK);
    assert_int_equal(llmq_calib_read(c, account, &s, &n, &err), LLMQ_OK);
    assert_int_equal(n, 0);
    free(s);
    redisFree(c);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    struct llmq_calib_cmd cmd;
    struct llmq_error err = {0};
    assert_int_equal(llmq_calib_record_cmd(&cmd, "a{b}", "gpt-4o", 1, 1, &err), LLMQ_EINVAL);
    assert_int_equal(llmq_calib_record_cmd(&cmd, "acct", "bad|model", 1, 1, &err), LLMQ_EINVAL);
    assert_int_equal(llmq_calib_record_cmd(&cmd, "acct", "gpt-4o", -1, 1, &err), LLMQ_EINVAL);
    struct llmq_calib_increments inc;
    llmq_calib_increments(0, 0, &inc);
    assert_int_equal(inc.rel_bp, 0);
    llmq_calib_increments(5, 0, &inc);
    assert_int_equal(inc.rel_bp, -10000);
    llmq_calib_increments(1, 1000000, &inc);
    assert_int_equal(inc.rel_bp, 10000);
    assert_int_equal(inc.under, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_and_read),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
