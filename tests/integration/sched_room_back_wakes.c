/* Room given back to a bucket wakes what waits on it, at every level: a key
 * blocked on its tenant's or its user's bucket (not only on its model's) is
 * unblocked when that bucket gets room back, instead of waiting out its old
 * wait (most of a long period here), and idle workers are woken. Room comes
 * back through
 *   - a refund in job_settle (a 429 retry with refund, a hand-back),
 *   - a producer's refund (lua/refund.lua) of a reservation taken by acquire,
 *   - a settle below the charge in a `--settle usage` bucket (job_settle done).
 * A settle in a default (admission-ledger) bucket never lowers the charge:
 * the key stays blocked. The scripts are called directly on the test's Redis
 * (dispatch, job_settle, acquire, refund), so the assertions are about
 * decisions, never about time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched_support.h"

#define MODEL "gpt-4o-mini"
#define PERIOD "600000" /* no wait ends during a test */

static void limits_set(const struct script_account *a, const char *const *args)
{
    sched_limits_set(a, MODEL, args);
}

/* Enqueues job id of cost tokens for tenant/user ('' none), priority normal. */
static void enqueue(const struct script_account *a, const char *id, const char *cost,
                    const char *tenant, const char *user)
{
    sched_enqueue(a, id, "normal", MODEL, cost, tenant, user);
}

/* One dispatch call for up to 16 jobs (sched_dispatch). */
static int dispatch(const struct script_account *a, struct sched_grant *g, char *wake,
                    size_t wake_sz)
{
    return sched_dispatch(a, 16, g, wake, wake_sz);
}

/* job_settle of grant g in mode with actual tokens, retry delay ms, refund
 * flag and the call's measured lateness late_ms ("-1": not measured). */
static void settle_late(const struct script_account *a, const struct sched_grant *g,
                        const char *mode, const char *actual, const char *delay, const char *refund,
                        const char *late_ms)
{
    const char *argv[] = {a->P,   mode,  "normal", g->eid, g->id, g->handle, actual, "{}",
                          "test", delay, refund,   MODEL,  "0",   "-1",      "-1",   "-1",
                          "-1",   "-1",  "-1",     "",     "-1",  "-1",      "-1",   "",
                          "",     "-1",  late_ms,  "0",    "200"};
    freeReplyObject(sched_run(a, LLMQ_SCRIPT_JOB_SETTLE, 29, argv));
}

/* job_settle of grant g in mode with actual tokens, retry delay ms and
 * refund flag, its lateness not measured. */
static void settle(const struct script_account *a, const struct sched_grant *g, const char *mode,
                   const char *actual, const char *delay, const char *refund)
{
    settle_late(a, g, mode, actual, delay, refund, "-1");
}

/* The wake stream's newest entry id ('0-0' when none). */
static void wake_last(const struct script_account *a, char *out, size_t n)
{
    redisReply *r = redisCommand(a->c, "XREVRANGE %swake + - COUNT 1", a->P);
    assert_non_null(r);
    snprintf(out, n, "%s", r->elements > 0 ? r->element[0]->element[0]->str : "0-0");
    freeReplyObject(r);
}

/* Blocks a key on a bucket that admits 2 requests a period: 3 jobs of
 * tenant/user, 2 granted (in g), the third denied. */
static void block_third(const struct script_account *a, const char *tag, const char *tenant,
                        const char *user, const char *cost, struct sched_grant *g)
{
    char id[64];
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof(id), "%s-%d", tag, i);
        enqueue(a, id, cost, tenant, user);
    }
    assert_int_equal(dispatch(a, g, NULL, 0), 2);
    assert_int_equal(dispatch(a, NULL, NULL, 0), 0);
}

/* A bucket of 2 requests a period (limit: the `limits set` flags naming it)
 * blocks the third of 3 jobs of tenant/user; then the grant at index which is
 * refunded by job_settle mode (retry: a 429 with refund, its retry due in a
 * minute; handback: back at the head of its key, due now). The next dispatch
 * must grant the job expected, and the refund must have woken idle workers. */
static void refund_runs_the_blocked_key(const char *tag, const char *const *limit,
                                        const char *tenant, const char *user, int which,
                                        const char *mode, const char *expected)
{
    struct script_account a;
    script_account_open(&a, tag);
    limits_set(&a, limit);
    struct sched_grant g[16];
    block_third(&a, tag, tenant, user, "10", g);
    char before[64], after[64];
    wake_last(&a, before, sizeof(before));
    int retry = strcmp(mode, "retry") == 0;
    settle(&a, &g[which], mode, "-1", retry ? "60000" : "0", retry ? "1" : "0");
    wake_last(&a, after, sizeof(after));
    assert_string_not_equal(before, after);
    struct sched_grant h[16];
    assert_int_equal(dispatch(&a, h, NULL, 0), 1);
    assert_string_equal(h[0].id, expected);
    redisFree(a.c);
}

static void test_retry_refund_unblocks_a_model(void **state)
{
    (void)state;
    const char *lim[] = {"--rpm", "2", "--period-ms", PERIOD, NULL};
    refund_runs_the_blocked_key("roommodel", lim, "", "", 1, "retry", "roommodel-2");
}

static void test_retry_refund_unblocks_a_tenant(void **state)
{
    (void)state;
    const char *lim[] = {"--tenant", "ta", "--rpm", "2", "--period-ms", PERIOD, NULL};
    refund_runs_the_blocked_key("roomtenant", lim, "ta", "", 0, "retry", "roomtenant-2");
}

static void test_handback_unblocks_a_user(void **state)
{
    (void)state;
    const char *lim[] = {"--user", "ua", "--rpm", "2", "--period-ms", PERIOD, NULL};
    refund_runs_the_blocked_key("roomuser", lim, "tb", "ua", 1, "handback", "roomuser-1");
}

static void test_producer_refund_unblocks_and_wakes(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "roomrefund");
    const char *lim[] = {"--tenant", "tc", "--rpm", "2", "--period-ms", PERIOD, NULL};
    limits_set(&a, lim);
    /* A producer's own calls (llmq.h acquire) take the tenant's 2 slots. */
    const char *acq[] = {a.P, MODEL, "tc", "", "normal", "10", "10"};
    redisReply *r = sched_run(&a, LLMQ_SCRIPT_ACQUIRE, 7, acq);
    assert_int_equal(r->element[0]->integer, 2);
    char handle[256];
    snprintf(handle, sizeof(handle), "%lld|10|%lld%s", r->element[7]->integer,
             r->element[1]->integer, r->element[8]->str);
    freeReplyObject(r);
    enqueue(&a, "p-0", "10", "tc", "");
    char before[64], after[64];
    assert_int_equal(dispatch(&a, NULL, before, sizeof(before)), 0);
    const char *ref[] = {a.P, handle};
    r = sched_run(&a, LLMQ_SCRIPT_REFUND, 2, ref);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    wake_last(&a, after, sizeof(after));
    assert_string_not_equal(before, after);
    struct sched_grant h[16];
    assert_int_equal(dispatch(&a, h, NULL, 0), 1);
    assert_string_equal(h[0].id, "p-0");
    redisFree(a.c);
}

/* A tenant bucket of 100 tokens a period with ledger settle (NULL: the
 * default); jobs of cost 40: two fit, the third waits. The first is settled
 * with 5 tokens of real usage. Returns how many jobs the next dispatch
 * grants; *woke: whether the settle added a wake entry. */
static int settle_low_then_dispatch(const char *tag, const char *ledger, int *woke)
{
    struct script_account a;
    script_account_open(&a, tag);
    const char *lim[] = {
        "--tenant", "td", "--tpm", "100", "--period-ms", PERIOD, ledger ? "--settle" : NULL,
        ledger,     NULL};
    limits_set(&a, lim);
    struct sched_grant g[16];
    block_third(&a, "k", "td", "", "40", g);
    char before[64], after[64];
    wake_last(&a, before, sizeof(before));
    settle(&a, &g[0], "done", "5", "0", "0");
    wake_last(&a, after, sizeof(after));
    *woke = strcmp(before, after) != 0;
    struct sched_grant h[16];
    int n = dispatch(&a, h, NULL, 0);
    if (n == 1)
        assert_string_equal(h[0].id, "k-2");
    redisFree(a.c);
    return n;
}

static void test_usage_settle_below_charge_unblocks(void **state)
{
    (void)state;
    int woke = 0;
    assert_int_equal(settle_low_then_dispatch("roomusage", "usage", &woke), 1);
    assert_true(woke);
}

static void test_admission_settle_keeps_the_wait(void **state)
{
    (void)state;
    int woke = 1;
    assert_int_equal(settle_low_then_dispatch("roomadm", NULL, &woke), 0);
    assert_false(woke);
}

/* The time (ms, Redis's clock) the model's key is blocked until: its node's
 * score in sblk (-1: not blocked). */
static long long blocked_until(const struct script_account *a)
{
    redisReply *r = redisCommand(a->c, "ZSCORE %ssblk normal|" MODEL, a->P);
    assert_non_null(r);
    long long until = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return until;
}

/* A settle that measured when its call reached the API re-times its entry:
 * it ends one period after that arrival instead of one period plus the
 * arrival guard after its admission (a new bucket's guard is at its
 * ceiling: 5.5 s of a 600 s window). The key blocked on the entry's old end
 * is blocked until the new end instead, sooner by about the guard, and idle
 * workers are woken to sleep until then. */
static void test_settle_retimed_entry_wakes_the_key(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "roomretime");
    const char *lim[] = {"--tpm", "100", "--period-ms", PERIOD, NULL};
    limits_set(&a, lim);
    enqueue(&a, "r-0", "60", "", "");
    enqueue(&a, "r-1", "50", "", "");
    struct sched_grant g[16];
    assert_int_equal(dispatch(&a, g, NULL, 0), 1);
    assert_int_equal(dispatch(&a, NULL, NULL, 0), 0);
    long long before = blocked_until(&a);
    assert_true(before > 0);
    char w0[64], w1[64];
    wake_last(&a, w0, sizeof(w0));
    settle_late(&a, &g[0], "done", "60", "0", "0", "10");
    wake_last(&a, w1, sizeof(w1));
    assert_string_not_equal(w0, w1);
    long long after = blocked_until(&a);
    assert_true(after > 0);
    assert_true(before - after >= 5000);
    assert_int_equal(dispatch(&a, NULL, NULL, 0), 0); /* still no room: r-0 counts */
    assert_int_equal(blocked_until(&a), after);
    redisFree(a.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_refund_unblocks_a_model),
        cmocka_unit_test(test_retry_refund_unblocks_a_tenant),
        cmocka_unit_test(test_handback_unblocks_a_user),
        cmocka_unit_test(test_producer_refund_unblocks_and_wakes),
        cmocka_unit_test(test_usage_settle_below_charge_unblocks),
        cmocka_unit_test(test_admission_settle_keeps_the_wait),
        cmocka_unit_test(test_settle_retimed_entry_wakes_the_key),
    };
    return cmocka_run_group_tests_name("sched_room_back_wakes", tests, NULL, NULL);
}
