/* An asynchronous cluster connection while it follows a MOVED
 * (common/redis/redis_async.h): 2 primaries, a connection routed to an
 * account on primary 0, whose slot then moves to primary 1. The plain
 * command it sends next is answered MOVED; the connection leaves for the
 * new node, and on the next loop turn, before the new node has answered the
 * handshake, it still hands out a context: a command sent then waits behind
 * the handshake and runs on the new owner (a gateway answered 503 to the
 * calls that came in that moment). And llmq_redis_command_async sends a
 * command answered MOVED again on the new owner: its callback gets the
 * command's own reply, once. */
#include <ev.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster_fixture.h"
#include "redis/redis_async.h"
#include "redis/script.h"

struct moving {
    struct ev_loop *loop;
    struct llmq_redis_async *ra;
    ev_timer after_move;
    char key[128];
    int got_moved;      /* the first command's reply was MOVED */
    int context_moving; /* a context was handed out while following */
    int set_ok;         /* the command sent then ran: +OK */
    int followed_value; /* llmq_redis_command_async's reply: the value set */
    int replies;        /* of that command */
    int connecting;     /* the first connect: readiness breaks the loop */
};

static void on_followed_get(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct moving *m = privdata;
    redisReply *r = reply;
    m->replies++;
    m->followed_value = r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, "7") == 0;
    ev_break(m->loop, EVBREAK_ALL);
}

static void on_set(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct moving *m = privdata;
    redisReply *r = reply;
    m->set_ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (!m->set_ok)
        fprintf(stderr, "SET during the move: %s\n", r ? r->str : "no reply");
    ev_break(m->loop, EVBREAK_ALL);
}

/* The loop turn after the MOVED: the connection is on its way to the new node. */
static void on_after_move(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    struct moving *m = w->data;
    assert_false(llmq_redis_async_ready(m->ra)); /* the handshake is not answered yet */
    redisAsyncContext *ac = llmq_redis_async_context(m->ra);
    m->context_moving = ac != NULL;
    if (ac == NULL || redisAsyncCommand(ac, on_set, m, "SET %s 7", m->key) != REDIS_OK)
        ev_break(loop, EVBREAK_ALL);
}

static void on_first(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct moving *m = privdata;
    redisReply *r = reply;
    m->got_moved = r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED ", 6) == 0;
    /* the connection follows once this read is done; look a turn later */
    ev_timer_init(&m->after_move, on_after_move, 0.0, 0.0);
    m->after_move.data = m;
    ev_timer_start(m->loop, &m->after_move);
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop until a callback breaks it or 10 s pass (against hanging). */
static void run(struct moving *m)
{
    ev_timer guard;
    ev_timer_init(&guard, on_guard, 10.0, 0.0);
    ev_timer_start(m->loop, &guard);
    ev_run(m->loop, 0);
    ev_timer_stop(m->loop, &guard);
}

static void on_state(struct llmq_redis_async *ra, int ready, void *privdata)
{
    (void)ra;
    struct moving *m = privdata;
    if (ready && m->connecting)
        ev_break(m->loop, EVBREAK_ALL);
}

static void test_commands_sent_while_following_a_move(void **state)
{
    (void)state;
    struct llmq_test_cluster cl;
    assert_int_equal(llmq_test_cluster_start(&cl, 2, 0), 0);
    char accounts[1][64];
    llmq_test_cluster_spread_accounts(&cl, "mv", 1, accounts); /* on primary 0 */
    struct moving m = {.loop = ev_loop_new(EVFLAG_AUTO), .connecting = 1};
    snprintf(m.key, sizeof(m.key), "llmq:{%s}:moving", accounts[0]);
    struct llmq_redis_url url;
    assert_int_equal(llmq_redis_url_parse(cl.url, &url, NULL), LLMQ_OK);
    llmq_redis_url_route(&url, accounts[0]);
    struct llmq_redis_async_config cfg = {.name = "moving-test"};
    m.ra = llmq_redis_async_new(m.loop, &url, &cfg, on_state, &m, NULL);
    assert_non_null(m.ra);
    run(&m);
    assert_true(llmq_redis_async_ready(m.ra));
    m.connecting = 0;

    int slot = llmq_test_cluster_account_slot(accounts[0]);
    long long moved = 0;
    assert_int_equal(llmq_test_cluster_move_slot(&cl, slot, 1, 10, 0, &moved), 0);
    assert_int_equal(llmq_test_cluster_wait_stable(&cl, 10000), 0);
    redisAsyncContext *ac = llmq_redis_async_context(m.ra);
    assert_non_null(ac);
    assert_int_equal(redisAsyncCommand(ac, on_first, &m, "GET %s", m.key), REDIS_OK);
    run(&m);
    assert_true(m.got_moved);
    assert_true(m.context_moving);
    assert_true(m.set_ok);

    /* the slot back to primary 0: a followed command gets its own reply */
    assert_int_equal(llmq_test_cluster_move_slot(&cl, slot, 0, 10, 0, &moved), 0);
    assert_int_equal(moved, 1); /* the key set above */
    assert_int_equal(llmq_test_cluster_wait_stable(&cl, 10000), 0);
    for (long long end = llmq_test_now_ms() + 5000;
         !llmq_redis_async_ready(m.ra) && llmq_test_now_ms() < end;)
        ev_run(m.loop, EVRUN_ONCE | EVRUN_NOWAIT);
    ac = llmq_redis_async_context(m.ra);
    assert_non_null(ac);
    assert_int_equal(llmq_redis_command_async(ac, on_followed_get, &m, "GET %s", m.key), LLMQ_OK);
    run(&m);
    assert_int_equal(m.replies, 1);
    assert_true(m.followed_value);

    llmq_redis_async_free(m.ra);
    ev_loop_destroy(m.loop);
    llmq_test_cluster_stop(&cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commands_sent_while_following_a_move),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
