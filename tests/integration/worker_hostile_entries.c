/* Hostile stream entries and job hashes, written with raw Redis commands:
 * each is dead-lettered with a specific reason, the worker never crashes or
 * stalls, exits 0, and keeps serving the good jobs queued behind them.
 *
 * Second case: an entry delivered to the worker's consumer name whose
 * dispatch reply never reached it (the connection dropped) is not kept alive
 * by the worker's refresh of its own entries: it is reclaimed after the
 * visibility timeout and run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "redis/script.h"
#include "worker_support.h"

#define GOOD 20

static void cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fprintf(stderr, "redis: %s\n", r->str);
    freeReplyObject(r);
}

/* A job hash like enqueue writes, with one field replaced (value NULL: removed). */
static void put_job(redisContext *c, const char *P, const char *id, const char *field,
                    const char *value, size_t value_len)
{
    cmd(c,
        "HSET %sjob:%s id %s model gpt-4o-mini url /v1/chat/completions prio normal "
        "cost 50 attempts 0 max_attempts 3 state queued tenant %s user %s body %s",
        P, id, id, "", "",
        "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    if (field != NULL && value == NULL)
        cmd(c, "HDEL %sjob:%s %s", P, id, field);
    else if (field != NULL)
        cmd(c, "HSET %sjob:%s %s %b", P, id, field, value, value_len);
}

struct expect {
    const char *id; /* job id (NULL: no usable id) */
    const char *reason;
    int has_result;
};

static void test_hostile_entries_are_dead_lettered(void **state)
{
    (void)state;
    char account[64], P[128], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "hostile");
    snprintf(P, sizeof(P), "llmq:{%s}:", account);
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    redisContext *c = llmq_test_redis_connect();
    cmd(c, "XGROUP CREATE %sq:normal workers 0 MKSTREAM", P);

    /* Job hashes with fields of the wrong form, and a job key of the wrong type. */
    put_job(c, P, "h-cost", "cost", "lots", 4);
    put_job(c, P, "h-cost-neg", "cost", "-5", 2);
    put_job(c, P, "h-nomodel", "model", NULL, 0);
    put_job(c, P, "h-attempts", "attempts", "garbage", 7);
    put_job(c, P, "h-maxatt", "max_attempts", "1e999", 5);
    put_job(c, P, "h-url", "url", "http://evil.example/\r\nX: y", 27);
    put_job(c, P, "h-model-utf8", "model", "gpt\xc0\xaf", 5);
    put_job(c, P, "h-tenant", "tenant", "a/t/b", 5);
    size_t huge_len = 4 << 20;
    char *huge = malloc(huge_len);
    memset(huge, 'm', huge_len);
    put_job(c, P, "h-huge-model", "model", huge, huge_len);
    free(huge);
    cmd(c, "SET %sjob:h-string not-a-hash", P);
    /* Entries without a usable job id, in this order (see want[] below). */
    char longid[301];
    memset(longid, 'a', 300);
    longid[300] = '\0';
    cmd(c, "XADD %sq:normal * foo bar", P);
    cmd(c, "XADD %sq:normal * id %s", P, "bad id with spaces");
    cmd(c, "XADD %sq:normal * id %b", P, "bad\xff\xfe", (size_t)5);
    cmd(c, "XADD %sq:normal * id %s", P, longid);
    cmd(c, "XADD %sq:normal * id %s", P, "a{b}");
    cmd(c, "XADD %sq:normal * id h-string", P);
    /* An entry naming no job, then the bad jobs. */
    cmd(c, "XADD %sq:normal * id ghost-1", P);
    static const char *const bad_jobs[] = {"h-cost",       "h-cost-neg", "h-nomodel",
                                           "h-attempts",   "h-maxatt",   "h-url",
                                           "h-model-utf8", "h-tenant",   "h-huge-model"};
    for (size_t i = 0; i < sizeof(bad_jobs) / sizeof(bad_jobs[0]); i++)
        cmd(c, "XADD %sq:normal * id %s", P, bad_jobs[i]);
    /* A delayed job whose priority is garbage (it would go to a stream no one reads). */
    put_job(c, P, "h-prio", "prio", "bogus", 5);
    cmd(c, "HSET %sjob:h-prio state delayed", P);
    cmd(c, "ZADD %sdelayed 0 h-prio", P);

    /* Good jobs behind them. */
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-hostile-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "g", GOOD, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);

    snprintf(log, sizeof(log), "/tmp/llmq-hostile-%d.log", (int)getpid());
    const char *args[] = {"--concurrency", "8", "--exit-when-idle-ms", "1500", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* The good jobs were served. */
    char key[256];
    snprintf(key, sizeof(key), "%sstats", P);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "done"), GOOD);

    const struct expect want[] = {
        {NULL, "invalid_entry", 0},       {NULL, "invalid_job_id", 0},
        {NULL, "invalid_job_id", 0},      {NULL, "invalid_job_id", 0},
        {NULL, "invalid_job_id", 0},      {NULL, "invalid_job", 0}, /* h-string */
        {"ghost-1", "missing_job", 1},    {"h-cost", "invalid_job", 1},
        {"h-cost-neg", "invalid_job", 1}, {"h-nomodel", "invalid_job", 1},
        {"h-attempts", "invalid_job", 1}, {"h-maxatt", "invalid_job", 1},
        {"h-url", "invalid_job", 1},      {"h-model-utf8", "invalid_job", 1},
        {"h-tenant", "invalid_job", 1},   {"h-huge-model", "invalid_job", 1},
        {"h-prio", "invalid_job", 1},
    };
    const size_t n_want = sizeof(want) / sizeof(want[0]);
    snprintf(key, sizeof(key), "%sdead", P);
    redisReply *r = redisCommand(c, "XRANGE %s - +", key);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *f = r->element[i]->element[1];
        const char *id = "", *reason = "", *error = "";
        for (size_t k = 0; k + 1 < f->elements; k += 2) {
            const char *name = f->element[k]->str;
            if (strcmp(name, "id") == 0)
                id = f->element[k + 1]->str;
            else if (strcmp(name, "reason") == 0)
                reason = f->element[k + 1]->str;
            else if (strcmp(name, "error") == 0)
                error = f->element[k + 1]->str;
        }
        printf("# dead: %-14s %-15s %s\n", id, reason, error);
    }
    assert_int_equal(r->elements, n_want);
    /* Entries without a usable id in stream order; the jobs by id. */
    size_t k_anon = 0;
    for (size_t i = 0; i < n_want; i++) {
        int found = 0;
        size_t anon_seen = 0;
        for (size_t j = 0; j < r->elements && !found; j++) {
            redisReply *f = r->element[j]->element[1];
            const char *id = NULL, *reason = "";
            for (size_t k = 0; k + 1 < f->elements; k += 2) {
                if (strcmp(f->element[k]->str, "id") == 0)
                    id = f->element[k + 1]->str;
                else if (strcmp(f->element[k]->str, "reason") == 0)
                    reason = f->element[k + 1]->str;
            }
            if (want[i].id == NULL && id == NULL)
                found = anon_seen++ == k_anon && strcmp(reason, want[i].reason) == 0;
            else if (want[i].id != NULL)
                found = id != NULL && strcmp(id, want[i].id) == 0 &&
                        strcmp(reason, want[i].reason) == 0;
        }
        if (!found)
            fprintf(stderr, "missing dead entry %zu: %s %s\n", i, want[i].id ? want[i].id : "-",
                    want[i].reason);
        assert_true(found);
        if (want[i].id == NULL) {
            k_anon++;
        } else {
            snprintf(key, sizeof(key), "%sres:%s", P, want[i].id);
            assert_int_equal(redis_int(c, "EXISTS %s%s", key, ""), want[i].has_result);
        }
    }
    freeReplyObject(r);
    /* Nothing left pending or queued; the dead count matches. */
    assert_int_equal(worker_pending(c, P, "normal"), 0);
    /* ... and nothing in the stream was left unadopted (acknowledged entries
     * stay until the stream's trim: the group's lag counts the others) */
    snprintf(key, sizeof(key), "%sq:normal", P);
    assert_int_equal(worker_group_lag(c, key), 0);
    snprintf(key, sizeof(key), "%sstats", P);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "dead"), (long long)n_want);
    snprintf(key, sizeof(key), "%sdelayed", P);
    assert_int_equal(redis_int(c, "ZCARD %s", key, NULL), 0);
    /* The CLI lists them without trouble. */
    const char *dl[] = {"llmq", "dead", "list", "--json", NULL};
    struct cli_run cr = cli_run(account, dl);
    assert_int_equal(cr.status, 0);
    assert_int_equal(cli_count_lines(cr.out), n_want);
    cli_free(&cr);
    redisFree(c);
    unlink(jobs);
    unlink(log);
}

static void test_lost_dispatch_reply_is_reclaimed(void **state)
{
    (void)state;
    char account[64], P[128], jobs[128], log[128], consumer[80];
    llmq_test_unique_name(account, sizeof(account), "lostreply");
    snprintf(P, sizeof(P), "llmq:{%s}:", account);
    snprintf(consumer, sizeof(consumer), "%s-w", account);
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-lostreply-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "l", 1, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    /* What a dispatch whose reply was lost leaves: the entry delivered to the
     * consumer, the job running. */
    redisContext *c = llmq_test_redis_connect();
    char key[256];
    const char *dargv[] = {P, consumer, "1"};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_DISPATCH, 1, 3, dargv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    freeReplyObject(r);

    snprintf(log, sizeof(log), "/tmp/llmq-lostreply-%d.log", (int)getpid());
    const char *args[] = {"--consumer", consumer, "--visibility-ms", "600", "--exit-when-idle-ms",
                          "4000",       NULL};
    pid_t w = worker_start(account, &sim, log, args);
    assert_int_equal(worker_wait(w, 30000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    snprintf(key, sizeof(key), "%sres:l-0", P);
    assert_int_equal(redis_int(c, "EXISTS %s%s", key, ""), 1);
    redisFree(c);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_entries_are_dead_lettered),
        cmocka_unit_test(test_lost_dispatch_reply_is_reclaimed),
    };
    return cmocka_run_group_tests_name("worker_hostile_entries", tests, NULL, NULL);
}
