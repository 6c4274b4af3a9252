/* Helpers shared by llmq's tests: the fixture redis-server, private
 * redis-servers a test may stop and restart, free ports, unique names. */
#ifndef LLMQ_TESTSUPPORT_H
#define LLMQ_TESTSUPPORT_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <sys/types.h>

/* URL of the shared test redis-server: $LLMQ_TEST_REDIS_URL, else the URL in
 * the file $LLMQ_TEST_REDIS_URL_FILE (the ctest fixture). Aborts the test
 * process with a message when neither is available. Returns a static string. */
const char *llmq_test_redis_url(void);

/* A connected synchronous context to llmq_test_redis_url(); aborts on failure. */
redisContext *llmq_test_redis_connect(void);

/* The integer a command answers (fmt and arguments as redisCommand's; a
 * string reply, as HGET's, is read as a number), or -1 for no reply, an error
 * or another type. */
long long llmq_test_redis_int(redisContext *c, const char *fmt, ...);

/* A loopback TCP port that was free a moment ago. */
int llmq_test_free_port(void);

/* Writes "<prefix>-<pid>-<counter>-<time>" into buf: a name no other test or
 * run uses, for accounts and job ids. */
void llmq_test_unique_name(char *buf, size_t n, const char *prefix);

/* A private redis-server the test controls. */
struct llmq_test_redis {
    pid_t pid;
    int port;
    char url[64];
    char dir[128];
};

/* Starts redis-server on a free port (or on s->port if it is non-zero, for a
 * restart on the same address) with a scratch directory; extra_args (may be
 * NULL) is a space-separated list of extra options. Returns 0 when it answers
 * PING, -1 otherwise. */
int llmq_test_redis_start(struct llmq_test_redis *s, const char *extra_args);

/* Stops it (SIGCONT in case a test stopped it, SIGTERM, then SIGKILL after
 * 5 s) and waits for it. */
void llmq_test_redis_stop(struct llmq_test_redis *s);

/* Path of a built binary: $LLMQ_BIN_DIR/name (or $LLMQ_TEST_BIN_DIR/name when
 * in_tests is set). Returns a static buffer. */
const char *llmq_test_bin(const char *name, int in_tests);

/* fork() for a test's child processes (servers, workers, CLIs): the child
 * gets SIGKILL as soon as the test process ends, on every exit path (a
 * failed assertion, a crash, ctest's timeout), so a failing test never
 * leaves a redis-server, openai-sim or worker behind holding ctest's output
 * pipe open. Returns what fork() returns. Call it from the test's main
 * thread: the kernel ties the signal to the thread that forked. */
pid_t llmq_test_fork(void);

/* Waits up to timeout_ms (against hanging, not a timing check) for a server
 * started with `--port 0 --port-file path` to write its port there. When pid
 * is > 0 and that process ends first, it is reaped. Returns the port; 0 on
 * timeout; -1 when the process ended. Leaves the file in place. */
int llmq_test_wait_port_file(const char *path, pid_t pid, long long timeout_ms);

/* Monotonic milliseconds. */
long long llmq_test_now_ms(void);

#endif
