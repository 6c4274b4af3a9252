/* Redis connection setup failures in the worker, on a private redis-server
 * with requirepass:
 *   - a database index Redis rejects (/99): the worker never falls through
 *     to database 0 (jobs queued there stay untouched), logs the refused
 *     SELECT, and a batch-mode worker (--exit-when-idle-ms) exits 1;
 *   - a wrong password (WRONGPASS) and no password (NOAUTH): logged with the
 *     server's words, /readyz says why, exit 1;
 *   - nothing listening (connection refused): logged, rate-limited (one line
 *     for a run of retries with the same cause), exit 1;
 *   - the CLI (sync client) refuses the same URL with the SELECT error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define PASSWORD "s3cret-pw"

static struct llmq_test_redis server;
static char good_url[128], db99_url[128], wrong_pw_url[128], no_pw_url[128];

static int setup(void **state)
{
    (void)state;
    if (llmq_test_redis_start(&server, NULL) != 0)
        return -1;
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    redisReply *r = c && !c->err ? redisCommand(c, "CONFIG SET requirepass %s", PASSWORD) : NULL;
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (r != NULL)
        freeReplyObject(r);
    if (c != NULL)
        redisFree(c);
    if (!ok)
        return -1;
    snprintf(good_url, sizeof(good_url), "redis://:%s@127.0.0.1:%d/0", PASSWORD, server.port);
    snprintf(db99_url, sizeof(db99_url), "redis://:%s@127.0.0.1:%d/99", PASSWORD, server.port);
    snprintf(wrong_pw_url, sizeof(wrong_pw_url), "redis://:not-the-password@127.0.0.1:%d/0",
             server.port);
    snprintf(no_pw_url, sizeof(no_pw_url), "redis://127.0.0.1:%d/0", server.port);
    /* The CLI and the workers the helpers start use this server (db 0). */
    setenv("LLMQ_TEST_REDIS_URL", good_url, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    llmq_test_redis_stop(&server);
    return 0;
}

static redisContext *connect_db0(void)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    assert_true(c != NULL && !c->err);
    redisReply *r = redisCommand(c, "AUTH %s", PASSWORD);
    assert_true(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    return c;
}

/* Runs a batch-mode worker for account with redis_url; returns its exit code. */
static int run_batch_worker(const char *account, const struct sim_proc *sim, const char *log,
                            const char *redis_url, const char *const *more)
{
    const char *args[16] = {"--redis", redis_url, "--exit-when-idle-ms", "1500"};
    int n = 4;
    for (int i = 0; more != NULL && more[i] != NULL; i++)
        args[n++] = more[i];
    args[n] = NULL;
    return worker_wait(worker_start(account, sim, log, args), 60000);
}

static void test_rejected_db_never_falls_back_to_db0(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], prefix[128], key[192];
    llmq_test_unique_name(account, sizeof(account), "db99");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-db99-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-db99-%d.log", (int)getpid());
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    worker_write_jobs(jobs, "d", 4, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs); /* into database 0 */

    assert_int_equal(run_batch_worker(account, &sim, log, db99_url, NULL), 1);

    /* Database 0 untouched: every job still waiting in its key's queue
     * (backlog:normal counts them), none delivered: dispatch delivers through
     * q:normal, which holds no entry. */
    redisContext *c = connect_db0();
    snprintf(key, sizeof(key), "%sbacklog:normal", prefix);
    assert_int_equal(redis_int(c, "LLEN %s", key, NULL), 4);
    snprintf(key, sizeof(key), "%sq:normal", prefix);
    assert_int_equal(redis_int(c, "XLEN %s", key, NULL), 0);
    for (int i = 0; i < 4; i++) {
        char id[32];
        snprintf(id, sizeof(id), "d-%d", i);
        char *st = llmq_test_job_field(c, prefix, id, "state");
        assert_non_null(st);
        assert_string_equal(st, "queued");
        free(st);
    }
    redisFree(c);
    size_t n = 0;
    free(sim_log_read(sim.log_file, &n));
    assert_int_equal(n, 0); /* no API call */
    assert_int_equal(sim_proc_stop(&sim), 0);
    /* The cause, and that Redis was never reached. */
    assert_true(worker_log_count(log, "SELECT refused: ERR DB index is out of range") >= 1);
    assert_int_equal(worker_log_count(log, "redis connected"), 0);
    assert_true(worker_log_count(log, "never reached redis for account") >= 1);

    /* The CLI (sync connection) says the same. */
    char *url_env = strdup(good_url);
    setenv("LLMQ_TEST_REDIS_URL", db99_url, 1);
    const char *argv[] = {"llmq", "status", "--redis", db99_url, NULL};
    struct cli_run cr = cli_run(account, argv);
    assert_int_equal(cr.status, 1);
    assert_non_null(strstr(cr.err, "SELECT"));
    assert_non_null(strstr(cr.err, "DB index is out of range"));
    cli_free(&cr);
    setenv("LLMQ_TEST_REDIS_URL", url_env, 1);
    free(url_env);
    unlink(jobs);
    unlink(log);
}

/* A worker with a bad password: logged with the server's reason, /readyz
 * says it, and the batch run exits 1. */
static void check_auth_failure(const char *url, const char *want)
{
    char account[64], log[128], port_s[16];
    llmq_test_unique_name(account, sizeof(account), "auth");
    snprintf(log, sizeof(log), "/tmp/llmq-auth-%d.log", (int)getpid());
    int port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", port);
    struct sim_proc nosim = {.port = 9}; /* never called */
    const char *args[] = {"--redis",   url, "--metrics-port", port_s, "--metrics-host",
                          "127.0.0.1", NULL};
    pid_t w = worker_start(account, &nosim, log, args);
    struct worker_page pg = worker_http_wait_for(port, "/readyz", want, 30000);
    assert_int_equal(pg.status, 503);
    assert_non_null(strstr(pg.body, want));
    assert_non_null(strstr(pg.body, "redis not connected"));
    assert_null(strstr(pg.body, PASSWORD));
    free(pg.body);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 30000), 0);
    assert_true(worker_log_count(log, want) >= 1);
    assert_int_equal(worker_log_count(log, "not-the-password"), 0);
    assert_int_equal(worker_log_count(log, PASSWORD), 0);
    unlink(log);

    /* Batch mode: never reached Redis is a failure. */
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    assert_int_equal(run_batch_worker(account, &sim, log, url, NULL), 1);
    assert_true(worker_log_count(log, want) >= 1);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(log);
}

static void test_wrong_password(void **state)
{
    (void)state;
    check_auth_failure(wrong_pw_url, "WRONGPASS");
}

static void test_no_password(void **state)
{
    (void)state;
    check_auth_failure(no_pw_url, "NOAUTH");
}

/* Nothing listens: every retry fails the same way, logged once (the same
 * cause repeats at most every 30 s) with the cause. */
static void test_refused_logged_rate_limited(void **state)
{
    (void)state;
    char account[64], log[128], url[64];
    llmq_test_unique_name(account, sizeof(account), "refused");
    snprintf(log, sizeof(log), "/tmp/llmq-refused-%d.log", (int)getpid());
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", llmq_test_free_port());
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    const char *more[] = {"--exit-when-idle-ms", "3000", NULL};
    assert_int_equal(run_batch_worker(account, &sim, log, url, more), 1);
    assert_int_equal(sim_proc_stop(&sim), 0);
    /* Two connections (commands, wake-up read), each at least one line. */
    int worker_lines = worker_log_count(log, "worker: redis 127.0.0.1");
    int wake_lines = worker_log_count(log, "worker-wake: redis 127.0.0.1");
    assert_true(worker_log_count(log, "Connection refused") >= 2);
    assert_int_equal(worker_lines, 1);
    assert_int_equal(wake_lines, 1);
    assert_true(worker_log_count(log, " warn ") >= 2);
    unlink(log);
}

/* A name that does not resolve: logged as such. */
static void test_unknown_host(void **state)
{
    (void)state;
    char account[64], log[128];
    llmq_test_unique_name(account, sizeof(account), "nxhost");
    snprintf(log, sizeof(log), "/tmp/llmq-nxhost-%d.log", (int)getpid());
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    assert_int_equal(
        run_batch_worker(account, &sim, log, "redis://no-such-host.invalid:6379/0", NULL), 1);
    assert_int_equal(sim_proc_stop(&sim), 0);
    assert_true(worker_log_count(log, "cannot connect") >= 1);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejected_db_never_falls_back_to_db0),
        cmocka_unit_test(test_wrong_password),
        cmocka_unit_test(test_no_password),
        cmocka_unit_test(test_refused_logged_rate_limited),
        cmocka_unit_test(test_unknown_host),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
