/* llmq-worker's command line against the README's exit-code table: --version
 * and --help print and exit 0; a malformed Redis URL, an unknown option or a
 * bad value is a usage error (2) with a line naming the setting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

/* Runs llmq-worker with argv (NULL-ended, without argv[0]); returns its exit
 * code and its stdout+stderr in out (new). */
static int run(const char *const *args, char **out)
{
    char log[128];
    snprintf(log, sizeof(log), "/tmp/llmq-wopts-%d.log", (int)getpid());
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        FILE *f = fopen(log, "w");
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
        setenv("OPENAI_API_KEY", WORKER_TEST_KEY, 1);
        unsetenv("LLMQ_REDIS_URL");
        const char *argv[16] = {"llmq-worker"};
        int n = 1;
        for (int i = 0; args[i] != NULL && n < 15; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(llmq_test_bin("llmq-worker", 0), (char *const *)argv);
        _exit(127);
    }
    int rc = worker_wait(pid, 30000);
    *out = cli_slurp(log);
    unlink(log);
    return rc;
}

static void test_version_and_help(void **state)
{
    (void)state;
    char *out;
    const char *v[] = {"--version", NULL};
    assert_int_equal(run(v, &out), 0);
    assert_non_null(strstr(out, "llmq-worker "));
    assert_non_null(strchr(out, '.'));
    free(out);
    const char *h[] = {"--help", NULL};
    assert_int_equal(run(h, &out), 0);
    assert_non_null(strstr(out, "usage: llmq-worker"));
    assert_non_null(strstr(out, "--version"));
    free(out);
}

static void test_usage_errors_exit_2(void **state)
{
    (void)state;
    static const char *const cases[][3] = {
        {"--redis", "redis://127.0.0.1:99999/0", "--redis"},
        {"--redis", "http://127.0.0.1:6379", "--redis"},
        {"--redis", "redis://127.0.0.1:6379/notanumber", "--redis"},
        {"--concurrency", "0", "--concurrency"},
        {"--redis-timeout-ms", "50", "--redis-timeout-ms"},
        {"--redis-timeout-ms", "soon", "--redis-timeout-ms"},
        {"--no-such-option", NULL, "invalid option"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *args[3] = {cases[i][0], cases[i][1], NULL};
        char *out;
        int rc = run(args, &out);
        print_message("%s %s -> %d: %s", cases[i][0], cases[i][1] ? cases[i][1] : "", rc, out);
        assert_int_equal(rc, 2);
        assert_non_null(strstr(out, cases[i][2]));
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_help),
        cmocka_unit_test(test_usage_errors_exit_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
