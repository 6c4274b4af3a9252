/* A SIGTERM or SIGINT that arrives while the worker is still starting (here:
 * reading its key file, before it has touched Redis or its loop) leads to the
 * same clean shutdown as one that arrives later: exit 0, the drain is logged,
 * and the queued jobs stay queued, none taken, none charged an attempt.
 *
 * The key file is a FIFO, so the worker is held inside its startup for as
 * long as the test wants: opening the FIFO for writing without blocking
 * succeeds only once the worker has opened it for reading. The signal is sent
 * then, and the key written after it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define JOBS 5

/* Opens the FIFO's writing end once the worker reads it; -1 on timeout. */
static int open_when_read(const char *fifo, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    while (llmq_test_now_ms() < deadline) {
        int fd = open(fifo, O_WRONLY | O_NONBLOCK);
        if (fd >= 0)
            return fd;
        assert_int_equal(errno, ENXIO); /* no reader yet */
        usleep(5000);
    }
    return -1;
}

static void signal_while_starting(int sig)
{
    char account[64], jobs[128], log[128], fifo[128], prefix[128], key[256];
    llmq_test_unique_name(account, sizeof(account), "sigstart");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-sigstart-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "s", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-sigstart-%d.log", (int)getpid());
    snprintf(fifo, sizeof(fifo), "/tmp/llmq-sigstart-%d.key", (int)getpid());
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *args[] = {"--account", account, "--api-key-file", fifo, NULL};
    pid_t w = worker_start(account, &sim, log, args);

    int fd = open_when_read(fifo, 30000);
    assert_true(fd >= 0);
    assert_int_equal(worker_log_count(log, "serving account"), 0); /* still starting */
    assert_int_equal(kill(w, sig), 0);
    static const char key_line[] = WORKER_TEST_KEY "\n";
    assert_int_equal(write(fd, key_line, sizeof(key_line) - 1), (ssize_t)sizeof(key_line) - 1);
    close(fd);

    assert_int_equal(worker_wait(w, 30000), 0);
    char said[64];
    snprintf(said, sizeof(said), "signal %d: stopping", sig);
    assert_int_equal(worker_log_count(log, said), 1);
    assert_int_equal(worker_log_count(log, "draining"), 1);

    /* Nothing lost: every job still queued, none in hand, none attempted. */
    redisContext *c = llmq_test_redis_connect();
    snprintf(key, sizeof(key), "%sq:normal", prefix);
    redisReply *p = redisCommand(c, "XPENDING %s workers", key);
    assert_true(p != NULL && p->type == REDIS_REPLY_ARRAY && p->elements >= 1);
    assert_int_equal(p->element[0]->integer, 0);
    freeReplyObject(p);
    for (int i = 0; i < JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "s-%d", i);
        char *st = llmq_test_job_field(c, prefix, id, "state");
        assert_non_null(st);
        assert_string_equal(st, "queued");
        free(st);
        assert_int_equal(llmq_test_job_int(c, prefix, id, "attempts", 0), 0);
    }
    redisFree(c);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(fifo);
    unlink(jobs);
    unlink(log);
}

static void test_sigterm_while_starting_exits_clean(void **state)
{
    (void)state;
    signal_while_starting(SIGTERM);
}

static void test_sigint_while_starting_exits_clean(void **state)
{
    (void)state;
    signal_while_starting(SIGINT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm_while_starting_exits_clean),
        cmocka_unit_test(test_sigint_while_starting_exits_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
