/* A settled call's window entry counts from its arrival, not for the guard
 * (lua/lib/limiter_window.lua): job_settle with the call's measured
 * lateness (late_ms, an upper bound of admission to arrival) moves each
 * window entry to the log of arrivals, where it counts one period from
 * admission + late_ms + the part no worker sees (half the allowance's floor:
 * 25 ms for a 2 s window), whatever the arrival guard is: the API's window
 * of the call, [arrival, arrival + period], is covered, and no longer than
 * that. Checked through the exact wait a following acquire is told (one
 * request per 2 s, so the settled entry alone decides it). The scripts are
 * called directly on the test's Redis. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>

#include "llmq/limiter.h"
#include "redis/script.h"
#include "worker_support.h"

#define MODEL "gpt-4o-mini"
#define SETTLE_VALUES 28 /* job_settle.lua's ARGV values per delivery */
#define PERIOD_MS 2000
#define UNSEEN_MS 25 /* guard_unseen of a 2 s window: half of 50 */

struct fixture {
    struct script_account a;
    struct llmq_limiter *lim;
};

static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof(f));
    script_account_open(&f.a, "arrived");
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = llmq_test_redis_url()};
    f.lim = llmq_limiter_new(&cfg, &err);
    assert_non_null(f.lim);
    redisReply *r =
        redisCommand(f.a.c, "HSET %slimit:%s requests 1 period_ms %d", f.a.P, MODEL, PERIOD_MS);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    llmq_limiter_free(f->lim);
    redisFree(f->a.c);
    return 0;
}

static void pin_guard(struct fixture *f, int guard_ms)
{
    redisReply *r = redisCommand(f->a.c, "HSET %spolicy window_guard_ms %d", f->a.P, guard_ms);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

struct grant {
    char eid[64], id[64], handle[256];
    long long admitted_ms;
};

/* Enqueues job id and dispatches it (the only job) into g. */
static void take(struct fixture *f, const char *id, struct grant *g)
{
    const char *eargv[] = {f->a.P, id,  "normal", MODEL, "/v1/chat/completions", "{}", "10", "", "",
                           "0",    "0", "0",      "1"};
    redisReply *r = llmq_script_run(f->a.c, LLMQ_SCRIPT_ENQUEUE, 1, 13, eargv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    const char *argv[] = {f->a.P, "test-consumer", "1"};
    r = llmq_script_run(f->a.c, LLMQ_SCRIPT_DISPATCH, 1, 3, argv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    const redisReply *j = r->element[4];
    snprintf(g->eid, sizeof(g->eid), "%s", j->element[0]->str);
    snprintf(g->id, sizeof(g->id), "%s", j->element[2]->str);
    snprintf(g->handle, sizeof(g->handle), "%s", j->element[3]->str);
    freeReplyObject(r);
    /* the handle: "<resid>|<cost>|<admitted ms>|..." (lua/lib/handle.lua) */
    const char *p = strchr(g->handle, '|');
    assert_non_null(p);
    p = strchr(p + 1, '|');
    assert_non_null(p);
    g->admitted_ms = strtoll(p + 1, NULL, 10);
    assert_true(g->admitted_ms > 0);
}

/* Settles g done (10 tokens used) with late_ms late ("-1": not measured). */
static void settle_done(struct fixture *f, const struct grant *g, const char *late)
{
    const char *argv[1 + SETTLE_VALUES] = {
        f->a.P, "done", "normal", g->eid, g->id, g->handle, "10", "{}", "",   "0",
        "0",    MODEL,  "0",      "-1",   "-1",  "-1",      "-1", "-1", "-1", "",
        "-1",   "-1",   "-1",     "",     "",    "-1",      late, "0",  "200"};
    redisReply *r =
        llmq_script_run(f->a.c, LLMQ_SCRIPT_JOB_SETTLE, 1, 1 + SETTLE_VALUES, argv, NULL, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("job_settle: %s", r->str);
    freeReplyObject(r);
}

static struct llmq_grant acquire(struct fixture *f)
{
    struct llmq_path p;
    struct llmq_error err = {0};
    struct llmq_grant g;
    assert_int_equal(llmq_path_init(&p, f->a.name, MODEL, NULL, NULL, &err), LLMQ_OK);
    assert_int_equal(llmq_limiter_acquire(f->lim, &p, 1, LLMQ_PRIORITY_NORMAL, &g, &err), LLMQ_OK);
    return g;
}

/* Under a pinned guard of 600 ms, a call id settled late_ms late (a
 * decimal; "-1": not measured) counts in the one-request bucket until its
 * admission + counted_ms + the period: the next acquire is denied that
 * long. */
static void settled_counts_until(struct fixture *f, const char *id, const char *late_ms,
                                 long long counted_ms)
{
    pin_guard(f, 600);
    struct grant g;
    take(f, id, &g);
    settle_done(f, &g, late_ms);
    struct llmq_grant d = acquire(f);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_int_equal(d.wait_ms, g.admitted_ms + counted_ms + PERIOD_MS - d.at_ms);
}

/* A pinned guard of 600 ms: a call settled 40 ms late counts until
 * admission + 40 + 25 + the period, not + 600; one not measured still
 * counts for the guard; a lateness beyond the pinned guard is bounded by it
 * (the policy says how late a call can be). */
static void test_pinned_guard(void **state)
{
    settled_counts_until(*state, "p1", "40", 40 + UNSEEN_MS);
}

static void test_not_measured_keeps_guard(void **state)
{
    settled_counts_until(*state, "n1", "-1", 600);
}

static void test_pinned_guard_bounds_lateness(void **state)
{
    settled_counts_until(*state, "b1", "900", 600);
}

/* The learned guard, covering the 400 ms another call was late this sample
 * period (50 + 400 - 50 + 25): a call settled 100 ms late counts until
 * admission + 125 + the period. One settled 900 ms late, beyond the guard,
 * until admission + 925 + the period: the API counts it that long whatever
 * the guard held (the sample widens the guard as well). */
static void test_learned_guard(void **state)
{
    struct fixture *f = *state;
    struct grant g;
    take(f, "l1", &g);
    redisReply *r = redisCommand(f->a.c, "HSET %slimit:%s late_ms 400 late_prev_ms 0 late_at %lld",
                                 f->a.P, MODEL, g.admitted_ms);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    struct llmq_grant d = acquire(f);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_int_equal(d.wait_ms, g.admitted_ms + 425 + PERIOD_MS - d.at_ms);
    settle_done(f, &g, "100");
    d = acquire(f);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_int_equal(d.wait_ms, g.admitted_ms + 100 + UNSEEN_MS + PERIOD_MS - d.at_ms);
}

static void test_late_beyond_learned_guard(void **state)
{
    struct fixture *f = *state;
    struct grant g;
    take(f, "x1", &g);
    settle_done(f, &g, "900");
    struct llmq_grant d = acquire(f);
    assert_int_equal(d.decision, LLMQ_DENIED);
    assert_int_equal(d.wait_ms, g.admitted_ms + 900 + UNSEEN_MS + PERIOD_MS - d.at_ms);
    /* the keys live until the entry ends */
    long long ttl = redis_int(f->a.c, "PTTL %sbws:%s", f->a.P, MODEL);
    assert_true(ttl >= g.admitted_ms + 900 + UNSEEN_MS + PERIOD_MS - d.at_ms);
}

/* An entry whose arrival was one period and more ago has ended: the next
 * acquire drops it and is granted (the handle says it was admitted 2.1 s
 * before the dispatch; the guard alone would hold it 550 ms longer). */
static void test_arrived_entry_ends(void **state)
{
    struct fixture *f = *state;
    struct grant g;
    take(f, "e1", &g);
    char *p = strchr(strchr(g.handle, '|') + 1, '|') + 1;
    char *rest = strchr(p, '|');
    char tail[200];
    snprintf(tail, sizeof(tail), "%s", rest);
    long long admitted = g.admitted_ms - PERIOD_MS - 100;
    snprintf(p, sizeof(g.handle) - (size_t)(p - g.handle), "%lld%s", admitted, tail);
    settle_done(f, &g, "0");
    assert_int_equal(redis_int(f->a.c, "ZCARD %sbw:%s", f->a.P, MODEL), 0);
    assert_int_equal(redis_int(f->a.c, "ZCARD %sbws:%s", f->a.P, MODEL), 1);
    struct llmq_grant d = acquire(f);
    assert_int_equal(d.decision, LLMQ_GRANTED);
    /* the ended entry was dropped, the grant counted */
    assert_int_equal(redis_int(f->a.c, "ZCARD %sbws:%s", f->a.P, MODEL), 0);
    assert_int_equal(redis_int(f->a.c, "ZCARD %sbw:%s", f->a.P, MODEL), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pinned_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_measured_keeps_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pinned_guard_bounds_lateness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learned_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_beyond_learned_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arrived_entry_ends, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
