/* Redis Sentinel: clients given a redis-sentinel:// URL find the master by
 * name, and follow a failover: after SENTINEL FAILOVER the old master turns
 * replica, the client's next command sees READONLY or a dropped connection,
 * it reconnects, asks the sentinel again and carries on with the new master.
 * An event loop's connection asks the sentinel off the loop: with the
 * sentinel stopped (SIGSTOP) in the middle of the question, the loop keeps
 * serving (its timers fire, another connection on it gets ready) and the
 * connection is ready once the sentinel answers (SIGCONT).
 * Real processes: a master, a replica and a sentinel (redis-server
 * --sentinel), on free loopback ports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "llmq/limiter.h"
#include "redis/redis_async.h"
#include "redis/redis_url.h"
#include "testsupport.h"

static struct llmq_test_redis master, replica;
static pid_t sentinel_pid;
static int sentinel_port;
static char dir[128];

static redisReply *cmd_on(int port, const char *fmt, ...)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

/* The master's port as the sentinel says, or 0. */
static int sentinel_master_port(void)
{
    redisReply *r = cmd_on(sentinel_port, "SENTINEL get-master-addr-by-name m");
    int port = 0;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING) {
        char *end;
        long v = strtol(r->element[1]->str, &end, 10);
        port = *end == '\0' && v > 0 && v < 65536 ? (int)v : 0;
    }
    if (r != NULL)
        freeReplyObject(r);
    return port;
}

static int sentinel_knows_replica(void)
{
    redisReply *r = cmd_on(sentinel_port, "SENTINEL replicas m");
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1;
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

static int replica_linked(void)
{
    redisReply *r = cmd_on(replica.port, "INFO replication");
    int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "master_link_status:up") != NULL;
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

static int wait_for(int (*cond)(void), int ms)
{
    long long deadline = llmq_test_now_ms() + ms;
    while (llmq_test_now_ms() < deadline) {
        if (cond())
            return 1;
        usleep(50000);
    }
    return 0;
}

static int setup(void **state)
{
    (void)state;
    if (llmq_test_redis_start(&master, NULL) != 0)
        return -1;
    char extra[64];
    snprintf(extra, sizeof(extra), "--replicaof 127.0.0.1 %d", master.port);
    if (llmq_test_redis_start(&replica, extra) != 0 || !wait_for(replica_linked, 10000))
        return -1;
    snprintf(dir, sizeof(dir), "/tmp/llmq-sentinel-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    sentinel_port = llmq_test_free_port();
    char conf[192];
    snprintf(conf, sizeof(conf), "%s/sentinel.conf", dir);
    FILE *f = fopen(conf, "w");
    fprintf(f,
            "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s/sentinel.log\n"
            "sentinel monitor m 127.0.0.1 %d 1\nsentinel down-after-milliseconds m 1000\n"
            "sentinel failover-timeout m 5000\n",
            sentinel_port, dir, dir, master.port);
    fclose(f);
    const char *server = getenv("REDIS_SERVER");
    sentinel_pid = llmq_test_fork();
    if (sentinel_pid == 0) {
        execlp(server ? server : "redis-server", "redis-server", conf, "--sentinel", (char *)NULL);
        _exit(127);
    }
    if (!wait_for(sentinel_knows_replica, 15000) || sentinel_master_port() != master.port)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (sentinel_pid > 0) {
        kill(sentinel_pid, SIGCONT); /* a test that failed may have left it stopped */
        kill(sentinel_pid, SIGTERM);
        waitpid(sentinel_pid, NULL, 0);
    }
    llmq_test_redis_stop(&replica);
    llmq_test_redis_stop(&master);
    return 0;
}

static int failed_over(void)
{
    return sentinel_master_port() == replica.port;
}

static void test_follows_failover(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/m/0", sentinel_port);
    redisReply *r = cmd_on(master.port, "HSET llmq:{sent}:limit:m requests 100 period_ms 60000");
    assert_non_null(r);
    freeReplyObject(r);
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {
        .redis_url = url, .timeout_ms = 1000, .reconnect_min_ms = 50, .reconnect_max_ms = 300};
    struct llmq_limiter *lim = llmq_limiter_new(&cfg, &err);
    assert_non_null(lim);
    struct llmq_path p;
    llmq_path_init(&p, "sent", "m", NULL, NULL, &err);
    struct llmq_grant g;
    assert_int_equal(llmq_limiter_acquire(lim, &p, 1, LLMQ_PRIORITY_NORMAL, &g, &err), LLMQ_OK);
    assert_int_equal(g.decision, LLMQ_GRANTED);

    /* The sentinel refuses (NOGOODSLAVE) until it has checked the replica. */
    int accepted = 0;
    for (long long end = llmq_test_now_ms() + 20000; !accepted && llmq_test_now_ms() < end;) {
        r = cmd_on(sentinel_port, "SENTINEL FAILOVER m");
        accepted = r != NULL && r->type != REDIS_REPLY_ERROR;
        if (r != NULL)
            freeReplyObject(r);
        if (!accepted)
            usleep(200000);
    }
    assert_true(accepted);
    assert_true(wait_for(failed_over, 20000));

    /* The client finds the new master by itself (fail-closed: errors until
     * it has reconnected), and its grants land there. Writes that reach the
     * old master while it is being demoted are lost with it (Redis
     * replication is asynchronous), so keep acquiring until one shows on the
     * new master. */
    long long before = -1, after = -1;
    r = cmd_on(replica.port, "HGET llmq:{sent}:limit:m n");
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        before = atoll(r->str);
    if (r != NULL)
        freeReplyObject(r);
    long long deadline = llmq_test_now_ms() + 20000;
    while (after <= before && llmq_test_now_ms() < deadline) {
        if (llmq_limiter_acquire(lim, &p, 1, LLMQ_PRIORITY_NORMAL, &g, &err) != LLMQ_OK ||
            g.decision != LLMQ_GRANTED) {
            usleep(100000);
            continue;
        }
        r = cmd_on(replica.port, "HGET llmq:{sent}:limit:m n");
        if (r != NULL && r->type == REDIS_REPLY_STRING)
            after = atoll(r->str);
        if (r != NULL)
            freeReplyObject(r);
    }
    printf("# bucket count on the new master: %lld before, %lld after\n", before, after);
    llmq_limiter_free(lim); /* before the assertion: no leak on its failure path */
    assert_true(after > before);
}

struct loop_seen {
    int ticks;
    int ready; /* the connection to the master, by its IP */
};

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    ((struct loop_seen *)w->data)->ticks++;
}

static void on_plain_state(struct llmq_redis_async *ra, int ready, void *privdata)
{
    (void)ra;
    ((struct loop_seen *)privdata)->ready = ready;
}

static void test_lookup_off_the_loop(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct loop_seen seen = {0};
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.05, 0.05);
    tick.data = &seen;
    ev_timer_start(loop, &tick);
    /* a bound against hanging, taken before the connection is made (a lookup
     * on the loop blocked in llmq_redis_async_new for its whole timeout) */
    long long deadline = llmq_test_now_ms() + 30000;
    assert_int_equal(kill(sentinel_pid, SIGSTOP), 0);
    char text[128];
    snprintf(text, sizeof(text), "redis-sentinel://127.0.0.1:%d/m/0", sentinel_port);
    struct llmq_redis_url url;
    struct llmq_error err = {0};
    assert_int_equal(llmq_redis_url_parse(text, &url, &err), LLMQ_OK);
    /* the sentinel's answer may take as long as it likes: 120 s */
    struct llmq_redis_async_config cfg = {.name = "test-sentinel", .timeout_ms = 120000};
    struct llmq_redis_async *ra = llmq_redis_async_new(loop, &url, &cfg, NULL, NULL, &err);
    assert_non_null(ra);
    /* meanwhile the loop serves: its timer, and another connection */
    snprintf(text, sizeof(text), "redis://127.0.0.1:%d/0", replica.port);
    struct llmq_redis_url plain_url;
    assert_int_equal(llmq_redis_url_parse(text, &plain_url, &err), LLMQ_OK);
    struct llmq_redis_async_config plain_cfg = {.name = "test-plain"};
    struct llmq_redis_async *plain =
        llmq_redis_async_new(loop, &plain_url, &plain_cfg, on_plain_state, &seen, &err);
    assert_non_null(plain);
    while ((seen.ticks < 10 || !seen.ready) && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
    print_message("with the sentinel stopped: %d ticks, other connection ready %d\n", seen.ticks,
                  seen.ready);
    int served = seen.ticks >= 10 && seen.ready;
    int waiting = !llmq_redis_async_ready(ra); /* the question is still unanswered */
    kill(sentinel_pid, SIGCONT);
    /* the sentinel answers: the connection is made */
    deadline = llmq_test_now_ms() + 30000;
    while (!llmq_redis_async_ready(ra) && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
    int ready = llmq_redis_async_ready(ra);
    llmq_redis_async_free(plain);
    llmq_redis_async_free(ra);
    ev_timer_stop(loop, &tick);
    ev_loop_destroy(loop);
    assert_true(served);
    assert_true(waiting);
    assert_true(ready);
}

static void test_unknown_master_is_an_error(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/nosuch", sentinel_port);
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = url, .timeout_ms = 500};
    assert_null(llmq_limiter_new(&cfg, &err));
    assert_non_null(strstr(err.msg, "nosuch"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follows_failover),
        cmocka_unit_test(test_unknown_master_is_an_error),
        cmocka_unit_test(test_lookup_off_the_loop),
    };
    return cmocka_run_group_tests_name("redis_sentinel_failover", tests, setup, teardown);
}
