/* One job_settle call ends several deliveries (the worker sends the settles
 * of one loop turn together: worker/job_settle.c), each as if it came
 * alone; a call with one bad delivery settles none of them. Settles only
 * acknowledge stream entries (no XDEL): the streams are trimmed every 256
 * done or dead jobs, and `llmq status` does not count acknowledged entries
 * as queued, nor does a retained entry with a hostile job key break it.
 * Each settle adds its call to the job's calls, the last 8 kept.
 * The scripts are called directly on the test's Redis. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "redis/script.h"
#include "worker_support.h"

#define MODEL "gpt-4o-mini"
#define SETTLE_VALUES 28 /* job_settle.lua's ARGV values per delivery */
#define MAX_GRANTS 256

static void acct_close(struct script_account *a)
{
    redisFree(a->c);
}

static void enqueue(const struct script_account *a, const char *id)
{
    const char *argv[] = {a->P, id,  "normal", MODEL, "/v1/chat/completions", "{}", "10", "", "",
                          "0",  "0", "0",      "1"};
    redisReply *r = llmq_script_run(a->c, LLMQ_SCRIPT_ENQUEUE, 1, 13, argv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
}

struct grant {
    char eid[64], id[64], handle[256];
};

/* One dispatch call for up to max jobs into g; returns how many. */
static int dispatch(const struct script_account *a, struct grant *g, int max)
{
    char max_s[16];
    snprintf(max_s, sizeof(max_s), "%d", max);
    const char *argv[] = {a->P, "test-consumer", max_s};
    redisReply *r = llmq_script_run(a->c, LLMQ_SCRIPT_DISPATCH, 1, 3, argv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 4);
    int n = (int)r->elements - 4;
    for (int i = 0; i < n; i++) {
        const redisReply *j = r->element[4 + i];
        snprintf(g[i].eid, sizeof(g[i].eid), "%s", j->element[0]->str);
        snprintf(g[i].id, sizeof(g[i].id), "%s", j->element[2]->str);
        snprintf(g[i].handle, sizeof(g[i].handle), "%s", j->element[3]->str);
    }
    freeReplyObject(r);
    return n;
}

/* Enqueues jobs "<tag>1".."<tag><n>" and dispatches all n into g. */
static void take(const struct script_account *a, const char *tag, int n, struct grant *g)
{
    for (int i = 1; i <= n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "%s%d", tag, i);
        enqueue(a, id);
    }
    assert_int_equal(dispatch(a, g, n), n);
}

/* A delivery's 28 values: grant g ends in mode (done: a result; dead: a
 * dead letter; retry: due in 60 s) with line as its output. */
static void delivery(const char **v, const struct grant *g, const char *mode, const char *line)
{
    const char *vals[SETTLE_VALUES] = {mode,   "normal", g->eid, g->id, g->handle, "10", line,
                                       "test", "60000",  "0",    MODEL, "0",       "-1", "-1",
                                       "-1",   "-1",     "-1",   "-1",  "",        "-1", "-1",
                                       "-1",   "",       "",     "-1",  "-1",      "0",  "200"};
    memcpy(v, vals, sizeof(vals));
}

/* job_settle of the n deliveries in vals (n * 28 values) in one call. */
static redisReply *settle(const struct script_account *a, const char **vals, int n)
{
    const char *argv[1 + MAX_GRANTS * SETTLE_VALUES];
    argv[0] = a->P;
    memcpy(&argv[1], vals, (size_t)n * SETTLE_VALUES * sizeof(*argv));
    redisReply *r =
        llmq_script_run(a->c, LLMQ_SCRIPT_JOB_SETTLE, 1, 1 + n * SETTLE_VALUES, argv, NULL, NULL);
    assert_non_null(r);
    return r;
}

/* Settles g[0..n) in one call, each with mode and an empty output line. */
static void settle_all(const struct script_account *a, const struct grant *g, int n,
                       const char *mode)
{
    static const char *vals[MAX_GRANTS * SETTLE_VALUES];
    for (int i = 0; i < n; i++)
        delivery(&vals[i * SETTLE_VALUES], &g[i], mode, "{}");
    freeReplyObject(settle(a, vals, n));
}

static long long key_int(const struct script_account *a, const char *fmt, const char *name)
{
    return redis_int(a->c, fmt, a->P, name);
}

/* The "queued" count `llmq status` shows for priority normal (status.lua). */
static long long status_queued_normal(const struct script_account *a)
{
    const char *argv[] = {a->P, "1000"};
    redisReply *r = llmq_script_run(a->c, LLMQ_SCRIPT_STATUS, 1, 2, argv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1);
    long long queued = -1;
    const redisReply *queues = r->element[0];
    for (size_t i = 0; i < queues->elements; i++) {
        const redisReply *q = queues->element[i];
        if (q->elements >= 2 && strcmp(q->element[0]->str, "normal") == 0)
            queued = q->element[1]->integer;
    }
    freeReplyObject(r);
    return queued;
}

static void test_one_call_settles_each_delivery(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatch");
    struct grant g[3];
    take(&a, "j", 3, g);
    const char *vals[3 * SETTLE_VALUES];
    delivery(&vals[0], &g[0], "done", "{\"custom_id\":\"j1\"}");
    delivery(&vals[SETTLE_VALUES], &g[1], "retry", "");
    delivery(&vals[2 * SETTLE_VALUES], &g[2], "dead", "{\"custom_id\":\"j3\"}");
    redisReply *r = settle(&a, vals, 3);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("job_settle: %s", r->str);
    /* {owned, finished, moved} per delivery, in order: finished 2 for the
     * dead letter (its result and its entry of P dead) */
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 9);
    const long long want[9] = {1, 1, 0, 1, 0, 0, 1, 2, 0};
    for (int i = 0; i < 9; i++)
        assert_int_equal(r->element[i]->integer, want[i]);
    freeReplyObject(r);
    assert_int_equal(key_int(&a, "EXISTS %sres:%s", "j1"), 1);
    assert_int_equal(key_int(&a, "EXISTS %sres:%s", "j2"), 0);
    assert_int_equal(key_int(&a, "ZCARD %s%s", "delayed"), 1);
    assert_int_equal(key_int(&a, "EXISTS %sres:%s", "j3"), 1);
    assert_int_equal(key_int(&a, "XLEN %s%s", "dead"), 1);
    assert_int_equal(worker_pending(a.c, a.P, "normal"), 0);
    /* waiters are told once for the call: one events entry naming the
     * finished jobs in order, each with its state */
    r = redisCommand(a.c, "XRANGE %sevents - +", a.P);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 1);
    const redisReply *f = r->element[0]->element[1];
    const char *want_fields[] = {"id", "j1", "state", "done", "id", "j3", "state", "dead"};
    assert_int_equal(f->elements, 8);
    for (int i = 0; i < 8; i++)
        assert_string_equal(f->element[i]->str, want_fields[i]);
    freeReplyObject(r);
    acct_close(&a);
}

static void test_bad_delivery_settles_none(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatchbad");
    struct grant g[2];
    take(&a, "k", 2, g);
    const char *vals[2 * SETTLE_VALUES];
    delivery(&vals[0], &g[0], "done", "{\"custom_id\":\"k1\"}");
    delivery(&vals[SETTLE_VALUES], &g[1], "finished", "");
    redisReply *r = settle(&a, vals, 2);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "unknown mode finished"));
    freeReplyObject(r);
    /* the good first delivery was not settled either: still pending, no result */
    assert_int_equal(worker_pending(a.c, a.P, "normal"), 2);
    assert_int_equal(key_int(&a, "EXISTS %sres:%s", "k1"), 0);
    /* and a call whose values are not whole deliveries is refused */
    const char *argv[] = {a.P, "done", "normal"};
    r = llmq_script_run(a.c, LLMQ_SCRIPT_JOB_SETTLE, 1, 3, argv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "28 values per delivery"));
    freeReplyObject(r);
    acct_close(&a);
}

/* 256 dead letters and nothing done: the stream is trimmed all the same,
 * and its acknowledged entries were never counted as queued. */
static void test_acked_entries_trimmed_not_queued(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatchtrim");
    static struct grant g[MAX_GRANTS];
    take(&a, "t", MAX_GRANTS, g);
    /* the first 100 end: their entries stay in the stream, acknowledged */
    settle_all(&a, g, 100, "dead");
    assert_int_equal(key_int(&a, "XLEN %sq:%s", "normal"), MAX_GRANTS);
    assert_int_equal(worker_pending(a.c, a.P, "normal"), MAX_GRANTS - 100);
    assert_int_equal(status_queued_normal(&a), 0);
    /* the 256th dead job trims what every group acknowledged */
    settle_all(&a, &g[100], MAX_GRANTS - 100, "dead");
    assert_int_equal(key_int(&a, "HGET %sstats %s", "dead"), MAX_GRANTS);
    assert_true(key_int(&a, "XLEN %sq:%s", "normal") <= 1);
    assert_int_equal(status_queued_normal(&a), 0);
    acct_close(&a);
}

/* The finishes of one call are counted and swept once, all of them:
 * result_max holds after the call, the done counter counts each. */
static void test_batch_counts_and_sweeps(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatchsweep");
    freeReplyObject(redisCommand(a.c, "HSET %ssettings result_max 2", a.P));
    struct grant g[5];
    take(&a, "s", 5, g);
    settle_all(&a, g, 5, "done");
    assert_int_equal(key_int(&a, "HGET %sstats %s", "done"), 5);
    assert_int_equal(key_int(&a, "LLEN %s%s", "done"), 2);
    long long kept = 0;
    for (int i = 0; i < 5; i++)
        kept += key_int(&a, "EXISTS %sres:%s", g[i].id);
    assert_int_equal(kept, 2);
    acct_close(&a);
}

/* Results finished in one call are kept in finish order: result_max drops
 * the earliest of them, whatever their ids (ids here sort against the order
 * they finish in). */
static void test_batch_sweep_keeps_finish_order(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatchorder");
    freeReplyObject(redisCommand(a.c, "HSET %ssettings result_max 2", a.P));
    static const char *const ids[] = {"e", "d", "c", "b", "a"}; /* enqueue = finish order */
    struct grant g[5];
    for (int i = 0; i < 5; i++)
        enqueue(&a, ids[i]);
    assert_int_equal(dispatch(&a, g, 5), 5);
    const char *vals[5 * SETTLE_VALUES];
    for (int i = 0; i < 5; i++) {
        assert_string_equal(g[i].id, ids[i]);
        delivery(&vals[i * SETTLE_VALUES], &g[i], "done", "{}");
    }
    freeReplyObject(settle(&a, vals, 5));
    for (int i = 0; i < 5; i++)
        assert_int_equal(key_int(&a, "EXISTS %sres:%s", ids[i]), i >= 3); /* b and a */
    /* the index lists the kept ones in finish order */
    redisReply *r = redisCommand(a.c, "LRANGE %sdone 0 -1", a.P);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    assert_non_null(strstr(r->element[0]->str, ":b"));
    assert_non_null(strstr(r->element[1]->str, ":a"));
    freeReplyObject(r);
    acct_close(&a);
}

/* A job whose hash went while it ran (purged, expired) still gets its one
 * result: the settle writes its ended record with its state and fin_ms (a
 * done one with its TTL, and no hash; a dead one kept, and the hash of a
 * dead job), and a resent settle adds none. */
static void test_missing_hash_gets_one_result(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatchgone");
    struct grant g[2];
    take(&a, "m", 2, g);
    freeReplyObject(redisCommand(a.c, "DEL %sjob:m1 %sjob:m2", a.P, a.P));
    const char *vals[2 * SETTLE_VALUES];
    delivery(&vals[0], &g[0], "done", "{\"custom_id\":\"m1\"}");
    delivery(&vals[SETTLE_VALUES], &g[1], "dead", "{\"custom_id\":\"m2\"}");
    for (int round = 0; round < 2; round++) {
        redisReply *r = settle(&a, vals, 2);
        assert_true(r->type == REDIS_REPLY_ARRAY && r->elements == 6);
        assert_int_equal(r->element[1]->integer, round == 0);         /* finished now */
        assert_int_equal(r->element[4]->integer, round == 0 ? 2 : 0); /* and dead-lettered */
        freeReplyObject(r);
    }
    for (int i = 0; i < 2; i++) {
        char *st = llmq_test_job_field(a.c, a.P, g[i].id, "state");
        char *fin = llmq_test_job_field(a.c, a.P, g[i].id, "fin_ms");
        assert_string_equal(st, i == 0 ? "done" : "dead");
        assert_non_null(fin);
        free(st);
        free(fin);
        char *line = llmq_test_job_result(a.c, a.P, g[i].id);
        assert_true(line != NULL && strstr(line, g[i].id) != NULL);
        free(line);
        long long ttl = key_int(&a, "PTTL %sjob:%s", g[i].id);
        assert_true(i == 0 ? ttl == -2 : ttl == -1); /* done: no hash */
        ttl = key_int(&a, "PTTL %sres:%s", g[i].id);
        assert_true(i == 0 ? ttl > 0 : ttl == -1);
    }
    assert_int_equal(worker_event_jobs(a.c, a.P), 2); /* once: the second round tells none */
    assert_int_equal(key_int(&a, "LLEN %s%s", "done"), 1);
    assert_int_equal(key_int(&a, "XLEN %s%s", "dead"), 1);
    acct_close(&a);
}

/* events_max counts jobs, not entries: an entry naming k jobs trims the
 * stream to about events_max / k entries. With 8 jobs a call and events_max
 * 800 that is 100 entries; MAXLEN ~ drops only whole stream nodes (100
 * entries), so after 250 calls at most about 200 entries are left, where a
 * count of entries (800) would keep all 250. */
static void test_events_max_counts_jobs(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatchev");
    freeReplyObject(redisCommand(a.c, "HSET %ssettings events_max 800", a.P));
    for (int call = 0; call < 250; call++) {
        char tag[16];
        snprintf(tag, sizeof(tag), "e%d-", call);
        struct grant g[8];
        take(&a, tag, 8, g);
        settle_all(&a, g, 8, "done");
    }
    long long entries = key_int(&a, "XLEN %s%s", "events");
    assert_true(entries >= 100 && entries <= 200);
    assert_int_equal(worker_event_jobs(a.c, a.P), entries * 8);
    acct_close(&a);
}

/* An entry whose job key is not a hash (hostile data, kept in the stream
 * until the trim) does not break `llmq status`. */
static void test_status_survives_hostile_job_key(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatchhost");
    struct grant g[1];
    take(&a, "h", 1, g);
    freeReplyObject(redisCommand(a.c, "XADD %sq:normal * id notahash", a.P));
    freeReplyObject(redisCommand(a.c, "SET %sjob:notahash oops", a.P));
    assert_int_equal(status_queued_normal(&a), 1); /* the foreign entry, not adopted yet */
    acct_close(&a);
}

/* A job's calls (lua/lib/attempts.lua): ten deliveries of one job, nine
 * retries answered 501..509 then done 200, keep the count and the last 8
 * in order, in the ended record once done. */
static void test_calls_keep_the_last_8(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatchcalls");
    struct grant g[1];
    take(&a, "c", 1, g);
    for (int i = 1; i <= 10; i++) {
        if (i > 1)
            assert_int_equal(dispatch(&a, g, 1), 1); /* the retry, due at once */
        const char *vals[SETTLE_VALUES];
        delivery(vals, &g[0], i < 10 ? "retry" : "done", "{}");
        char status[8];
        snprintf(status, sizeof(status), "%d", i < 10 ? 500 + i : 200);
        vals[8] = "0";     /* delay_ms */
        vals[27] = status; /* ARGV[28] */
        freeReplyObject(settle(&a, vals, 1));
    }
    char *att = llmq_test_job_field(a.c, a.P, "c1", "att");
    assert_non_null(att);
    /* "10|retry 503 ...|...|retry 509 ...|done 200 ..." */
    assert_true(strncmp(att, "10|retry 503 ", 13) == 0);
    const char *p = att;
    int calls = 0;
    while ((p = strchr(p, '|')) != NULL) {
        p++;
        calls++;
        char want[16];
        snprintf(want, sizeof(want), calls < 8 ? "retry %d " : "done 200 ", 502 + calls);
        assert_true(strncmp(p, want, strlen(want)) == 0);
    }
    assert_int_equal(calls, 8);
    free(att);
    acct_close(&a);
}

/* 429s by cause: a rate-limit 429 (a pause) whose headers say the API's
 * window had room for the request is counted spurious too (P stats
 * http_429_spurious), one whose headers say it was full is not; the
 * snapshot the dashboard reads (lua/top_snapshot.lua) reports the same. */
static void test_spurious_429_counted(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "sbatch429");
    struct grant g[2];
    take(&a, "s", 2, g);
    const char *vals[2 * SETTLE_VALUES];
    delivery(vals, &g[0], "retry", "");
    delivery(&vals[SETTLE_VALUES], &g[1], "retry", "");
    for (int i = 0; i < 2; i++) {
        vals[i * SETTLE_VALUES + 9] = "1";     /* refund: not served */
        vals[i * SETTLE_VALUES + 11] = "1000"; /* pause_ms: a rate-limit 429 */
        vals[i * SETTLE_VALUES + 26] = "429";
    }
    vals[12] = "5"; /* the first: 5 requests and 1000 tokens left: room */
    vals[13] = "1000";
    vals[SETTLE_VALUES + 12] = "0"; /* the second: none left */
    vals[SETTLE_VALUES + 13] = "1000";
    freeReplyObject(settle(&a, vals, 2));
    assert_int_equal(llmq_test_redis_int(a.c, "HGET %sstats http_429", a.P), 2);
    assert_int_equal(llmq_test_redis_int(a.c, "HGET %sstats http_429_spurious", a.P), 1);
    const char *argv[] = {a.P};
    redisReply *r = llmq_script_run(a.c, LLMQ_SCRIPT_TOP_SNAPSHOT, 1, 1, argv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
                r->element[1]->elements == 8);
    assert_int_equal(r->element[1]->element[3]->integer, 2);
    assert_int_equal(r->element[1]->element[5]->integer, 1);
    freeReplyObject(r);
    acct_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_call_settles_each_delivery),
        cmocka_unit_test(test_bad_delivery_settles_none),
        cmocka_unit_test(test_acked_entries_trimmed_not_queued),
        cmocka_unit_test(test_batch_counts_and_sweeps),
        cmocka_unit_test(test_batch_sweep_keeps_finish_order),
        cmocka_unit_test(test_missing_hash_gets_one_result),
        cmocka_unit_test(test_status_survives_hostile_job_key),
        cmocka_unit_test(test_events_max_counts_jobs),
        cmocka_unit_test(test_calls_keep_the_last_8),
        cmocka_unit_test(test_spurious_429_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
