/* examples/service_inline_limiter.c does what its header says, against the
 * fixture redis-server: waits exactly as told when the shared window is full,
 * reports never-fits and sheds past --max-wait-ms, fails open or closed when
 * Redis is unreachable, and against openai-sim settles the real usage and
 * handles a 429 by refunding and pausing the model bucket. */
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

#include "openai_sim_support.h"
#include "testsupport.h"

struct run {
    int code;
    char *out;
};

/* Runs the example with args (NULL-ended) and env OPENAI_API_KEY=key (NULL:
 * unset); returns its exit code and stdout (new). */
static struct run run_example(const char *key, const char *const *args)
{
    char path[1024], out[] = "/tmp/llmq-inline-XXXXXX";
    snprintf(path, sizeof(path), "%s/../examples/example-service_inline_limiter",
             getenv("LLMQ_BIN_DIR"));
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    const char *argv[32] = {path};
    int argc = 1;
    for (int i = 0; args[i] != NULL && argc < 31; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        dup2(fd, 1);
        unsetenv("OPENAI_BASE_URL");
        unsetenv("LLMQ_REDIS_URL");
        if (key != NULL)
            setenv("OPENAI_API_KEY", key, 1);
        else
            unsetenv("OPENAI_API_KEY");
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(fd);
    int st = 0;
    waitpid(pid, &st, 0);
    struct run r = {.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128};
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    r.out = calloc(1, 65536);
    size_t n = fread(r.out, 1, 65535, f);
    r.out[n] = '\0';
    fclose(f);
    unlink(out);
    return r;
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Sum of U over "settled I usage=U" lines. */
static long long settled_sum(const char *text)
{
    long long sum = 0;
    for (const char *p = strstr(text, "settled "); p != NULL; p = strstr(p + 1, "settled ")) {
        const char *u = strstr(p, "usage=");
        assert_non_null(u);
        sum += strtoll(u + 6, NULL, 10);
    }
    return sum;
}

static void set_limit(redisContext *c, const char *account, const char *pairs)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "HSET llmq:{%s}:limit:gpt-4o-mini %s", account, pairs);
    redisReply *r = redisCommand(c, cmd);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

static void test_waits_exactly_then_serves(void **state)
{
    (void)state;
    char account[96];
    llmq_test_unique_name(account, sizeof(account), "inline");
    redisContext *c = llmq_test_redis_connect();
    set_limit(c, account, "requests 2 tokens 100000 period_ms 1500");
    /* The wait asserted is the window's own: no arrival guard. */
    freeReplyObject(redisCommand(c, "HSET llmq:{%s}:policy window_guard_ms 0", account));
    long long t0 = llmq_test_now_ms();
    const char *args[] = {"--redis", llmq_test_redis_url(), "--account",
                          account,   "--dry-run",           NULL};
    struct run r = run_example(NULL, args);
    long long took_ms = llmq_test_now_ms() - t0;
    assert_int_equal(r.code, 0);
    assert_int_equal(count(r.out, "granted "), 3);
    assert_int_equal(count(r.out, "local=0"), 3);
    assert_int_equal(count(r.out, "settled "), 3);
    assert_int_equal(count(r.out, "waiting 3 "), 1); /* the third waited for the window */
    assert_non_null(strstr(r.out, "reason=requests"));
    assert_non_null(strstr(r.out, "summary served=3 shed=0 never_fits=0 errors=0"));
    const char *w = strstr(r.out, "wait_ms=");
    long long wait_ms = strtoll(w + 8, NULL, 10);
    assert_true(wait_ms > 0 && wait_ms <= 1500);
    assert_true(took_ms >= wait_ms); /* it slept the wait it was given */
    free(r.out);
    redisFree(c);
}

static void test_never_fits_and_shed(void **state)
{
    (void)state;
    char account[96];
    llmq_test_unique_name(account, sizeof(account), "inline");
    redisContext *c = llmq_test_redis_connect();
    set_limit(c, account, "tokens 20 period_ms 60000");
    const char *a1[] = {"--redis", llmq_test_redis_url(), "--account", account, "--dry-run", "hi",
                        NULL};
    struct run r = run_example(NULL, a1);
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.out, "never-fits 1 cost="));
    assert_non_null(strstr(r.out, "limit=20 bucket=gpt-4o-mini"));
    assert_int_equal(count(r.out, "granted "), 0);
    free(r.out);

    set_limit(c, account, "requests 1 tokens 100000 period_ms 60000");
    const char *a2[] = {"--redis",   llmq_test_redis_url(),
                        "--account", account,
                        "--dry-run", "--max-wait-ms",
                        "1000",      "one",
                        "two",       NULL};
    r = run_example(NULL, a2);
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.out, "settled 1 "));
    assert_non_null(strstr(r.out, "shed 2 wait_ms="));
    assert_non_null(strstr(r.out, "summary served=1 shed=1 never_fits=0 errors=0"));
    free(r.out);
    redisFree(c);
}

static void test_redis_down_fail_open_and_closed(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", llmq_test_free_port());
    const char *open_args[] = {"--redis", url, "--account", "down", "--dry-run", "hi", NULL};
    struct run r = run_example(NULL, open_args);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "granted 1 cost="));
    assert_non_null(strstr(r.out, "local=1")); /* decided by the local limiter */
    assert_non_null(strstr(r.out, "settled 1 "));
    free(r.out);
    const char *closed_args[] = {"--redis",       url,         "--account", "down",
                                 "--fail-closed", "--dry-run", "hi",        NULL};
    r = run_example(NULL, closed_args);
    assert_int_equal(r.code, 1);
    assert_int_equal(count(r.out, "granted "), 0);
    free(r.out);
    /* no key and no --dry-run: a usage error, nothing called */
    const char *nokey_args[] = {"--redis", url, "hi", NULL};
    r = run_example(NULL, nokey_args);
    assert_int_equal(r.code, 2);
    free(r.out);
}

/* The API allows 2 requests per 2 s, the shared bucket 10 a minute: the third
 * call gets a 429, is refunded, the bucket paused for the hint, then served. */
static void test_openai_sim_usage_and_429(void **state)
{
    (void)state;
    static const char *const sim_args[] = {
        "--rpm", "2", "--period-ms", "2000", "--api-key", "test-key-placeholder", NULL};
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    char account[96], base[64];
    llmq_test_unique_name(account, sizeof(account), "inline");
    snprintf(base, sizeof(base), "http://127.0.0.1:%d/v1", sim.port);
    redisContext *c = llmq_test_redis_connect();
    /* settle usage: the bucket is to hold what the API reported. */
    set_limit(c, account, "requests 10 tokens 100000 period_ms 60000 settle usage");
    const char *args[] = {
        "--redis", llmq_test_redis_url(), "--account", account, "--base-url", base, "a", "b", "c",
        NULL};
    struct run r = run_example("test-key-placeholder", args);
    assert_int_equal(r.code, 0);
    assert_int_equal(count(r.out, "settled "), 3);
    assert_non_null(strstr(r.out, "refunded 3 status=429"));
    assert_non_null(strstr(r.out, "reason=pause"));
    /* the bucket holds exactly the usage the API reported (the 429 refunded) */
    redisReply *rep = redisCommand(c, "HGET llmq:{%s}:limit:gpt-4o-mini tok", account);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_int_equal(strtoll(rep->str, NULL, 10), settled_sum(r.out));
    freeReplyObject(rep);
    free(r.out);
    /* a wrong key: 401 is refunded and reported, not retried */
    const char *bad[] = {
        "--redis", llmq_test_redis_url(), "--account", account, "--base-url", base, "a", NULL};
    r = run_example("test-key-wrong", bad);
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.out, "refunded 1 status=401"));
    free(r.out);
    redisFree(c);
    assert_int_equal(sim_proc_stop(&sim), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waits_exactly_then_serves),
        cmocka_unit_test(test_never_fits_and_shed),
        cmocka_unit_test(test_redis_down_fail_open_and_closed),
        cmocka_unit_test(test_openai_sim_usage_and_429),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
