/* The limiter's semantics against a real redis-server: grant and exact wait,
 * never fits, settle both ways, refund, pause, priority headroom, soft limits,
 * tenant defaults, limits changed live, GCRA mode, the library reloaded after FUNCTION
 * FLUSH, and the async client. Redis outages are in limiter_redis_down.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ev.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "llmq/limiter.h"
#include "limiter_result.h"
#include "testsupport.h"

struct fixture {
    char account[64];
    redisContext *c;
    struct llmq_limiter *lim;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    llmq_test_unique_name(f.account, sizeof(f.account), "sem");
    f.c = llmq_test_redis_connect();
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = llmq_test_redis_url()};
    f.lim = llmq_limiter_new(&cfg, &err);
    assert_non_null(f.lim);
    /* These tests check the exact window itself: no arrival guard (which
     * test_window_guard covers). */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "HSET llmq:{%s}:policy window_guard_ms 0", f.account);
    freeReplyObject(redisCommand(f.c, cmd));
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    llmq_limiter_free(f->lim);
    redisFree(f->c);
    return 0;
}

/* HSET llmq:{account}:<suffix> with "field value ..." pairs. */
static void hset(struct fixture *f, const char *suffix, const char *pairs)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "HSET llmq:{%s}:%s %s", f->account, suffix, pairs);
    redisReply *r = redisCommand(f->c, cmd);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

static struct llmq_grant acquire(struct fixture *f, const char *tenant, const char *user,
                                 int64_t cost, enum llmq_priority prio)
{
    struct llmq_path p;
    struct llmq_error err = {0};
    struct llmq_grant g;
    assert_int_equal(llmq_path_init(&p, f->account, "m", tenant, user, &err), LLMQ_OK);
    assert_int_equal(llmq_limiter_acquire(f->lim, &p, cost, prio, &g, &err), LLMQ_OK);
    return g;
}

static void test_grant_then_exact_wait(void **state)
{
    struct fixture *f = *state;
    hset(f, "limit:m", "requests 3 tokens 1000 period_ms 5000");
    struct llmq_grant g1 = acquire(f, NULL, NULL, 400, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g1.decision, LLMQ_GRANTED);
    struct llmq_grant g2 = acquire(f, NULL, NULL, 400, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g2.decision, LLMQ_GRANTED);
    /* 800 used: 300 more does not fit until the first admission ages out. */
    struct llmq_grant d = acquire(f, NULL, NULL, 300, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_string_equal(d.reason, "tokens");
    assert_string_equal(d.bucket, "m");
    assert_int_equal(d.wait_ms, g1.at_ms + 5000 - d.at_ms);
    /* 200 still fits; then the request limit (3) binds. */
    assert_int_equal(acquire(f, NULL, NULL, 200, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    d = acquire(f, NULL, NULL, 0, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_string_equal(d.reason, "requests");
    assert_int_equal(d.wait_ms, g1.at_ms + 5000 - d.at_ms);
}

static void test_never_fits(void **state)
{
    struct fixture *f = *state;
    hset(f, "limit:m", "tokens 1000 period_ms 60000");
    struct llmq_grant g = acquire(f, NULL, NULL, 1001, LLMQ_PRIORITY_HIGH);
    assert_int_equal(g.decision, LLMQ_NEVER_FITS);
    assert_int_equal(g.cost, 1001);
    assert_int_equal(g.limit, 1000);
    assert_string_equal(g.bucket, "m");
    assert_int_equal(acquire(f, NULL, NULL, 1000, LLMQ_PRIORITY_HIGH).decision, LLMQ_GRANTED);
}

/* The default ledger counts what the API counts at admission: settling
 * with less usage gives nothing back inside the window, more usage raises
 * the charge, a refund (the API never admitted it) gives all back. */
static void test_admission_ledger(void **state)
{
    struct fixture *f = *state;
    struct llmq_error err = {0};
    hset(f, "limit:m", "tokens 1000 period_ms 60000");
    struct llmq_grant g = acquire(f, NULL, NULL, 600, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    assert_int_equal(llmq_limiter_settle(f->lim, g.reservation, 100, &err), LLMQ_OK);
    /* Still 600 charged: 401 does not fit, 400 does. */
    assert_int_equal(acquire(f, NULL, NULL, 401, LLMQ_PRIORITY_NORMAL).decision, LLMQ_DENIED);
    struct llmq_grant g2 = acquire(f, NULL, NULL, 300, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g2.decision, LLMQ_GRANTED);
    /* Usage above the charge raises it: 600 + 350 = 950 charged. */
    assert_int_equal(llmq_limiter_settle(f->lim, g2.reservation, 350, &err), LLMQ_OK);
    assert_int_equal(acquire(f, NULL, NULL, 51, LLMQ_PRIORITY_NORMAL).decision, LLMQ_DENIED);
    struct llmq_grant g3 = acquire(f, NULL, NULL, 50, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g3.decision, LLMQ_GRANTED);
    /* A refund gives the whole charge back. */
    assert_int_equal(llmq_limiter_refund(f->lim, g3.reservation, &err), LLMQ_OK);
    assert_int_equal(acquire(f, NULL, NULL, 50, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
}

/* An admission holds its window one guard longer than the period: the
 * policy's pinned guard, else the model's learned one. */
static void test_window_guard(void **state)
{
    struct fixture *f = *state;
    hset(f, "policy", "window_guard_ms 700");
    hset(f, "limit:m", "requests 1 period_ms 5000");
    struct llmq_grant g = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    struct llmq_grant d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 700 - d.at_ms);
    /* Without a policy value the model's learned guard applies (docs/limiter.md "What a
     * bucket is charged"): grant lifetime + allowance, never grown their
     * floors, for a 5 s window 125 + 125 (period / 40 each), once the
     * allowance's safe start has decayed (test_guard_learns_down): first
     * used long ago. */
    redisReply *r = redisCommand(f->c, "HDEL llmq:{%s}:policy window_guard_ms", f->account);
    freeReplyObject(r);
    char fields[128];
    snprintf(fields, sizeof(fields), "guard_born_ms %lld", (long long)d.at_ms - 1000000);
    hset(f, "limit:m", fields);
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 250 - d.at_ms);
    /* The allowance grown to 275 ms just now (what a settle records): 400. */
    snprintf(fields, sizeof(fields), "allowance_ms 275 allowance_at %lld", (long long)d.at_ms);
    hset(f, "limit:m", fields);
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 400 - d.at_ms);
    /* Grown two whole windows ago: 0.75^2 of its 150 ms over the floor is
     * left, 125 + 84; and a lifetime grown to 200 just now: 200 + 209. */
    snprintf(fields, sizeof(fields),
             "allowance_ms 275 allowance_at %lld lifetime_ms 200 lifetime_at %lld",
             (long long)d.at_ms - 10000, (long long)d.at_ms);
    hset(f, "limit:m", fields);
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 409 - d.at_ms);
    /* Above their ceilings (period / 8 and period / 4) they are held there:
     * 625 + 1250. */
    snprintf(fields, sizeof(fields), "allowance_ms 90000 allowance_at %lld lifetime_ms 90000",
             (long long)d.at_ms);
    hset(f, "limit:m", fields);
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 1875 - d.at_ms);
}

/* The learned allowance without 429s (lua/lib/limiter_window.lua,
 * guard_allowance), on a clock the test sets through the times the bucket
 * stores: a bucket never used starts at the allowance's ceiling, which its
 * first admission records (guard_born_ms) and which decays while nothing is
 * measured; the workers' lateness samples (admission to arrival) bring it
 * down at once to what they measured less the lifetime (+ half the floor),
 * and a higher sample widens it at once.
 * A 5 s window: lifetime 125 (its floor), allowance 125..1250. */
static void test_guard_learns_down(void **state)
{
    struct fixture *f = *state;
    redisReply *r = redisCommand(f->c, "HDEL llmq:{%s}:policy window_guard_ms", f->account);
    freeReplyObject(r);
    hset(f, "limit:m", "requests 1 period_ms 5000");
    struct llmq_grant g = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    struct llmq_grant d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 125 + 1250 - d.at_ms);
    /* the first use is kept in Redis: a restart starts from it */
    char key[128];
    snprintf(key, sizeof(key), "llmq:{%s}:limit:m", f->account);
    r = redisCommand(f->c, "HGET %s guard_born_ms", key);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(strtoll(r->str, NULL, 10), g.at_ms);
    freeReplyObject(r);
    /* Nothing measured, first used two whole windows ago: 0.75^2 of the
     * 1125 ms over the floor is left: 125 + 632. */
    char fields[160];
    snprintf(fields, sizeof(fields), "guard_born_ms %lld", (long long)d.at_ms - 10000);
    hset(f, "limit:m", fields);
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 125 + 757 - d.at_ms);
    /* Workers measured at most 40 ms (this sample period) and 10 (the one
     * before): down to the floor at once, 40 is within the lifetime. */
    snprintf(fields, sizeof(fields), "late_ms 40 late_prev_ms 10 late_at %lld", (long long)d.at_ms);
    hset(f, "limit:m", fields);
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 125 + 125 - d.at_ms);
    /* A loaded host: the previous sample period saw 400 ms: 400 - 125 + 62. */
    hset(f, "limit:m", "late_prev_ms 400");
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 125 + 337 - d.at_ms);
    /* A 429's growth still counts when it is larger: 900 grown just now. */
    snprintf(fields, sizeof(fields), "allowance_ms 900 allowance_at %lld", (long long)d.at_ms);
    hset(f, "limit:m", fields);
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 125 + 900 - d.at_ms);
    /* Never past the ceiling: 5000 measured is held at 1250. */
    hset(f, "limit:m", "late_ms 5000 allowance_ms 100");
    d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.wait_ms, g.at_ms + 5000 + 125 + 1250 - d.at_ms);
}

/* A bucket set to --settle usage replaces the charge with the usage. */
static void test_settle_both_ways_and_refund(void **state)
{
    struct fixture *f = *state;
    struct llmq_error err = {0};
    hset(f, "limit:m", "tokens 1000 period_ms 60000 settle usage");
    struct llmq_grant g = acquire(f, NULL, NULL, 600, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, NULL, NULL, 500, LLMQ_PRIORITY_NORMAL).decision, LLMQ_DENIED);
    /* Settled down to 100: 900 free. */
    assert_int_equal(llmq_limiter_settle(f->lim, g.reservation, 100, &err), LLMQ_OK);
    struct llmq_grant g2 = acquire(f, NULL, NULL, 900, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g2.decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_DENIED);
    /* Refund gives all 900 back. */
    assert_int_equal(llmq_limiter_refund(f->lim, g2.reservation, &err), LLMQ_OK);
    assert_int_equal(acquire(f, NULL, NULL, 900, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    /* Settling up past the limit is recorded: the bucket is now over. */
    struct llmq_grant g3 = acquire(f, NULL, NULL, 0, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g3.decision, LLMQ_GRANTED);
    assert_int_equal(llmq_limiter_settle(f->lim, g3.reservation, 500, &err), LLMQ_OK);
    struct llmq_grant d = acquire(f, NULL, NULL, 0, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_string_equal(d.reason, "tokens");
}

static void test_pause(void **state)
{
    struct fixture *f = *state;
    struct llmq_error err = {0};
    hset(f, "limit:m", "requests 100 period_ms 60000");
    int64_t until = 0;
    assert_int_equal(llmq_limiter_pause(f->lim, f->account, "m", 3000, &until, &err), LLMQ_OK);
    struct llmq_grant d = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_HIGH);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_string_equal(d.reason, "pause");
    assert_int_equal(d.wait_ms, until - d.at_ms);
    assert_true(d.wait_ms > 2900 && d.wait_ms <= 3000);
    /* A shorter pause does not shorten it. */
    int64_t until2 = 0;
    assert_int_equal(llmq_limiter_pause(f->lim, f->account, "m", 10, &until2, &err), LLMQ_OK);
    assert_int_equal(until2, until);
    assert_int_equal(llmq_limiter_pause(f->lim, f->account, "m", 0, NULL, &err), LLMQ_EINVAL);
}

static void test_priority_headroom(void **state)
{
    struct fixture *f = *state;
    hset(f, "limit:m", "tokens 1000 period_ms 60000");
    /* low may fill 80%: 700 + 100 fit, one more 100 does not; normal still can. */
    assert_int_equal(acquire(f, NULL, NULL, 700, LLMQ_PRIORITY_LOW).decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, NULL, NULL, 100, LLMQ_PRIORITY_LOW).decision, LLMQ_GRANTED);
    struct llmq_grant d = acquire(f, NULL, NULL, 100, LLMQ_PRIORITY_LOW);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_int_equal(acquire(f, NULL, NULL, 200, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    /* Policy edited live: low may now use only 10%. */
    char acc2[64];
    snprintf(acc2, sizeof(acc2), "%s", f->account);
    llmq_test_unique_name(f->account, sizeof(f->account), "hr");
    hset(f, "limit:m", "tokens 1000 period_ms 60000");
    hset(f, "policy", "headroom_low 10");
    assert_int_equal(acquire(f, NULL, NULL, 100, LLMQ_PRIORITY_LOW).decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_LOW).decision, LLMQ_DENIED);
    assert_int_equal(acquire(f, NULL, NULL, 899, LLMQ_PRIORITY_HIGH).decision, LLMQ_GRANTED);
}

static void test_soft_limit_borrows_until_contended(void **state)
{
    struct fixture *f = *state;
    hset(f, "limit:m", "tokens 1000 period_ms 60000");
    hset(f, "limit:m/t/acme", "tokens 100 soft 1");
    hset(f, "limit:m/t/hard", "tokens 100");
    /* The hard tenant is held to 100. */
    assert_int_equal(acquire(f, "hard", NULL, 100, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    struct llmq_grant d = acquire(f, "hard", NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_string_equal(d.level, "tenant");
    /* The soft tenant borrows while the model bucket is under 80%. */
    assert_int_equal(acquire(f, "acme", NULL, 300, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, "acme", NULL, 300, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    /* Now 700/1000 used: still below 80%, borrow once more to 800. */
    assert_int_equal(acquire(f, "acme", NULL, 100, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    /* 800/1000 = contended: the soft bucket (700 > 100) binds. */
    d = acquire(f, "acme", NULL, 10, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_string_equal(d.bucket, "m/t/acme");
    /* Another tenant without a limit of its own still gets the rest. */
    assert_int_equal(acquire(f, "other", NULL, 200, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
}

static void test_default_tenant_limit(void **state)
{
    struct fixture *f = *state;
    hset(f, "limit:m/t/*", "tokens 100 period_ms 60000");
    /* Each tenant gets its own bucket with the default limit. */
    assert_int_equal(acquire(f, "a", NULL, 100, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, "a", NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_DENIED);
    assert_int_equal(acquire(f, "b", NULL, 100, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    struct llmq_grant d = acquire(f, "b", NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_string_equal(d.bucket, "m/t/b");
    /* A user bucket on the same path binds too: bob of every tenant, each
     * tenant's bob a bucket of its own. */
    hset(f, "limit:m/u/bob", "requests 1 period_ms 60000");
    assert_int_equal(acquire(f, "c", "bob", 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    d = acquire(f, "c", "bob", 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_string_equal(d.level, "user");
    assert_string_equal(d.bucket, "m/t/c/u/bob");
    assert_int_equal(acquire(f, "e", "bob", 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
}

static void test_limits_changed_live(void **state)
{
    struct fixture *f = *state;
    hset(f, "limit:m", "requests 2 period_ms 60000");
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_DENIED);
    hset(f, "limit:m", "requests 3");
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_DENIED);
    /* A shorter period frees old entries at once. */
    hset(f, "limit:m", "period_ms 1");
    usleep(5000);
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
}

static void test_gcra_mode(void **state)
{
    struct fixture *f = *state;
    struct llmq_error err = {0};
    /* 10 requests per 10 s = one per second, burst 2. */
    hset(f, "limit:m", "requests 10 period_ms 10000 mode gcra burst_requests 2");
    assert_int_equal(acquire(f, NULL, NULL, 0, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    struct llmq_grant g = acquire(f, NULL, NULL, 0, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    struct llmq_grant d = acquire(f, NULL, NULL, 0, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    /* Continuous refill: the next request fits after one emission interval. */
    assert_true(d.wait_ms > 900 && d.wait_ms <= 1000);
    assert_int_equal(llmq_limiter_refund(f->lim, g.reservation, &err), LLMQ_OK);
    assert_int_equal(acquire(f, NULL, NULL, 0, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    /* Tokens: 1000 per 10 s, burst 500. */
    llmq_test_unique_name(f->account, sizeof(f->account), "gcra");
    hset(f, "limit:m", "tokens 1000 period_ms 10000 mode gcra burst_tokens 500 settle usage");
    assert_int_equal(acquire(f, NULL, NULL, 501, LLMQ_PRIORITY_NORMAL).decision, LLMQ_NEVER_FITS);
    g = acquire(f, NULL, NULL, 500, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    d = acquire(f, NULL, NULL, 100, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_true(d.wait_ms > 900 && d.wait_ms <= 1000); /* 100 tokens refill in 1 s */
    assert_int_equal(llmq_limiter_settle(f->lim, g.reservation, 100, &err), LLMQ_OK);
    assert_int_equal(acquire(f, NULL, NULL, 100, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
}

static void test_noscript_after_flush(void **state)
{
    struct fixture *f = *state;
    hset(f, "limit:m", "requests 5 period_ms 60000");
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    redisReply *r = redisCommand(f->c, "FUNCTION FLUSH");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    /* The client loads the library again transparently; the caller never
     * sees "Function not found". */
    struct llmq_grant g = acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    struct llmq_error err = {0};
    r = redisCommand(f->c, "FUNCTION FLUSH");
    freeReplyObject(r);
    assert_int_equal(llmq_limiter_settle(f->lim, g.reservation, 3, &err), LLMQ_OK);
}

static void test_acquire_many(void **state)
{
    struct fixture *f = *state;
    struct llmq_error err = {0};
    hset(f, "limit:m", "tokens 1000 period_ms 60000 settle usage");
    hset(f, "limit:m/t/acme", "requests 10 period_ms 60000");
    struct llmq_path p;
    llmq_path_init(&p, f->account, "m", "acme", NULL, &err);
    int64_t costs[5] = {300, 300, 300, 300, 1};
    struct llmq_grant g[5];
    size_t decided = 0;
    assert_int_equal(
        llmq_limiter_acquire_many(f->lim, &p, costs, 5, LLMQ_PRIORITY_NORMAL, g, &decided, &err),
        LLMQ_OK);
    /* Three fit, the fourth is denied and deciding stops there. */
    assert_int_equal(decided, 4);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(g[i].decision, LLMQ_GRANTED);
        assert_int_equal(g[i].cost, 300);
        if (i > 0)
            assert_int_equal(g[i].reservation_id, g[i - 1].reservation_id + 1);
    }
    assert_int_equal(g[3].decision, LLMQ_DENIED);
    assert_string_equal(g[3].bucket, "m");
    /* Each grant settles on its own: two settle to 0, freeing 600. */
    assert_int_equal(llmq_limiter_settle(f->lim, g[0].reservation, 0, &err), LLMQ_OK);
    assert_int_equal(llmq_limiter_refund(f->lim, g[1].reservation, &err), LLMQ_OK);
    assert_int_equal(
        llmq_limiter_acquire_many(f->lim, &p, costs, 2, LLMQ_PRIORITY_NORMAL, g, &decided, &err),
        LLMQ_OK);
    assert_int_equal(decided, 2);
    assert_int_equal(g[1].decision, LLMQ_GRANTED);
    /* The tenant's request limit counts every grant but the refunded one. */
    costs[0] = 0;
    struct llmq_grant one;
    int granted = 0;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(llmq_limiter_acquire(f->lim, &p, 0, LLMQ_PRIORITY_NORMAL, &one, &err),
                         LLMQ_OK);
        granted += one.decision == LLMQ_GRANTED;
    }
    assert_int_equal(granted, 10 - 4);
    assert_int_equal(
        llmq_limiter_acquire_many(f->lim, &p, costs, 0, LLMQ_PRIORITY_NORMAL, g, &decided, &err),
        LLMQ_EINVAL);
}

static void test_idle_entries_are_dropped(void **state)
{
    struct fixture *f = *state;
    /* 50 ms period: after 1.25 periods the log is trimmed on the next call,
     * so memory holds only about one period of admissions. */
    hset(f, "limit:m", "requests 1000 period_ms 50");
    for (int i = 0; i < 20; i++)
        assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    usleep(80000);
    assert_int_equal(acquire(f, NULL, NULL, 1, LLMQ_PRIORITY_NORMAL).decision, LLMQ_GRANTED);
    redisReply *r = redisCommand(f->c, "ZCARD llmq:{%s}:bw:m", f->account);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    /* An idle log expires entirely. */
    usleep(250000);
    r = redisCommand(f->c, "EXISTS llmq:{%s}:bw:m", f->account);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
}

static void test_bad_arguments(void **state)
{
    struct fixture *f = *state;
    struct llmq_path p;
    struct llmq_error err = {0};
    struct llmq_grant g;
    assert_int_equal(llmq_path_init(&p, f->account, "m", NULL, NULL, &err), LLMQ_OK);
    assert_int_equal(llmq_limiter_acquire(f->lim, &p, -1, LLMQ_PRIORITY_NORMAL, &g, &err),
                     LLMQ_EINVAL);
    assert_int_equal(llmq_limiter_settle(f->lim, "garbage", 1, &err), LLMQ_EINVAL);
    assert_int_equal(llmq_limiter_settle(f->lim, "acct|x|y", 1, &err), LLMQ_ESCRIPT);
    assert_non_null(strstr(err.msg, "LLMQ_EINVAL"));
}

/* ---- async client ---- */

static void run_until(struct ev_loop *loop, const int *counter, int target)
{
    long long deadline = llmq_test_now_ms() + 5000;
    while (*counter < target && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
}

static void test_async_client(void **state)
{
    struct fixture *f = *state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = llmq_test_redis_url()};
    struct llmq_alimiter *al = llmq_alimiter_new(loop, &cfg, &err);
    assert_non_null(al);
    long long deadline = llmq_test_now_ms() + 5000;
    while (!llmq_alimiter_ready(al) && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
    assert_true(llmq_alimiter_ready(al));
    hset(f, "limit:m", "tokens 100 period_ms 60000 settle usage");
    struct llmq_path p;
    llmq_path_init(&p, f->account, "m", NULL, NULL, &err);
    struct llmq_test_grant a = {0}, b = {0}, s = {0};
    assert_int_equal(
        llmq_alimiter_acquire(al, &p, 60, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &a), LLMQ_OK);
    assert_int_equal(
        llmq_alimiter_acquire(al, &p, 60, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &b), LLMQ_OK);
    assert_int_equal(a.calls + b.calls, 0); /* never before submit returns */
    int total = 0;
    while (a.calls + b.calls < 2 && llmq_test_now_ms() < deadline) {
        ev_run(loop, EVRUN_ONCE);
        total = a.calls + b.calls;
    }
    (void)total;
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    assert_int_equal(a.grant.decision, LLMQ_GRANTED);
    assert_int_equal(b.grant.decision, LLMQ_DENIED);
    /* The async runner, too, loads a flushed library and calls again. */
    freeReplyObject(redisCommand(f->c, "FUNCTION FLUSH"));
    assert_int_equal(llmq_alimiter_settle(al, a.grant.reservation, 10, llmq_test_on_grant, &s),
                     LLMQ_OK);
    run_until(loop, &s.calls, 1);
    assert_int_equal(s.rc, LLMQ_OK);
    struct llmq_test_grant c = {0};
    assert_int_equal(
        llmq_alimiter_acquire(al, &p, 90, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &c), LLMQ_OK);
    run_until(loop, &c.calls, 1);
    assert_int_equal(c.grant.decision, LLMQ_GRANTED);
    /* Freed with a call in flight: its callback runs once, with ECLOSED. */
    struct llmq_test_grant d = {0};
    assert_int_equal(llmq_alimiter_acquire(al, &p, 1, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &d),
                     LLMQ_OK);
    llmq_alimiter_free(al);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, LLMQ_ECLOSED);
    ev_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_grant_then_exact_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_fits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admission_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_guard_learns_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_settle_both_ways_and_refund, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pause, setup, teardown),
        cmocka_unit_test_setup_teardown(test_priority_headroom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_soft_limit_borrows_until_contended, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_tenant_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits_changed_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gcra_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_noscript_after_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acquire_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_entries_are_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_async_client, setup, teardown),
    };
    return cmocka_run_group_tests_name("limiter_semantics", tests, NULL, NULL);
}
