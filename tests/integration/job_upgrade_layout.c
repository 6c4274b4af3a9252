/* Upgrading (docs/upgrading.md): jobs written in the layouts before, run and
 * are read by this version. Today a waiting job is one record (P jr:<id>,
 * lua/lib/job_record.lua) with its body packed (jobs/job_pack.h), and a
 * done job is one ended record (P res:<id>, lua/lib/job_ended.lua: state,
 * fin_ms, attempts, enq_ms, run_ms, prio, model, tenant, user, reason,
 * then its output line packed), no hash.
 * up-2 is queued as the previous version wrote it: the hash P job:<id> of
 * its 12 small fields and its body, JSON text, in P body:<id>. up-0 is
 * queued as the version before that wrote it: the hash holds the same 12
 * fields and body among them, no P body:<id>. A real llmq-worker runs both
 * against openai-sim and their results are read. Ended jobs, written by
 * hand as those versions left them: old-done under the oldest layout (its
 * result the hash's field result, no P res:<id>); prev-done under the
 * previous one (the hash with state done and fin_ms, its line bare in
 * P res:<id>, an entry of P done); prev-dead the same dead (hash, body and
 * bare line kept, an entry of P dead), which `llmq dead retry` runs again.
 * The C readers (job_result.h, sync: the producer API, and async: the
 * gateway's Batch output and calls), `llmq results`, job_fields and
 * enqueue's idempotency read each. A job of today's layout (up-1) runs
 * beside them. And ended records of a worker of the version before (E1,
 * without the job's calls) read beside this version's (E2). */
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

/* A Batch output line of id, bare (as the layouts before stored it). */
static void line_of(char *buf, size_t n, const char *id, int dead)
{
    snprintf(buf, n,
             dead ? "{\"custom_id\":\"%s\",\"response\":null,\"error\":{\"code\":\"http_400\"}}"
                  : "{\"custom_id\":\"%s\",\"response\":{\"status_code\":200}}",
             id);
}

/* Ends queued job id (its record made the previous layout's hash and body
 * first: as_previous_layout) as the previous version did: state done or
 * dead, fin_ms, attempts 1 in the hash, the bare line in P res:<id>; a done
 * one with the result's TTL and its entry of P done, a dead one with its
 * body and an entry of P dead; out of its key queue (it was dispatched). */
static void ended_as_previous_layout(redisContext *c, const char *prefix, const char *id, int dead)
{
    char jk[256], rk[256], line[256];
    as_previous_layout(c, prefix, id);
    assert_int_equal(redis_int(c, "LREM %skq:normal|gpt-4o-mini|| 0 %s", prefix, id), 1);
    freeReplyObject(redisCommand(c, "LPOP %sbacklog:normal", prefix));
    key_of(jk, sizeof(jk), prefix, LLMQ_KEY_JOB, id);
    key_of(rk, sizeof(rk), prefix, LLMQ_KEY_RESULT, id);
    line_of(line, sizeof(line), id, dead);
    redisReply *t = redisCommand(c, "TIME"); /* fin_ms is Redis time, unix ms */
    assert_true(t != NULL && t->type == REDIS_REPLY_ARRAY && t->elements == 2);
    long long fin = strtoll(t->element[0]->str, NULL, 10) * 1000;
    freeReplyObject(t);
    freeReplyObject(redisCommand(c, "HSET %s state %s fin_ms %lld attempts 1", jk,
                                 dead ? "dead" : "done", fin));
    freeReplyObject(redisCommand(c, "SET %s %s", rk, line));
    if (dead) {
        redisReply *e = redisCommand(c, "XADD %sdead * id %s reason http_400 error {} ts %lld",
                                     prefix, id, fin);
        assert_true(e != NULL && e->type == REDIS_REPLY_STRING);
        freeReplyObject(redisCommand(c, "HSET %s last_error http_400 dead_entry %s", jk, e->str));
        freeReplyObject(e);
    } else {
        freeReplyObject(redisCommand(c, "PEXPIRE %s 600000", jk));
        freeReplyObject(redisCommand(c, "PEXPIRE %s 600000", rk));
        freeReplyObject(redisCommand(c, "RPUSH %sdone %lld:%s", prefix, fin, id));
    }
}

/* A case's account (a unique name from tag), its key prefix, and its job
 * and worker-log files (per process). */
static void case_names(const char *tag, char account[static 64], char prefix[static 128],
                       char jobs[static 128], char log[static 128])
{
    llmq_test_unique_name(account, 64, tag);
    snprintf(prefix, 128, "llmq:{%s}:", account);
    snprintf(jobs, 128, "/tmp/llmq-%s-%d.jsonl", tag, (int)getpid());
    snprintf(log, 128, "/tmp/llmq-%s-%d.log", tag, (int)getpid());
}

static void test_previous_layout_runs_and_reads(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], prefix[128], jk[256], bk[256], rk[256];
    case_names("upgrade", account, prefix, jobs, log);
    redisContext *c = llmq_test_redis_connect();

    /* old-done: ended under the oldest layout, its result moved into its
     * hash; prev-done and prev-dead: ended under the previous one */
    worker_write_jobs(jobs, "old-done", 1, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    ended_as_previous_layout(c, prefix, "old-done-0", 0);
    key_of(jk, sizeof(jk), prefix, LLMQ_KEY_JOB, "old-done-0");
    key_of(rk, sizeof(rk), prefix, LLMQ_KEY_RESULT, "old-done-0");
    into_hash(c, rk, jk, "result");
    worker_write_jobs(jobs, "prev-done", 1, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    ended_as_previous_layout(c, prefix, "prev-done-0", 0);
    worker_write_jobs(jobs, "prev-dead", 1, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    ended_as_previous_layout(c, prefix, "prev-dead-0", 1);
    /* every reader sees them as ended, before anything runs */
    static const char *const ended[][2] = {
        {"old-done-0", "done"}, {"prev-done-0", "done"}, {"prev-dead-0", "dead"}};
    for (int i = 0; i < 3; i++) {
        char *st = llmq_test_job_field(c, prefix, ended[i][0], "state");
        assert_string_equal(st, ended[i][1]);
        free(st);
        char *line = llmq_test_job_result(c, prefix, ended[i][0]);
        assert_true(line != NULL && strstr(line, ended[i][0]) != NULL);
        free(line);
    }
    /* the previous layout's dead job is retried: queued from its hash and body */
    const char *retry[] = {"llmq", "dead", "retry", "prev-dead-0", NULL};
    struct cli_run cr = cli_run(account, retry);
    assert_int_equal(cr.status, 0);
    cli_free(&cr);
    char *st = llmq_test_job_field(c, prefix, "prev-dead-0", "state");
    assert_string_equal(st, "queued");
    free(st);

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

    /* All four ran: the old ones' bodies reached the API (the sim answers
     * only a well-formed chat request with 200). */
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(e[i].status, 200);
    free(e);
    assert_int_equal(redis_int(c, "HEXISTS %s %s", jk, "body"), 0); /* moved at dispatch */
    assert_int_equal(redis_int(c, "EXISTS %s%s", bk, ""), 0);       /* gone with the finish */
    assert_int_equal(redis_int(c, "EXISTS %s%s", bk2, ""), 0);
    assert_int_equal(redis_int(c, "EXISTS %s%s", wk1, ""), 0); /* a hash since dispatch */

    /* The jobs that ran here ended as today's layout: one ended record, no
     * hash, no body. */
    const char *ids[] = {"up-0", "up-1", "up-2", "prev-dead-0", "old-done-0", "prev-done-0"};
    enum { N_IDS = 6, N_RAN = 4 };
    for (int i = 0; i < N_RAN; i++) {
        char k[256];
        key_of(k, sizeof(k), prefix, LLMQ_KEY_JOB, ids[i]);
        assert_int_equal(redis_int(c, "EXISTS %s%s", k, ""), 0);
        key_of(k, sizeof(k), prefix, LLMQ_KEY_RESULT, ids[i]);
        redisReply *v = redisCommand(c, "GET %s", k);
        assert_true(v != NULL && v->type == REDIS_REPLY_STRING && v->len > 2);
        assert_memory_equal(v->str, "E2", 2);
        /* the worker sent the line packed: it follows the record's ten
         * header lines */
        size_t at = 0;
        for (int nl = 0; nl < 10; nl++) {
            const char *p = memchr(v->str + at, '\n', v->len - at);
            assert_non_null(p);
            at = (size_t)(p - v->str) + 1;
        }
        assert_true(llmq_job_packed(v->str + at, v->len - at));
        freeReplyObject(v);
        assert_int_equal(llmq_test_job_int(c, prefix, ids[i], "attempts", -1), 1);
    }

    /* Every result reads back: the C reader, the producer API, the CLI. */
    struct llmq_job_result out[N_IDS];
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_result_read(c, prefix, ids, N_IDS, out, &err), LLMQ_OK);
    for (int i = 0; i < N_IDS; i++) {
        char want[64];
        snprintf(want, sizeof(want), "\"custom_id\":\"%s\"", ids[i]);
        assert_non_null(out[i].line);
        assert_non_null(strstr(out[i].line, want));
        assert_int_equal(out[i].dead, 0);
        assert_true(out[i].fin_ms > 0);
        llmq_job_result_clear(&out[i]);
    }
    for (int i = 0; i < N_IDS; i++) {
        struct async_told t = read_async(prefix, ids[i]);
        assert_int_equal(t.calls, 1);
        assert_int_equal(t.rc, LLMQ_OK);
        assert_int_equal(t.dead, 0);
        assert_non_null(strstr(t.line, ids[i]));
    }
    const char *argv[] = {"llmq",        "results",    "up-0",        "up-2",
                          "prev-dead-0", "old-done-0", "prev-done-0", NULL};
    cr = cli_run(account, argv);
    assert_int_equal(cr.status, 0);
    assert_int_equal(cli_count_lines(cr.out), 5);
    for (int i = 0; argv[2 + i] != NULL; i++) {
        char want[64];
        snprintf(want, sizeof(want), "\"custom_id\":\"%s\"", argv[2 + i]);
        assert_non_null(strstr(cr.out, want));
    }
    cli_free(&cr);
    /* --all walks P done: today's records and the previous layout's entry */
    const char *all[] = {"llmq", "results", "--all", NULL};
    cr = cli_run(account, all);
    assert_int_equal(cr.status, 0);
    assert_non_null(strstr(cr.out, "\"custom_id\":\"prev-done-0\""));
    assert_non_null(strstr(cr.out, "\"custom_id\":\"up-1\""));
    cli_free(&cr);
    /* An id whose result exists, in either layout, is not enqueued again. */
    static const char *const taken[] = {"old-done", "prev-done", "up"};
    for (int i = 0; i < 3; i++) {
        worker_write_jobs(jobs, taken[i], 1, "gpt-4o-mini", 20, NULL);
        const char *again[] = {"llmq", "enqueue", jobs, NULL};
        cr = cli_run(account, again);
        char want[64];
        snprintf(want, sizeof(want), "job %s-0 already exists (done)", taken[i]);
        assert_non_null(strstr(cr.err, want));
        cli_free(&cr);
    }
    redisFree(c);
    unlink(jobs);
    unlink(log);
}

/* Rewrites ended record rk (version E2, as this version's worker wrote it)
 * as a worker of the version before writes it: "E1", the same header
 * without its ninth field (att, the job's calls), the same line. */
static void record_as_e1(redisContext *c, const char *rk)
{
    redisReply *v = redisCommand(c, "GET %s", rk);
    assert_true(v != NULL && v->type == REDIS_REPLY_STRING && v->len > 2);
    assert_memory_equal(v->str, "E2", 2);
    /* the first line (E2, s, fin_ms), then attempts .. last_error (8), att */
    size_t at = 0, att_at = 0;
    for (int nl = 0; nl < 10; nl++) {
        const char *p = memchr(v->str + at, '\n', v->len - at);
        assert_non_null(p);
        if (nl == 9)
            att_at = at;
        at = (size_t)(p - v->str) + 1;
    }
    char *e1 = malloc(v->len);
    assert_non_null(e1);
    memcpy(e1, v->str, att_at);
    memcpy(e1 + att_at, v->str + at, v->len - at);
    e1[1] = '1';
    redisReply *w = redisCommand(c, "SET %s %b KEEPTTL", rk, e1, att_at + v->len - at);
    assert_true(w != NULL && w->type == REDIS_REPLY_STATUS);
    freeReplyObject(w);
    freeReplyObject(v);
    free(e1);
}

/* A mixed fleet during a rolling update: a worker of the version before
 * ends its jobs as E1 records (no calls), this version's as E2. Every
 * reader of this version reads both: the C readers (sync and the
 * gateway's async one), job_fields (state, model; the calls of the E2 job
 * only) and `llmq results`. */
static void test_e1_records_of_an_older_worker_read(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], prefix[128], rk[256];
    case_names("upgrade-e1", account, prefix, jobs, log);
    redisContext *c = llmq_test_redis_connect();
    worker_write_jobs(jobs, "mix", 2, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    const char *args[] = {"--exit-when-idle-ms", "1500", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    /* mix-0 as the older worker left it */
    key_of(rk, sizeof(rk), prefix, LLMQ_KEY_RESULT, "mix-0");
    record_as_e1(c, rk);
    const char *ids[] = {"mix-0", "mix-1"};
    struct llmq_job_result out[2];
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_result_read(c, prefix, ids, 2, out, &err), LLMQ_OK);
    for (int i = 0; i < 2; i++) {
        char want[64];
        snprintf(want, sizeof(want), "\"custom_id\":\"%s\"", ids[i]);
        assert_non_null(out[i].line);
        assert_non_null(strstr(out[i].line, want));
        assert_non_null(strstr(out[i].line, "\"status_code\":200"));
        assert_int_equal(out[i].dead, 0);
        assert_true(out[i].fin_ms > 0);
        llmq_job_result_clear(&out[i]);
        struct async_told t = read_async(prefix, ids[i]);
        assert_int_equal(t.calls, 1);
        assert_int_equal(t.rc, LLMQ_OK);
        assert_non_null(strstr(t.line, want));
        char *st = llmq_test_job_field(c, prefix, ids[i], "state");
        assert_string_equal(st, "done");
        free(st);
        char *model = llmq_test_job_field(c, prefix, ids[i], "model");
        assert_string_equal(model, "gpt-4o-mini");
        free(model);
        assert_int_equal(llmq_test_job_int(c, prefix, ids[i], "attempts", -1), 1);
    }
    char *att = llmq_test_job_field(c, prefix, "mix-0", "att");
    assert_null(att); /* E1: no calls recorded */
    att = llmq_test_job_field(c, prefix, "mix-1", "att");
    assert_true(att != NULL && strncmp(att, "1|done 200 ", 11) == 0);
    free(att);
    const char *argv[] = {"llmq", "results", "mix-0", "mix-1", NULL};
    struct cli_run cr = cli_run(account, argv);
    assert_int_equal(cr.status, 0);
    assert_int_equal(cli_count_lines(cr.out), 2);
    assert_non_null(strstr(cr.out, "\"custom_id\":\"mix-0\""));
    assert_non_null(strstr(cr.out, "\"custom_id\":\"mix-1\""));
    cli_free(&cr);
    redisFree(c);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_previous_layout_runs_and_reads),
        cmocka_unit_test(test_e1_records_of_an_older_worker_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
