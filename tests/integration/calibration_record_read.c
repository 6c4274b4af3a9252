/* Calibration against a real redis-server: samples summed in memory
 * (llmq_calib_sum_add) and added with one calib_add script call per sum
 * (sync and pipelined, as a writer sends it), read back as per-model
 * statistics, the suggested margin, and reset; bad arguments refused on
 * both sides (C and the script). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/calibration.h"
#include "redis/redis.h"
#include "redis/script.h"
#include "testsupport.h"

/* Adds sum to (account, model) with one calib_add call; returns the reply's
 * sample count. */
static long long add(redisContext *c, const char *account, const char *model,
                     const struct llmq_calib_increments *sum)
{
    struct llmq_calib_add_argv args;
    struct llmq_error err = {0};
    assert_int_equal(llmq_calib_add_argv(&args, account, model, sum, &err), LLMQ_OK);
    redisReply *r =
        llmq_script_run(c, LLMQ_SCRIPT_CALIB_ADD, 1, LLMQ_CALIB_ADD_ARGC, args.argv, NULL, &err);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_INTEGER)
        fail_msg("calib_add reply type %d: %s", r->type, r->str ? r->str : "");
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* One sample, one call. */
static long long record(redisContext *c, const char *account, const char *model, long long est,
                        long long act)
{
    struct llmq_calib_increments sum = {0};
    assert_int_equal(llmq_calib_sum_add(&sum, est, act), LLMQ_OK);
    assert_int_equal(sum.n, 1);
    return add(c, account, model, &sum);
}

static void test_record_and_read(void **state)
{
    (void)state;
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "calib");
    redisContext *c = llmq_test_redis_connect();
    /* Two samples summed in memory, as a worker batches them, then one
     * more on its own: the statistics are those of three samples. */
    struct llmq_calib_increments two = {0};
    assert_int_equal(llmq_calib_sum_add(&two, 90, 100), LLMQ_OK);  /* 10% low */
    assert_int_equal(llmq_calib_sum_add(&two, 110, 100), LLMQ_OK); /* 10% high */
    assert_int_equal(two.n, 2);
    assert_int_equal(add(c, account, "gpt-4o", &two), 2);
    assert_int_equal(record(c, account, "gpt-4o", 100, 100), 3);
    /* Pipelined, after loading the library. */
    struct llmq_error err = {0};
    assert_int_equal(llmq_script_load_all(c, &err), LLMQ_OK);
    struct llmq_calib_increments one = {0};
    assert_int_equal(llmq_calib_sum_add(&one, 50, 100), LLMQ_OK);
    struct llmq_calib_add_argv args;
    assert_int_equal(llmq_calib_add_argv(&args, account, "gpt-3.5-turbo", &one, NULL), LLMQ_OK);
    assert_int_equal(
        llmq_script_append(c, LLMQ_SCRIPT_CALIB_ADD, 1, LLMQ_CALIB_ADD_ARGC, args.argv, NULL),
        LLMQ_OK);
    void *reply = NULL;
    assert_int_equal(redisGetReply(c, &reply), REDIS_OK);
    assert_int_equal(((redisReply *)reply)->type, REDIS_REPLY_INTEGER);
    assert_int_equal(((redisReply *)reply)->integer, 1);
    freeReplyObject(reply);

    struct llmq_calib_stats *s = NULL;
    size_t n = 0;
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

/* Runs calib_add with raw arguments argv[0..argc) and returns the reply. */
static redisReply *raw_add(redisContext *c, int argc, const char **argv)
{
    struct llmq_error err = {0};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_CALIB_ADD, 1, argc, argv, NULL, &err);
    assert_non_null(r);
    return r;
}

static void test_bad_arguments(void **state)
{
    (void)state;
    struct llmq_calib_add_argv args;
    struct llmq_calib_increments sum = {0};
    struct llmq_error err = {0};
    assert_int_equal(llmq_calib_sum_add(&sum, -1, 1), LLMQ_EINVAL);
    assert_int_equal(llmq_calib_sum_add(&sum, 1, -1), LLMQ_EINVAL);
    assert_int_equal(sum.n, 0); /* untouched */
    assert_int_equal(llmq_calib_add_argv(&args, "acct", "gpt-4o", &sum, &err), LLMQ_EINVAL);
    assert_int_equal(llmq_calib_sum_add(&sum, 1, 1), LLMQ_OK);
    assert_int_equal(llmq_calib_add_argv(&args, "a{b}", "gpt-4o", &sum, &err), LLMQ_EINVAL);
    assert_int_equal(llmq_calib_add_argv(&args, "acct", "bad|model", &sum, &err), LLMQ_EINVAL);
    struct llmq_calib_increments inc;
    llmq_calib_increments(0, 0, &inc);
    assert_int_equal(inc.rel_bp, 0);
    llmq_calib_increments(5, 0, &inc);
    assert_int_equal(inc.rel_bp, -10000);
    llmq_calib_increments(1, 1000000, &inc);
    assert_int_equal(inc.rel_bp, 10000);
    assert_int_equal(inc.under, 1);

    /* The script refuses what the C side would never send, writing nothing. */
    char account[64], prefix[LLMQ_KEY_PREFIX_MAX];
    llmq_test_unique_name(account, sizeof(account), "calibbad");
    assert_int_equal(llmq_account_prefix(account, prefix, sizeof(prefix), NULL), LLMQ_OK);
    redisContext *c = llmq_test_redis_connect();
    const char *bar[] = {prefix, "a|b", "1", "1", "1", "0", "0", "0", "0"};
    const char *none[] = {prefix, "m", "0", "0", "0", "0", "0", "0", "0"};
    const char *text[] = {prefix, "m", "1", "x", "1", "0", "0", "0", "0"};
    const char *const *bad[] = {bar, none, text};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        redisReply *r = raw_add(c, LLMQ_CALIB_ADD_ARGC, (const char **)bad[i]);
        assert_int_equal(r->type, REDIS_REPLY_ERROR);
        assert_non_null(strstr(r->str, "LLMQ_EINVAL"));
        freeReplyObject(r);
    }
    struct llmq_calib_stats *s = NULL;
    size_t n = 1;
    assert_int_equal(llmq_calib_read(c, account, &s, &n, &err), LLMQ_OK);
    assert_int_equal(n, 0);
    free(s);
    redisFree(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_and_read),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
