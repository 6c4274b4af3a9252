/* Redis AUTH with an ACL user that may touch only llmq's keys: the limiter
 * (sync and async), the CLI and a producer work through it; a wrong password
 * is a clear error that never echoes the password. Uses a private
 * redis-server, since it changes users. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ev.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "jobs_cli_run.h"
#include "llmq/limiter.h"
#include "job_fields.h"
#include "testsupport.h"

static struct llmq_test_redis server;
static char good_url[256], bad_url[256];

static void admin(const char *cmd)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    assert_true(c != NULL && !c->err);
    redisReply *r = redisCommand(c, "AUTH admin adminpw");
    if (r != NULL)
        freeReplyObject(r);
    r = redisCommand(c, cmd);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    redisFree(c);
}

static int setup(void **state)
{
    (void)state;
    if (llmq_test_redis_start(&server, NULL) != 0)
        return -1;
    admin("ACL SETUSER admin on >adminpw ~* &* +@all");
    /* llmq's user: only keys under llmq:, scripts allowed; default user off.
     * The password needs percent-escapes in a URL. */
    admin("ACL SETUSER llmq on >p@ss:w0rd ~llmq:* +@all -@dangerous +script|load "
          "+script|flush +info +ping");
    admin("ACL SETUSER default off");
    snprintf(good_url, sizeof(good_url), "redis://llmq:p%%40ss%%3Aw0rd@127.0.0.1:%d/0",
             server.port);
    snprintf(bad_url, sizeof(bad_url), "redis://llmq:wrong-secret@127.0.0.1:%d/0", server.port);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    llmq_test_redis_stop(&server);
    return 0;
}

static void test_sync_limiter_as_acl_user(void **state)
{
    (void)state;
    struct llmq_error err = {0};
    admin("HSET llmq:{acl}:limit:m requests 2 period_ms 60000");
    struct llmq_limiter_config cfg = {.redis_url = good_url};
    struct llmq_limiter *lim = llmq_limiter_new(&cfg, &err);
    assert_non_null(lim);
    struct llmq_path p;
    llmq_path_init(&p, "acl", "m", "t", "u", &err);
    struct llmq_grant g;
    assert_int_equal(llmq_limiter_acquire(lim, &p, 5, LLMQ_PRIORITY_NORMAL, &g, &err), LLMQ_OK);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    assert_int_equal(llmq_limiter_settle(lim, g.reservation, 3, &err), LLMQ_OK);
    llmq_limiter_free(lim);

    struct llmq_limiter_config bad = {.redis_url = bad_url};
    assert_null(llmq_limiter_new(&bad, &err));
    assert_int_equal(err.rc, LLMQ_EREDIS);
    assert_null(strstr(err.msg, "wrong-secret"));
}

static void on_grant(void *privdata, enum llmq_rc rc, const struct llmq_grant *g,
                     const struct llmq_error *err)
{
    (void)err;
    int *out = privdata;
    *out = rc == LLMQ_OK && g != NULL && g->decision == LLMQ_GRANTED ? 1 : -1;
}

static void test_async_limiter_as_acl_user(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = good_url};
    struct llmq_alimiter *al = llmq_alimiter_new(loop, &cfg, &err);
    long long deadline = llmq_test_now_ms() + 5000;
    while (!llmq_alimiter_ready(al) && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
    assert_true(llmq_alimiter_ready(al));
    struct llmq_path p;
    llmq_path_init(&p, "acl", "m", NULL, NULL, &err);
    int got = 0;
    assert_int_equal(llmq_alimiter_acquire(al, &p, 1, LLMQ_PRIORITY_HIGH, on_grant, &got), LLMQ_OK);
    while (got == 0 && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
    assert_int_equal(got, 1);
    llmq_alimiter_free(al);
    ev_loop_destroy(loop);
}

static void test_cli_as_acl_user(void **state)
{
    (void)state;
    /* cli_run sets LLMQ_REDIS_URL to the fixture; --redis overrides it. */
    const char *set[] = {"llmq", "limits",  "set",    "gpt-4o", "--rpm",
                         "10",   "--redis", good_url, NULL};
    struct cli_run r = cli_run("acl", set);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    const char *status[] = {"llmq", "status", "--redis", good_url, NULL};
    r = cli_run("acl", status);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "gpt-4o"));
    cli_free(&r);
    const char *bad[] = {"llmq", "limits", "get", "--redis", bad_url, NULL};
    r = cli_run("acl", bad);
    assert_int_equal(r.status, 1);
    assert_null(strstr(r.err, "wrong-secret"));
    assert_non_null(strstr(r.err, "AUTH"));
    cli_free(&r);
}

/* Runs examples/producer.c (the public producer API, llmq.h) against url
 * for account "acl", enqueueing jobs prefix-1..3 without waiting; returns
 * its exit status, stderr in err (new). (The producer API runs in a child:
 * llmq.h and llmq/limiter.h cannot be included in one file, both declaring
 * enum llmq_priority.) */
static int run_producer(const char *url, const char *prefix, char **err)
{
    char bin[1024], err_path[128];
    snprintf(bin, sizeof(bin), "%s/../examples/example-producer", getenv("LLMQ_BIN_DIR"));
    snprintf(err_path, sizeof(err_path), "/tmp/llmq-acl-producer-%d.err", (int)getpid());
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        if (freopen("/dev/null", "w", stdout) == NULL || freopen(err_path, "w", stderr) == NULL)
            _exit(127);
        setenv("LLMQ_REDIS_URL", url, 1);
        setenv("LLMQ_ACCOUNT", "acl", 1);
        execl(bin, bin, prefix, "0", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    *err = cli_slurp(err_path);
    unlink(err_path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A producer as the ACL user: its jobs are written (read back as admin); a
 * wrong password fails it without echoing the password. */
static void test_producer_as_acl_user(void **state)
{
    (void)state;
    char *err = NULL;
    int st = run_producer(good_url, "aclp", &err);
    if (st != 0 || strstr(err, "aclp-3 enqueued") == NULL) /* WAIT_MS 0: no waiting */
        fail_msg("producer as the ACL user: exit %d, stderr: %s", st, err);
    free(err);
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    assert_true(c != NULL && !c->err);
    redisReply *r = redisCommand(c, "AUTH admin adminpw");
    freeReplyObject(r);
    for (int i = 1; i <= 3; i++) {
        char id[32];
        snprintf(id, sizeof(id), "aclp-%d", i);
        char *st = llmq_test_job_field(c, "llmq:{acl}:", id, "state");
        assert_non_null(st);
        assert_string_equal(st, "queued");
        free(st);
    }
    redisFree(c);

    st = run_producer(bad_url, "aclbad", &err);
    assert_int_equal(st, 1);
    assert_null(strstr(err, "wrong-secret"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_limiter_as_acl_user),
        cmocka_unit_test(test_async_limiter_as_acl_user),
        cmocka_unit_test(test_cli_as_acl_user),
        cmocka_unit_test(test_producer_as_acl_user),
    };
    return cmocka_run_group_tests_name("redis_acl_user", tests, setup, teardown);
}
