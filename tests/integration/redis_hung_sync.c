/* The synchronous clients against a hung Redis (redis-server stopped with
 * SIGSTOP: connects succeed, nothing is answered): `llmq status` exits 1
 * (README "Exit codes": Redis unreachable) saying "Redis at HOST:PORT did not
 * answer within 5 s", and the producer API returns LLMQ_EREDIS with that
 * message for its own timeout, then works again on the same handle after
 * SIGCONT. Uses a private redis-server; the CLI is waited for with a
 * deadline, so a hang fails the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobs_cli_run.h"
#include "llmq/llmq.h"
#include "testsupport.h"

static struct llmq_test_redis server;

/* cli_finish with a deadline (against hanging): status -1 when it did not
 * end in time (it is then killed). */
static struct cli_run cli_finish_within(pid_t pid, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    int hung = 0;
    for (;;) {
        siginfo_t info;
        memset(&info, 0, sizeof(info));
        /* WNOWAIT: left for cli_finish to reap */
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
            break;
        if (llmq_test_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            hung = 1;
            break;
        }
        usleep(20000);
    }
    struct cli_run r = cli_finish(pid);
    if (hung)
        r.status = -1;
    return r;
}

static void test_cli_status_names_the_hung_server(void **state)
{
    (void)state;
    char want[128];
    snprintf(want, sizeof(want), "Redis at 127.0.0.1:%d did not answer within 5 s", server.port);
    assert_int_equal(kill(server.pid, SIGSTOP), 0);
    const char *argv[] = {"llmq", "status", NULL};
    struct cli_run r = cli_finish_within(cli_start("hung", argv), 60000);
    kill(server.pid, SIGCONT);
    if (strstr(r.err, want) == NULL)
        fprintf(stderr, "llmq status said: %s\n", r.err);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, want));
    cli_free(&r);
    /* and once Redis answers again, the same command works */
    r = cli_finish_within(cli_start("hung", argv), 60000);
    assert_int_equal(r.status, 0);
    cli_free(&r);
}

static void test_producer_returns_eredis_with_the_bound(void **state)
{
    (void)state;
    struct llmq_producer_options o = {
        .redis_url = server.url, .account = "hung", .timeout_ms = 1000};
    struct llmq_producer *p = NULL;
    struct llmq_error err = {0};
    assert_int_equal(llmq_producer_open(&o, &p, &err), LLMQ_OK);
    const char *body = "{\"model\":\"text-embedding-3-small\",\"input\":\"x\"}";
    struct llmq_job_options jo = {.job_id = "hung-1"};
    struct llmq_enqueue_result res;
    assert_int_equal(kill(server.pid, SIGSTOP), 0);
    enum llmq_rc rc = llmq_producer_enqueue(p, "/v1/embeddings", body, &jo, &res, &err);
    kill(server.pid, SIGCONT);
    char want[128];
    snprintf(want, sizeof(want), "Redis at 127.0.0.1:%d did not answer within 1 s", server.port);
    if (strstr(err.msg, want) == NULL)
        fprintf(stderr, "llmq_producer_enqueue said: %s\n", err.msg);
    assert_int_equal(rc, LLMQ_EREDIS);
    assert_non_null(strstr(err.msg, want));
    /* the same handle reconnects; the same id is not taken twice */
    rc = llmq_producer_enqueue(p, "/v1/embeddings", body, &jo, &res, &err);
    assert_true(rc == LLMQ_OK || rc == LLMQ_EDUPLICATE);
    llmq_producer_close(p);
}

static int setup(void **state)
{
    (void)state;
    if (llmq_test_redis_start(&server, NULL) != 0)
        return -1;
    setenv("LLMQ_TEST_REDIS_URL", server.url, 1); /* the CLI's server */
    return 0;
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
        cmocka_unit_test(test_cli_status_names_the_hung_server),
        cmocka_unit_test(test_producer_returns_eredis_with_the_bound),
    };
    return cmocka_run_group_tests_name("redis_hung_sync", tests, setup, teardown);
}
