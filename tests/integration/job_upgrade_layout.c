/* Upgrading (README "Upgrading"): jobs written in the previous layout, where
 * the job hash held the body (and, once ended, the result), run and are read
 * by this version. up-0 is queued as the previous enqueue.lua wrote it: its
 * hash holds the same 13 fields with body among them, and there is no
 * P body:<id>; a real llmq-worker runs it against openai-sim and its result
 * is read. old-done ended under the previous layout: its result is the
 * hash's field result, no P res:<id>; the C readers (job_result.h, sync: the
 * producer API, and async: the gateway) and `llmq results` print it. A job of today's layout (up-1)
 * runs beside them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ev.h>
#include <hiredis/adapters/libev.h>

#include "jobs/job_result.h"
#include "redis/keys.h"
#include "redis/redis_url.h"
#include "worker_support.h"

/* What the asynchronous reader told (the gateway's path: Batch output files,
 * synchronous calls). */
struct async_told {
    int calls;
    enum llmq_rc rc;
    int dead;
    char line[512];
    struct ev_loop *loop;
};

static void on_async_result(enum llmq_rc rc, const char *line, size_t len, int dead, void *ud)
{
    struct async_told *t = ud;
    t->calls++;
    t->rc = rc;
    t->dead = dead;
    snprintf(t->line, sizeof(t->line), "%.*s", (int)len, line != NULL ? line : "");
    ev_break(t->loop, EVBREAK_ALL);
}

/* Reads id's result with llmq_job_result_read_async on a libev loop. */
static struct async_told read_async(const char *prefix, const char *id)
{
    struct llmq_redis_url url;
    assert_int_equal(llmq_redis_url_parse(llmq_test_redis_url(), &url, NULL), LLMQ_OK);
    struct async_told t = {.loop = ev_loop_new(EVFLAG_AUTO)};
    redisAsyncContext *ac = redisAsyncConnect(url.host, url.port);
    assert_true(ac != NULL && ac->err == 0);
    assert_int_equal(redisLibevAttach(t.loop, ac), REDIS_OK);
    assert_int_equal(llmq_job_result_read_async(ac, prefix, id, on_async_result, &t, NULL),
                     LLMQ_OK);
    ev_run(t.loop, 0);
    redisAsyncFree(ac);
    ev_loop_destroy(t.loop);
    return t;
}

static void key_of(char *buf, size_t n, const char *prefix, enum llmq_key_kind kind, const char *id)
{
    assert_int_equal(llmq_key(buf, n, prefix, kind, id, NULL), LLMQ_OK);
}

/* Moves string key from into field of hash to (and deletes from): the
 * previous layout of that value. */
static void into_hash(redisContext *c, const char *from, const char *to, const char *field)
{
    redisReply *v = redisCommand(c, "GET %s", from);
    assert_true(v != NULL && v->type == REDIS_REPLY_STRING);
    freeReplyObject(redisCommand(c, "HSET %s %s %b", to, field, v->str, v->len));
    freeReplyObject(redisCommand(c, "DEL %s", from));
    freeReplyObject(v);
}

static void test_previous_layout_runs_and_reads(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], prefix[128], jk[256], bk[256], rk[256];
    llmq_test_unique_name(account, sizeof(account), "upgrade");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-upgrade-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-upgrade-%d.log", (int)getpid());
    redisContext *c = llmq_test_redis_connect();

    /* old-done: ended, then its result moved into its hash */
    worker_write_jobs(jobs, "old-done", 1, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    const char *fin[] = {prefix, "old-done-0", "done",
                         "{\"custom_id\":\"old-done-0\",\"response\":{\"status_code\":200}}", ""};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_JOB_FINISH, 1, 5, fin, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    key_of(jk, sizeof(jk), prefix, LLMQ_KEY_JOB, "old-done-0");
    key_of(rk, sizeof(rk), prefix, LLMQ_KEY_RESULT, "old-done-0");
    into_hash(c, rk, jk, "result");

    /* up-0 as the previous enqueue wrote it, up-1 as today's */
    worker_write_jobs(jobs, "up", 2, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    key_of(jk, sizeof(jk), prefix, LLMQ_KEY_JOB, "up-0");
    key_of(bk, sizeof(bk), prefix, LLMQ_KEY_JOB_BODY, "up-0");
    into_hash(c, bk, jk, "body");
    /* model url body cost prio tenant user deadline_ms max_attempts attempts
     * enq_ms state est_prompt_tokens: the previous enqueue.lua's HSET */
    assert_int_equal(redis_int(c, "HLEN %s%s", jk, ""), 13);

    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    const char *args[] = {"--exit-when-idle-ms", "1500", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* Both ran: the old one's body reached the API (the sim answers only a
     * well-formed chat request with 200). */
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(e[i].status, 200);
    free(e);
    assert_int_equal(redis_int(c, "HEXISTS %s %s", jk, "body"), 0); /* moved at dispatch */
    assert_int_equal(redis_int(c, "EXISTS %s%s", bk, ""), 0);       /* gone with the finish */

    /* Every result reads back: the C reader, the producer API, the CLI. */
    const char *ids[] = {"up-0", "up-1", "old-done-0"};
    struct llmq_job_result out[3];
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_result_read(c, prefix, ids, 3, out, &err), LLMQ_OK);
    for (int i = 0; i < 3; i++) {
        char want[64];
        snprintf(want, sizeof(want), "\"custom_id\":\"%s\"", ids[i]);
        assert_non_null(out[i].line);
        assert_non_null(strstr(out[i].line, want));
        assert_int_equal(out[i].dead, 0);
        assert_true(out[i].fin_ms > 0);
        llmq_job_result_clear(&out[i]);
    }
    for (int i = 0; i < 3; i++) {
        struct async_told t = read_async(prefix, ids[i]);
        assert_int_equal(t.calls, 1);
        assert_int_equal(t.rc, LLMQ_OK);
        assert_int_equal(t.dead, 0);
        assert_non_null(strstr(t.line, ids[i]));
    }
    const char *argv[] = {"llmq", "results", "up-0", "old-done-0", NULL};
    struct cli_run cr = cli_run(account, argv);
    assert_int_equal(cr.status, 0);
    assert_int_equal(cli_count_lines(cr.out), 2);
    assert_non_null(strstr(cr.out, "\"custom_id\":\"up-0\""));
    assert_non_null(strstr(cr.out, "\"custom_id\":\"old-done-0\""));
    cli_free(&cr);
    /* An id whose previous-layout result exists is not enqueued again. */
    worker_write_jobs(jobs, "old-done", 1, "gpt-4o-mini", 20, NULL);
    const char *again[] = {"llmq", "enqueue", jobs, NULL};
    cr = cli_run(account, again);
    assert_non_null(strstr(cr.err, "job old-done-0 already exists (done)"));
    cli_free(&cr);
    redisFree(c);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_previous_layout_runs_and_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
