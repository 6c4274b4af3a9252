/* Redis Sentinel: clients given a redis-sentinel:// URL find the master by
 * name, and follow a failover: after SENTINEL FAILOVER the old master turns
 * replica, the client's next command sees READONLY or a dropped connection,
 * it reconnects, asks the sentinel again and carries on with the new master.
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
    assert_true(after > before);
    llmq_limiter_free(lim);
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
    };
    return cmocka_run_group_tests_name("redis_sentinel_failover", tests, setup, teardown);
}
