/* Upgrading (README "Upgrading"): jobs written in the layouts before, run and
 * are read by this version. Today a waiting job is one record (P jr:<id>,
 * lua/lib/job_record.lua) with its body packed (jobs/job_pack.h).
 * up-2 is queued as the previous version wrote it: the hash P job:<id> of
 * its 12 small fields and its body, JSON text, in P body:<id>. up-0 is
 * queued as the version before that wrote it: the hash holds the same 12
 * fields and body among them, no P body:<id>. A real llmq-worker runs both
 * against openai-sim and their results are read. old-done ended under the
 * oldest layout: its result is the hash's field result, no P res:<id>; the
 * C readers (job_result.h, sync: the producer API, and async: the gateway)
 * and `llmq results` print it. A job of today's layout (up-1) runs beside
 * them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ev.h>
#include <hiredis/adapters/libev.h>

#include "job_fields.h"
#include "jobs/job_pack.h"
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

/* Rewrites today's record of waiting job id as the previous version wrote
 * that job: the hash of its small fields and P body:<id>, the body's JSON
 * text. */
static void as_previous_layout(redisContext *c, const char *prefix, const char *id)
{
    static const char *fields[] = {"model",    "url",    "cost",        "prio",
                                   "tenant",   "user",   "deadline_ms", "max_attempts",
                                   "attempts", "enq_ms", "state",       "est_prompt_tokens"};
    char jk[256], bk[256], wk[256];
    key_of(jk, sizeof(jk), prefix, LLMQ_KEY_JOB, id);
    key_of(bk, sizeof(bk), prefix, LLMQ_KEY_JOB_BODY, id);
    key_of(wk, sizeof(wk), prefix, LLMQ_KEY_JOB_RECORD, id);
    assert_int_equal(redis_int(c, "EXISTS %s%s", wk, ""), 1);
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        char *v = llmq_test_job_field(c, prefix, id, fields[i]);
        assert_non_null(v);
        freeReplyObject(redisCommand(c, "HSET %s %s %s", jk, fields[i], v));
        free(v);
    }
    size_t stored_len = 0, len = 0;
    char *stored = llmq_test_job_bytes(c, prefix, id, "body", &stored_len);
    assert_non_null(stored);
    assert_true(llmq_job_packed(stored, stored_len));
    char *text = NULL;
    assert_int_equal(llmq_job_unpack(stored, stored_len, 1 << 20, &text, &len, NULL), LLMQ_OK);
    assert_int_equal(text[0], '{');
    freeReplyObject(redisCommand(c, "SET %s %b", bk, text, len));
    freeReplyObject(redisCommand(c, "DEL %s", wk));
    free(text);
    free(stored);
}

/* Moves string key from into field of hash to (and deletes from): the
 * layout before of that value. */
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

    /* up-0 as the enqueue before the previous one wrote it, up-2 as the
     * previous one did, up-1 as today's */
    worker_write_jobs(jobs, "up", 3, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    as_previous_layout(c, prefix, "up-0");
    as_previous_layout(c, prefix, "up-2");
    key_of(jk, sizeof(jk), prefix, LLMQ_KEY_JOB, "up-0");
    key_of(bk, sizeof(bk), prefix, LLMQ_KEY_JOB_BODY, "up-0");
    into_hash(c, bk, jk, "body");
    /* model url body cost prio tenant user deadline_ms max_attempts attempts
     * enq_ms state est_prompt_tokens: that enqueue.lua's HSET */
    assert_int_equal(redis_int(c, "HLEN %s%s", jk, ""), 13);
    char jk2[256], bk2[256], wk1[256];
    key_of(jk2, sizeof(jk2), prefix, LLMQ_KEY_JOB, "up-2");
    key_of(bk2, sizeof(bk2), prefix, LLMQ_KEY_JOB_BODY, "up-2");
    key_of(wk1, sizeof(wk1), prefix, LLMQ_KEY_JOB_RECORD, "up-1");
    assert_int_equal(redis_int(c, "HLEN %s%s", jk2, ""), 12);
    assert_int_equal(redis_int(c, "EXISTS %s%s", bk2, ""), 1);
    assert_int_equal(redis_int(c, "EXISTS %s%s", wk1, ""), 1);

    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    const char *args[] = {"--exit-when-idle-ms", "1500", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* All three ran: the old ones' bodies reached the API (the sim answers
     * only a well-formed chat request with 200). */
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(e[i].status, 200);
    free(e);
    assert_int_equal(redis_int(c, "HEXISTS %s %s", jk, "body"), 0); /* moved at dispatch */
    assert_int_equal(redis_int(c, "EXISTS %s%s", bk, ""), 0);       /* gone with the finish */
    assert_int_equal(redis_int(c, "EXISTS %s%s", bk2, ""), 0);
    assert_int_equal(redis_int(c, "EXISTS %s%s", wk1, ""), 0); /* a hash since dispatch */

    /* Every result reads back: the C reader, the producer API, the CLI. */
    const char *ids[] = {"up-0", "up-1", "up-2", "old-done-0"};
    struct llmq_job_result out[4];
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_result_read(c, prefix, ids, 4, out, &err), LLMQ_OK);
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof(want), "\"custom_id\":\"%s\"", ids[i]);
        assert_non_null(out[i].line);
        assert_non_null(strstr(out[i].line, want));
        assert_int_equal(out[i].dead, 0);
        assert_true(out[i].fin_ms > 0);
        llmq_job_result_clear(&out[i]);
    }
    for (int i = 0; i < 4; i++) {
        struct async_told t = read_async(prefix, ids[i]);
        assert_int_equal(t.calls, 1);
        assert_int_equal(t.rc, LLMQ_OK);
        assert_int_equal(t.dead, 0);
        assert_non_null(strstr(t.line, ids[i]));
    }
    const char *argv[] = {"llmq", "results", "up-0", "up-2", "old-done-0", NULL};
    struct cli_run cr = cli_run(account, argv);
    assert_int_equal(cr.status, 0);
    assert_int_equal(cli_count_lines(cr.out), 3);
    assert_non_null(strstr(cr.out, "\"custom_id\":\"up-2\""));
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
