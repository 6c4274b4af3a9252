/* A subscription Redis refuses after a good handshake (an ACL user without
 * the channel: AUTH and PING pass, SUBSCRIBE gets NOPERM) is asked for again
 * on the reconnect backoff's schedule, not at once: the connection is not
 * counted healthy before its SUBSCRIBE is confirmed, so the backoff grows
 * from one refusal to the next. This is the gateway's relay subscription
 * (and each worker's back channel) with their default backoff (100 ms, doubling
 * to 5 s). Once the ACL allows the channel, the subscription comes back by
 * itself and delivers messages. Uses a private redis-server (its ACL log
 * counts the refused SUBSCRIBEs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ev.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "redis/redis_sub.h"
#include "redis/redis_url.h"
#include "testsupport.h"

#define CHANNEL "llmq:{refused}:sse:gw-test"
#define WINDOW_MS 2000

static struct llmq_test_redis server;

struct seen {
    int subscribed;
    int messages;
};

static void on_message(const char *msg, size_t len, void *privdata)
{
    (void)msg;
    (void)len;
    ((struct seen *)privdata)->messages++;
}

static void on_state(int subscribed, void *privdata)
{
    ((struct seen *)privdata)->subscribed = subscribed;
}

static redisContext *admin(void)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    assert_true(c != NULL && !c->err);
    return c;
}

static void command(redisContext *c, const char *cmd)
{
    redisReply *r = redisCommand(c, cmd);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

/* How many SUBSCRIBEs of user `relay` Redis refused (its ACL log: one entry
 * per user, channel and reason, with a count). */
static long long refused_subscribes(redisContext *c)
{
    redisReply *r = redisCommand(c, "ACL LOG");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    long long n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        long long count = 0;
        int mine = 0;
        for (size_t k = 0; k + 1 < e->elements; k += 2) {
            const char *f = e->element[k]->str;
            const redisReply *v = e->element[k + 1];
            if (strcmp(f, "count") == 0)
                count = v->integer;
            else if (strcmp(f, "username") == 0 && strcmp(v->str, "relay") == 0)
                mine = 1;
        }
        if (mine)
            n += count;
    }
    freeReplyObject(r);
    return n;
}

static void run_for_ms(struct ev_loop *loop, long long ms)
{
    long long deadline = llmq_test_now_ms() + ms;
    while (llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE | EVRUN_NOWAIT), usleep(1000);
}

/* Runs the loop until *flag >= want or timeout_ms passed (against hanging,
 * not a timing check). */
static void run_until(struct ev_loop *loop, const int *flag, int want, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    while (*flag < want && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE | EVRUN_NOWAIT), usleep(1000);
}

static void test_refused_subscribe_backs_off(void **state)
{
    (void)state;
    redisContext *c = admin();
    command(c, "ACL SETUSER relay on >relay-pw ~* +@all resetchannels");
    char url_text[128];
    snprintf(url_text, sizeof(url_text), "redis://relay:relay-pw@127.0.0.1:%d/0", server.port);
    struct llmq_redis_url url;
    struct llmq_error err = {0};
    assert_int_equal(llmq_redis_url_parse(url_text, &url, &err), LLMQ_OK);
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    /* the gateway's relay config: the default backoff */
    struct llmq_redis_async_config cfg = {.name = "test-relay"};
    struct seen seen = {0};
    struct llmq_redis_sub *sub =
        llmq_redis_sub_new(loop, &url, &cfg, CHANNEL, on_message, on_state, &seen, &err);
    assert_non_null(sub);

    run_for_ms(loop, WINDOW_MS);
    long long attempts = refused_subscribes(c);
    /* The schedule: each retry waits [step/2, step], the step 100 ms and
     * doubling, so attempts start at the earliest at 0, 50, 150, 350, 750 and
     * 1550 ms: at most 6 in 2 s (a slower host makes fewer), one more allowed
     * for timer rounding. With the step reset by every good handshake, each
     * retry waited 50-100 ms: some 20-40 attempts in 2 s. */
    print_message("refused SUBSCRIBEs in %d ms: %lld\n", WINDOW_MS, attempts);
    assert_true(attempts >= 2); /* it does try again */
    assert_true(attempts <= 7);
    assert_false(llmq_redis_sub_ready(sub));
    assert_int_equal(seen.subscribed, 0);

    /* Allowed now: it subscribes by itself (the backoff is capped at 5 s). */
    command(c, "ACL SETUSER relay allchannels");
    run_until(loop, &seen.subscribed, 1, 15000);
    assert_true(llmq_redis_sub_ready(sub));
    assert_string_equal(llmq_redis_sub_last_error(sub), "");
    command(c, "PUBLISH " CHANNEL " hello");
    run_until(loop, &seen.messages, 1, 5000);
    assert_int_equal(seen.messages, 1);

    llmq_redis_sub_free(sub);
    ev_loop_destroy(loop);
    command(c, "ACL DELUSER relay");
    redisFree(c);
}

static int setup(void **state)
{
    (void)state;
    return llmq_test_redis_start(&server, NULL);
}

static int teardown(void **state)
{
    (void)state;
    llmq_test_redis_stop(&server);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_subscribe_backs_off),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
