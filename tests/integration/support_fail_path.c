/* A failing test ends cleanly (issue 33 item 7): this test runs itself again
 * as a child whose one case starts a process (llmq_test_fork), holds heap
 * memory and then fails an assertion on purpose, the way a real failure
 * leaves a test mid-way. The child must end with its failure count (exit
 * 1): no LeakSanitizer report on what the failed case held (the leak check
 * is forced on in the child, with abort_on_error, as CI runs it), and its
 * process must be killed (SIGKILL) when the child ends, not left running
 * to hold ctest's output pipe. This process is the children's subreaper,
 * so it reaps the orphaned one and reads how it ended. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data_files.h"
#include "testsupport.h"

#define CHILD_ENV "LLMQ_TEST_FAIL_PATH_PID_FILE"

/* The child's case: a process started, memory held, an assertion failed
 * (planted: this case exists to fail). */
static void planted_failure(void **state)
{
    (void)state;
    pid_t sleeper = llmq_test_fork();
    if (sleeper == 0) {
        execlp("sleep", "sleep", "600", (char *)NULL);
        _exit(127);
    }
    FILE *f = fopen(getenv(CHILD_ENV), "w");
    assert_non_null(f);
    fprintf(f, "%d\n", (int)sleeper);
    fclose(f);
    char *held = malloc(4096); /* only this frame points to it */
    assert_non_null(held);
    memset(held, 'x', 4096);
    assert_int_equal(held[0], 'y'); /* the planted failure */
    free(held);
}

/* Waits up to timeout_ms (a bound against hanging) for pid, a child or an
 * orphan this process reaps; its wait status, or -1 when it did not end
 * (then it is killed). */
static int reap(pid_t pid, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    int st;
    while (llmq_test_now_ms() < deadline) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return st;
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void failed_case_ends_without_leak_report_or_process(void **state)
{
    (void)state;
    /* orphans of the child (its started process) become ours to reap */
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    char pid_file[64], log[64];
    snprintf(pid_file, sizeof(pid_file), "/tmp/llmq-failpath-%d.pid", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-failpath-%d.log", (int)getpid());
    unlink(pid_file);
    pid_t child = llmq_test_fork();
    if (child == 0) {
        FILE *f = fopen(log, "w");
        if (f == NULL)
            _exit(127);
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
        setenv(CHILD_ENV, pid_file, 1);
        /* the leak check on and fatal, whatever this run was given */
        setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1", 1);
        execl("/proc/self/exe", "support_fail_path", (char *)NULL);
        _exit(127);
    }
    int st = reap(child, 120000);
    char *out = llmq_test_read_file(log, NULL);
    char *pid_text = llmq_test_read_file(pid_file, NULL);
    pid_t sleeper = pid_text != NULL ? (pid_t)strtol(pid_text, NULL, 10) : 0;
    int sleeper_st = sleeper > 0 ? reap(sleeper, 30000) : -1;
    int reported = out != NULL && strstr(out, "LeakSanitizer") != NULL;
    int failed_named = out != NULL && strstr(out, "[  FAILED  ] planted_failure") != NULL;
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 1 || reported)
        fprintf(stderr, "the child's wait status %d; its output:\n%s\n", st, out ? out : "");
    free(out);
    free(pid_text);
    unlink(log);
    unlink(pid_file);
    /* the child failed its one case, and said so */
    assert_int_not_equal(st, -1);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    assert_true(failed_named);
    assert_false(reported);
    /* the process it started was killed when it ended */
    assert_true(sleeper > 0);
    assert_int_not_equal(sleeper_st, -1);
    assert_true(WIFSIGNALED(sleeper_st));
    assert_int_equal(WTERMSIG(sleeper_st), SIGKILL);
}

int main(void)
{
    if (getenv(CHILD_ENV) != NULL) {
        const struct CMUnitTest child[] = {
            cmocka_unit_test(planted_failure),
        };
        return cmocka_run_group_tests(child, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(failed_case_ends_without_leak_report_or_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
