/* examples/producer.c runs as documented: enqueues three jobs, waits, prints
 * their results as a worker (here the stand-in) ends them; a second run
 * enqueues nothing new and finds the results at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "jobs_cli_run.h"
#include "jobs_fake_worker.h"
#include "redis/redis.h"
#include "testsupport.h"

static pid_t start_example(const char *account, const char *wait_ms, const char *out)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/../examples/example-producer", getenv("LLMQ_BIN_DIR"));
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        FILE *f = freopen(out, "w", stdout);
        (void)f;
        setenv("LLMQ_REDIS_URL", llmq_test_redis_url(), 1);
        setenv("LLMQ_ACCOUNT", account, 1);
        execl(path, path, "ex", wait_ms, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int finish(pid_t pid)
{
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_example(void **state)
{
    (void)state;
    char account[96], prefix[128], out[] = "/tmp/llmq-example-XXXXXX";
    close(mkstemp(out));
    llmq_test_unique_name(account, sizeof(account), "example");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    pid_t pid = start_example(account, "20000", out);
    redisContext *c = llmq_test_redis_connect();
    long ended = 0;
    long long t0 = llmq_test_now_ms();
    while (ended < 3 && llmq_test_now_ms() - t0 < 20000)
        ended += fake_worker_run(c, prefix, 10, 200, 0);
    assert_int_equal(finish(pid), 0);
    char *text = cli_slurp(out);
    assert_int_equal(cli_count_lines(text), 3);
    assert_non_null(strstr(text, "\"custom_id\":\"ex-1\""));
    assert_non_null(strstr(text, "\"custom_id\":\"ex-3\""));
    free(text);
    /* again: ids exist, results are there: it returns at once */
    assert_int_equal(finish(start_example(account, "5000", out)), 0);
    text = cli_slurp(out);
    assert_int_equal(cli_count_lines(text), 3);
    free(text);
    redisReply *r = redisCommand(c, "LLEN %sbacklog:normal", prefix);
    assert_int_equal(r->integer, 0); /* nothing new was queued */
    freeReplyObject(r);
    redisFree(c);
    unlink(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_example)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
