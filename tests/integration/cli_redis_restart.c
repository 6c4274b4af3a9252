/* The CLI across a restart of its Redis (a private redis-server with AOF,
 * stopped and started again on the same port and directory):
 * - `llmq status` counts what is really queued: after every job ended and
 *   Redis came back from its AOF, nothing is shown as queued;
 * - `llmq enqueue --wait` rides out a Redis that is gone for a few seconds
 *   (it reconnects with backoff, as the workers do) and still prints every
 *   result once; and when Redis stays away past its bound it gives up with
 *   exit 1 and says how to resume (`llmq results --wait ...`). */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs_cli_run.h"
#include "jobs_fake_worker.h"
#include "redis/redis.h"
#include "testsupport.h"

/* Writes n embedding jobs "<tag><i>" to a new temp file; returns its path. */
static char *write_jobs(const char *tag, int n)
{
    char *path = strdup("/tmp/llmq-restart-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < n; i++)
        fprintf(f,
                "{\"custom_id\":\"%s%d\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":"
                "\"text-embedding-3-small\",\"input\":\"x %d\"}}\n",
                tag, i, i);
    fclose(f);
    return path;
}

static void restart(struct llmq_test_redis *rs, const char *args)
{
    llmq_test_redis_stop(rs);
    assert_int_equal(llmq_test_redis_start(rs, args), 0);
}

/* Sum of "queued" over the priorities of `llmq status --json`. */
static long long status_queued(const char *account, const char *url)
{
    const char *argv[] = {"llmq", "status", "--json", "--redis", url, NULL};
    struct cli_run r = cli_run(account, argv);
    if (r.status != 0)
        fail_msg("status: exit %d: %s", r.status, r.err);
    json_t *o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    long long n = 0;
    const char *prio;
    json_t *q;
    json_object_foreach(json_object_get(o, "queues"), prio, q) n +=
        json_integer_value(json_object_get(q, "queued"));
    json_decref(o);
    cli_free(&r);
    return n;
}

static void test_status_after_aof_restart(void **state)
{
    (void)state;
    static const char aof[] = "--appendonly yes --appendfsync always";
    struct llmq_test_redis rs = {0};
    assert_int_equal(llmq_test_redis_start(&rs, aof), 0);
    char account[64], prefix[128];
    llmq_test_unique_name(account, sizeof(account), "aof");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    char *path = write_jobs("a", 50);
    const char *enq[] = {"llmq", "enqueue", "--quiet", "--redis", rs.url, path, NULL};
    struct cli_run r = cli_run(account, enq);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    assert_int_equal(status_queued(account, rs.url), 50);
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    assert_non_null(c);
    long ended = 0;
    while (ended < 50) {
        long got = fake_worker_run(c, prefix, 16, 1000, 0);
        assert_true(got > 0);
        ended += got;
    }
    redisFree(c);
    assert_int_equal(status_queued(account, rs.url), 0);
    restart(&rs, aof);
    long long q = status_queued(account, rs.url);
    if (q != 0)
        fail_msg("after the restart status shows %lld queued; none exists", q);
    /* The group's read counter behind its last delivered id, as a replay of
     * the AOF leaves it when the group was created with its counter known
     * (the script's XREADGROUP is written to the AOF as XCLAIM ... LASTID,
     * which moves the id and not the counter): XINFO then reports a lag of
     * every entry ever added, all delivered and acknowledged. */
    c = redisConnect("127.0.0.1", rs.port);
    redisReply *g = redisCommand(c, "XINFO GROUPS %sq:normal", prefix);
    assert_int_equal(g->type, REDIS_REPLY_ARRAY);
    char last[64] = "";
    for (size_t k = 0; k + 1 < g->element[0]->elements; k += 2)
        if (strcmp(g->element[0]->element[k]->str, "last-delivered-id") == 0)
            snprintf(last, sizeof(last), "%s", g->element[0]->element[k + 1]->str);
    freeReplyObject(g);
    assert_true(last[0] != '\0');
    freeReplyObject(
        redisCommand(c, "XGROUP SETID %sq:normal workers %s ENTRIESREAD 0", prefix, last));
    assert_int_equal(llmq_test_redis_int(c, "XLEN %sq:normal", prefix), 50);
    redisFree(c);
    q = status_queued(account, rs.url);
    if (q != 0)
        fail_msg("with the group's counter behind, status shows %lld queued; none exists", q);
    llmq_test_redis_stop(&rs);
    unlink(path);
    free(path);
}

/* Lines in file path (0 when it does not exist yet). */
static size_t lines_in(const char *path)
{
    char *s = cli_slurp(path);
    size_t n = cli_count_lines(s);
    free(s);
    return n;
}

/* Ends up to n jobs of the account through Redis at port; returns how many. */
static long end_jobs(int port, const char *prefix, long n)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    assert_non_null(c);
    long ended = 0;
    for (int tries = 0; ended < n && tries < 200; tries++) {
        long got = fake_worker_run(c, prefix, n - ended, 100, 0);
        assert_true(got >= 0);
        ended += got;
    }
    redisFree(c);
    return ended;
}

/* Polls until path holds n lines (the waiter printed them), for at most 30 s. */
static void await_lines(const char *path, size_t n)
{
    for (int i = 0; i < 3000 && lines_in(path) < n; i++)
        usleep(10 * 1000);
    assert_int_equal(lines_in(path), n);
}

/* Redis gone for 6 s in the middle of a wait: enqueue --wait reconnects and
 * prints every result once, exit 0. */
static void test_wait_rides_out_a_restart(void **state)
{
    (void)state;
    static const char aof[] = "--appendonly yes --appendfsync always";
    struct llmq_test_redis rs = {0};
    assert_int_equal(llmq_test_redis_start(&rs, aof), 0);
    char account[64], prefix[128], out[] = "/tmp/llmq-restart-out-XXXXXX";
    close(mkstemp(out));
    llmq_test_unique_name(account, sizeof(account), "blip");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    char *path = write_jobs("b", 20);
    const char *argv[] = {"llmq", "enqueue", "--wait", "--timeout", "120", "--output",
                          out,    "--redis", rs.url,   path,        NULL};
    pid_t pid = cli_start(account, argv);
    assert_int_equal(end_jobs(rs.port, prefix, 10), 10);
    await_lines(out, 10);
    llmq_test_redis_stop(&rs);
    sleep(6); /* the blip */
    assert_int_equal(llmq_test_redis_start(&rs, aof), 0);
    assert_int_equal(end_jobs(rs.port, prefix, 10), 10);
    struct cli_run r = cli_finish(pid);
    if (r.status != 0)
        fail_msg("exit %d: %s", r.status, r.err);
    assert_non_null(strstr(r.err, "lost Redis"));
    char want[96];
    snprintf(want, sizeof(want), "reconnected to Redis at 127.0.0.1:%d", rs.port);
    assert_non_null(strstr(r.err, want));
    /* every result once */
    char *text = cli_slurp(out);
    assert_int_equal(cli_count_lines(text), 20);
    for (int i = 0; i < 20; i++) {
        char id[48];
        snprintf(id, sizeof(id), "\"custom_id\":\"b%d\"", i);
        char *first = strstr(text, id);
        assert_non_null(first);
        assert_null(strstr(first + 1, id));
    }
    free(text);
    cli_free(&r);
    llmq_test_redis_stop(&rs);
    unlink(out);
    unlink(path);
    free(path);
}

/* Redis gone for good: the wait gives up (here at its --timeout) with exit 1
 * and says how to pick the jobs up again. */
static void test_wait_gives_up_with_a_resume_hint(void **state)
{
    (void)state;
    struct llmq_test_redis rs = {0};
    assert_int_equal(llmq_test_redis_start(&rs, NULL), 0);
    char account[64], prefix[128], out[] = "/tmp/llmq-restart-out-XXXXXX";
    close(mkstemp(out));
    llmq_test_unique_name(account, sizeof(account), "gone");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    char *path = write_jobs("g", 3);
    const char *argv[] = {"llmq", "enqueue", "--wait", "--timeout", "5", "--output",
                          out,    "--redis", rs.url,   path,        NULL};
    pid_t pid = cli_start(account, argv);
    assert_int_equal(end_jobs(rs.port, prefix, 1), 1);
    await_lines(out, 1);
    llmq_test_redis_stop(&rs);
    struct cli_run r = cli_finish(pid);
    assert_int_equal(r.status, 1);
    char want[256];
    snprintf(want, sizeof(want), "Redis at 127.0.0.1:%d did not come back", rs.port);
    if (!strstr(r.err, want) || !strstr(r.err, "gave up waiting") ||
        !strstr(r.err, "2 of 3 job(s) not ended yet"))
        fail_msg("stderr:\n%s", r.err);
    snprintf(want, sizeof(want), "llmq results --wait --account %s 'g1' 'g2'\n", account);
    if (!strstr(r.err, want) || !strstr(r.err, "llmq enqueue --wait --account"))
        fail_msg("no resume hint '%s' in:\n%s", want, r.err);
    cli_free(&r);
    unlink(out);
    unlink(path);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_after_aof_restart),
        cmocka_unit_test(test_wait_rides_out_a_restart),
        cmocka_unit_test(test_wait_gives_up_with_a_resume_hint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
