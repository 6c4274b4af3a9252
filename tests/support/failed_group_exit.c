/* A test process whose cmocka group failed ends there, with _exit: no
 * LeakSanitizer report on top of the failure.
 *
 * A failed assertion leaves the test function through cmocka's longjmp, so
 * whatever the function held at that moment (a JSON reply, a connection,
 * an array of results) is unreachable by design, and LeakSanitizer's check
 * at exit reported it as leaks: a failed run printed pages of leak report
 * and, under abort_on_error, ended in SIGABRT instead of its failure count
 * (issue 33 item 7: worker_exact_limits after 10 limit 429s). The leak
 * check is an atexit handler; _exit skips it, and skips nothing else a test
 * needs: its group and case teardowns have run, stdio is flushed here, and
 * its child processes die with it (llmq_test_fork's parent-death signal).
 * A passing run returns as before, its leak check intact.
 *
 * Every test executable links with -Wl,--wrap=_cmocka_run_group_tests
 * (tests/CMakeLists.txt llmq_add_test), so its cmocka_run_group_tests(...)
 * and cmocka_run_group_tests_name(...) calls come here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>
#include <stdio.h>
#include <unistd.h>

/* cmocka's own runner (the linker's name for the wrapped symbol). */
int __real__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);

/* Runs the group as cmocka does; returns 0 when every case passed, else
 * ends the process with the number of failed cases (at most 255) as its
 * exit status, as the test's main would have returned it. */
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown);
int __wrap__cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                                   const size_t num_tests, CMFixtureFunction group_setup,
                                   CMFixtureFunction group_teardown)
{
    int failed =
        __real__cmocka_run_group_tests(group_name, tests, num_tests, group_setup, group_teardown);
    if (failed == 0)
        return 0;
    fflush(NULL);
    _exit(failed < 255 ? failed : 255);
}
