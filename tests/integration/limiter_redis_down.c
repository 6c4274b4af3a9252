/* Redis stopped mid-test: a fail-closed limiter answers LLMQ_EREDIS, a
 * fail-open one decides locally against its share of the limits it last saw,
 * and both go back to Redis (reloading scripts) once it is back. Redis hung
 * (SIGSTOP: nothing answers, the sockets stay open): both clients answer
 * LLMQ_EREDIS within their timeout_ms (the sync one saying "did not answer
 * within"), never hang, and are back on Redis after SIGCONT. Uses a private
 * redis-server, since it stops it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "llmq/limiter.h"
#include "limiter_result.h"
#include "testsupport.h"

static struct llmq_test_redis server;

static void set_limit(const char *suffix, const char *fields)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    assert_true(c != NULL && !c->err);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "HSET llmq:{down}:%s %s", suffix, fields);
    redisReply *r = redisCommand(c, cmd);
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
}

static struct llmq_grant acquire_ok(struct llmq_limiter *lim, const struct llmq_path *p)
{
    struct llmq_grant g;
    struct llmq_error err = {0};
    enum llmq_rc rc = llmq_limiter_acquire(lim, p, 10, LLMQ_PRIORITY_NORMAL, &g, &err);
    assert_int_equal(rc, LLMQ_OK);
    return g;
}

/* Retries until the limiter is back on Redis (reconnect is backed off). */
static struct llmq_grant acquire_until_remote(struct llmq_limiter *lim, const struct llmq_path *p)
{
    struct llmq_grant g;
    struct llmq_error err = {0};
    long long deadline = llmq_test_now_ms() + 10000;
    while (llmq_test_now_ms() < deadline) {
        if (llmq_limiter_acquire(lim, p, 10, LLMQ_PRIORITY_NORMAL, &g, &err) == LLMQ_OK && !g.local)
            return g;
        usleep(50000);
    }
    fail_msg("limiter did not return to redis: %s", err.msg);
    return g;
}

static void test_sync_both_policies(void **state)
{
    (void)state;
    set_limit("limit:m", "requests 10 period_ms 60000");
    struct llmq_error err = {0};
    struct llmq_limiter_config closed_cfg = {.redis_url = server.url,
                                             .timeout_ms = 500,
                                             .reconnect_min_ms = 20,
                                             .reconnect_max_ms = 200};
    struct llmq_limiter_config open_cfg = closed_cfg;
    open_cfg.on_redis_down = LLMQ_FAIL_OPEN;
    open_cfg.local_share = 0.5;
    struct llmq_limiter *closed = llmq_limiter_new(&closed_cfg, &err);
    struct llmq_limiter *open = llmq_limiter_new(&open_cfg, &err);
    assert_non_null(closed);
    assert_non_null(open);
    struct llmq_path p;
    llmq_path_init(&p, "down", "m", NULL, NULL, &err);
    /* Both learn the limit (10) from Redis. */
    assert_int_equal(acquire_ok(closed, &p).decision, LLMQ_GRANTED);
    struct llmq_grant g = acquire_ok(open, &p);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    assert_int_equal(g.local, 0);

    llmq_test_redis_stop(&server);
    struct llmq_grant lg;
    assert_int_equal(llmq_limiter_acquire(closed, &p, 10, LLMQ_PRIORITY_NORMAL, &lg, &err),
                     LLMQ_EREDIS);
    /* Fail-open: half of 10 requests locally, then denied with a wait. */
    int granted = 0;
    char last_local[LLMQ_RESERVATION_MAX] = "";
    for (int i = 0; i < 8; i++) {
        lg = acquire_ok(open, &p);
        assert_int_equal(lg.local, 1);
        granted += lg.decision == LLMQ_GRANTED;
        if (lg.decision == LLMQ_GRANTED)
            snprintf(last_local, sizeof(last_local), "%s", lg.reservation);
        if (lg.decision == LLMQ_DENIED)
            assert_true(lg.wait_ms > 0);
    }
    assert_int_equal(granted, 5);
    /* Settling a local grant stays local. */
    assert_int_equal(llmq_limiter_refund(open, last_local, &err), LLMQ_OK);
    lg = acquire_ok(open, &p);
    assert_int_equal(lg.decision, LLMQ_GRANTED);

    /* Back on the same port, empty (scripts gone): both return to Redis. */
    assert_int_equal(llmq_test_redis_start(&server, NULL), 0);
    set_limit("limit:m", "requests 10 period_ms 60000");
    g = acquire_until_remote(closed, &p);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    g = acquire_until_remote(open, &p);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    assert_int_equal(llmq_limiter_settle(open, g.reservation, 5, &err), LLMQ_OK);
    llmq_limiter_free(closed);
    llmq_limiter_free(open);
}

static void run_until(struct ev_loop *loop, int (*done)(void *), void *arg, int ms)
{
    long long deadline = llmq_test_now_ms() + ms;
    while (!done(arg) && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE | EVRUN_NOWAIT), usleep(1000);
}

static int is_ready(void *al)
{
    return llmq_alimiter_ready(al);
}

static int is_not_ready(void *al)
{
    return !llmq_alimiter_ready(al);
}

static int has_call(void *r)
{
    return ((struct llmq_test_grant *)r)->calls > 0;
}

static void test_async_reconnects(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = server.url,
                                      .timeout_ms = 500,
                                      .on_redis_down = LLMQ_FAIL_OPEN,
                                      .local_share = 1.0,
                                      .reconnect_min_ms = 20,
                                      .reconnect_max_ms = 200};
    struct llmq_alimiter *al = llmq_alimiter_new(loop, &cfg, &err);
    assert_non_null(al);
    run_until(loop, is_ready, al, 5000);
    assert_true(llmq_alimiter_ready(al));
    struct llmq_path p;
    llmq_path_init(&p, "down", "m", NULL, NULL, &err);
    struct llmq_test_grant r = {0};
    llmq_alimiter_acquire(al, &p, 1, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &r);
    run_until(loop, has_call, &r, 5000);
    assert_int_equal(r.grant.local, 0);

    llmq_test_redis_stop(&server);
    run_until(loop, is_not_ready, al, 5000);
    assert_false(llmq_alimiter_ready(al));
    struct llmq_test_grant lr = {0};
    assert_int_equal(
        llmq_alimiter_acquire(al, &p, 1, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &lr), LLMQ_OK);
    assert_int_equal(lr.calls, 0);
    run_until(loop, has_call, &lr, 5000);
    assert_int_equal(lr.calls, 1);
    assert_int_equal(lr.rc, LLMQ_OK);
    assert_int_equal(lr.grant.local, 1);

    assert_int_equal(llmq_test_redis_start(&server, NULL), 0);
    run_until(loop, is_ready, al, 10000);
    assert_true(llmq_alimiter_ready(al));
    struct llmq_test_grant rr = {0};
    llmq_alimiter_acquire(al, &p, 1, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &rr);
    run_until(loop, has_call, &rr, 5000);
    assert_int_equal(rr.rc, LLMQ_OK);
    assert_int_equal(rr.grant.local, 0);
    llmq_alimiter_free(al);
    ev_loop_destroy(loop);
}

static void test_hung_redis_fails_closed_within_the_timeout(void **state)
{
    (void)state;
    set_limit("limit:m", "requests 1000 period_ms 60000");
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = server.url,
                                      .timeout_ms = 500,
                                      .reconnect_min_ms = 20,
                                      .reconnect_max_ms = 200};
    struct llmq_alimiter *al = llmq_alimiter_new(loop, &cfg, &err);
    struct llmq_limiter *sl = llmq_limiter_new(&cfg, &err);
    assert_non_null(al);
    assert_non_null(sl);
    run_until(loop, is_ready, al, 5000);
    struct llmq_path p;
    llmq_path_init(&p, "down", "m", NULL, NULL, &err);
    assert_int_equal(acquire_ok(sl, &p).decision, LLMQ_GRANTED);

    assert_int_equal(kill(server.pid, SIGSTOP), 0);
    struct llmq_test_grant hr = {0};
    llmq_alimiter_acquire(al, &p, 1, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &hr);
    run_until(loop, has_call, &hr, 10000); /* the bound is 0.5 s: generous */
    int async_ready = llmq_alimiter_ready(al);
    struct llmq_grant g;
    enum llmq_rc sync_rc = llmq_limiter_acquire(sl, &p, 1, LLMQ_PRIORITY_NORMAL, &g, &err);
    kill(server.pid, SIGCONT);
    assert_int_equal(hr.calls, 1);
    assert_int_equal(hr.rc, LLMQ_EREDIS);
    assert_false(async_ready);
    assert_int_equal(sync_rc, LLMQ_EREDIS);
    char want[96];
    snprintf(want, sizeof(want), "Redis at 127.0.0.1:%d did not answer within 0.5 s", server.port);
    if (strstr(err.msg, want) == NULL)
        fprintf(stderr, "sync acquire said: %s\n", err.msg);
    assert_non_null(strstr(err.msg, want));

    run_until(loop, is_ready, al, 10000);
    assert_true(llmq_alimiter_ready(al));
    struct llmq_test_grant rr = {0};
    llmq_alimiter_acquire(al, &p, 1, LLMQ_PRIORITY_NORMAL, llmq_test_on_grant, &rr);
    run_until(loop, has_call, &rr, 5000);
    assert_int_equal(rr.rc, LLMQ_OK);
    assert_int_equal(rr.grant.local, 0);
    assert_int_equal(acquire_until_remote(sl, &p).decision, LLMQ_GRANTED);
    llmq_limiter_free(sl);
    llmq_alimiter_free(al);
    ev_loop_destroy(loop);
}

static int start_server(void **state)
{
    (void)state;
    return llmq_test_redis_start(&server, NULL);
}

static int stop_server(void **state)
{
    (void)state;
    llmq_test_redis_stop(&server);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_both_policies),
        cmocka_unit_test(test_async_reconnects),
        cmocka_unit_test(test_hung_redis_fails_closed_within_the_timeout),
    };
    return cmocka_run_group_tests_name("limiter_redis_down", tests, start_server, stop_server);
}
