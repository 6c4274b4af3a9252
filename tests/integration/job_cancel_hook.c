/* lua/job_cancel.lua and its hook in dispatch, against a real Redis:
 *   - a queued job is ended at once: cancelled (not dead: nothing in P dead,
 *     `dead` 0), its result line says so, it leaves its key's queue and the
 *     backlog (what status and KEDA count) in the same call, events name it
 *     once, and dispatch never delivers it; a batch of many queued jobs
 *     leaves the same way (the list rewrite) while jobs not cancelled stay
 *     in order;
 *   - a running job is only flagged; handed back (as at a worker's shutdown)
 *     and due again, dispatch ends it cancelled instead of sending it again;
 *   - a gateway batch counts its cancelled jobs and ends as cancelled once
 *     every job has ended (lua/lib/jobs.lua llmq_jobs_batch_settle). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "account.h"
#include "job_fields.h"
#include "llmq/llmq.h"
#include "redis/redis.h"
#include "redis/script.h"
#include "testsupport.h"

#define BODY "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"

static void enqueue(struct llmq_test_account *e, const char *id)
{
    struct llmq_job_options jo = {.job_id = id};
    assert_int_equal(
        llmq_producer_enqueue(e->producer, "/v1/chat/completions", BODY, &jo, NULL, NULL), LLMQ_OK);
}

/* Runs dispatch for consumer c1; returns the number of jobs granted and
 * copies the first one's stream entry id into eid. */
static size_t dispatch(struct llmq_test_account *e, char *eid, size_t n)
{
    const char *argv[] = {e->prefix, "c1", "8"};
    redisReply *r = llmq_script_run(e->c, LLMQ_SCRIPT_DISPATCH, 1, 3, argv, NULL, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("dispatch: %s", r->str);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    size_t granted = r->elements - 4;
    if (granted > 0 && eid != NULL)
        snprintf(eid, n, "%s", r->element[4]->element[0]->str);
    freeReplyObject(r);
    return granted;
}

/* Runs job_cancel; checks its {cancelled, running, ended} reply. */
static void cancel(struct llmq_test_account *e, const char *batch, const char *id,
                   long long want_cancelled, long long want_running, long long want_ended)
{
    const char *argv[] = {e->prefix, batch, id};
    redisReply *r = llmq_script_run(e->c, LLMQ_SCRIPT_JOB_CANCEL, 1, 3, argv, NULL, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("job_cancel: %s", r->str);
    assert_int_equal(r->elements, 3);
    assert_int_equal(r->element[0]->integer, want_cancelled);
    assert_int_equal(r->element[1]->integer, want_running);
    assert_int_equal(r->element[2]->integer, want_ended);
    freeReplyObject(r);
}

static char *hget(struct llmq_test_account *e, const char *key, const char *field)
{
    redisReply *r = redisCommand(e->c, "HGET %s%s %s", e->prefix, key, field);
    char *v = r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    freeReplyObject(r);
    return v;
}

/* Entries of P events naming id with state. */
static long long events_naming(struct llmq_test_account *e, const char *id, const char *state)
{
    redisReply *r = redisCommand(e->c, "XRANGE %sevents - +", e->prefix);
    long long n = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *f = r->element[i]->element[1];
        for (size_t k = 0; k + 3 < f->elements; k += 4)
            n += strcmp(f->element[k + 1]->str, id) == 0 &&
                 strcmp(f->element[k + 3]->str, state) == 0;
    }
    freeReplyObject(r);
    return n;
}

static void assert_cancelled(struct llmq_test_account *e, const char *id)
{
    char *state = llmq_test_job_field(e->c, e->prefix, id, "state");
    char *err = llmq_test_job_field(e->c, e->prefix, id, "last_error");
    assert_string_equal(state, "cancelled");
    assert_string_equal(err, "cancelled");
    free(state);
    free(err);
    char *line = NULL;
    int dead = 1;
    assert_int_equal(llmq_producer_result(e->producer, id, &line, &dead, NULL), LLMQ_OK);
    assert_int_equal(dead, 0); /* cancelled is not dead-lettered */
    assert_non_null(strstr(line, "\"code\":\"cancelled\""));
    llmq_free(line);
    assert_int_equal(llmq_test_redis_int(e->c, "XLEN %sdead", e->prefix), 0);
    assert_int_equal(events_naming(e, id, "cancelled"), 1);
    assert_int_equal(events_naming(e, id, "dead"), 0);
}

/* Jobs of priority normal that the counts hold: the backlog (KEDA's LLEN)
 * and the key queue of gpt-4o-mini without tenant or user. */
static long long backlog(struct llmq_test_account *e)
{
    return llmq_test_redis_int(e->c, "LLEN %sbacklog:normal", e->prefix);
}

static long long key_queue(struct llmq_test_account *e)
{
    return llmq_test_redis_int(e->c, "LLEN %skq:normal|gpt-4o-mini||", e->prefix);
}

static void test_queued_job_ends_at_once(void **state)
{
    (void)state;
    struct llmq_test_account e;
    llmq_test_account_open(&e, "cancel-queued");
    enqueue(&e, "q1");
    enqueue(&e, "q2");
    assert_int_equal(backlog(&e), 2);
    cancel(&e, "", "q1", 1, 0, 0);
    assert_cancelled(&e, "q1");
    /* out of every count at once, before any dispatch */
    assert_int_equal(backlog(&e), 1);
    assert_int_equal(key_queue(&e), 1);
    char eid[64];
    assert_int_equal(dispatch(&e, eid, sizeof(eid)), 1); /* q2 only */
    assert_int_equal(backlog(&e), 0);
    assert_int_equal(dispatch(&e, NULL, 0), 0);
    cancel(&e, "", "q1", 0, 0, 1); /* again: it has ended */
    assert_int_equal(events_naming(&e, "q1", "cancelled"), 1);
    llmq_test_account_close(&e);
}

/* Many queued jobs of one key cancelled in one call (a Batch cancel): they
 * all leave the key's queue and the backlog; the others keep their order. */
static void test_many_queued_leave_the_counts(void **state)
{
    (void)state;
    struct llmq_test_account e;
    llmq_test_account_open(&e, "cancel-many");
    char id[32];
    for (int i = 0; i < 40; i++) {
        snprintf(id, sizeof(id), "m%d", i);
        enqueue(&e, id);
    }
    const char *argv[2 + 30] = {e.prefix, ""};
    char ids[30][32];
    for (int i = 0; i < 30; i++) { /* m5..m34: the middle of the queue */
        snprintf(ids[i], sizeof(ids[i]), "m%d", i + 5);
        argv[2 + i] = ids[i];
    }
    redisReply *r = llmq_script_run(e.c, LLMQ_SCRIPT_JOB_CANCEL, 1, 32, argv, NULL, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("job_cancel: %s", r->str);
    assert_int_equal(r->element[0]->integer, 30);
    freeReplyObject(r);
    assert_int_equal(backlog(&e), 10);
    assert_int_equal(key_queue(&e), 10);
    r = redisCommand(e.c, "LRANGE %skq:normal|gpt-4o-mini|| 0 -1", e.prefix);
    const char *want[] = {"m0", "m1", "m2", "m3", "m4", "m35", "m36", "m37", "m38", "m39"};
    assert_int_equal(r->elements, 10);
    for (int i = 0; i < 10; i++)
        assert_string_equal(r->element[i]->str, want[i]);
    freeReplyObject(r);
    assert_cancelled(&e, "m20");
    assert_int_equal(dispatch(&e, NULL, 0), 8); /* dispatch grants 8 a call here */
    assert_int_equal(dispatch(&e, NULL, 0), 2);
    assert_int_equal(backlog(&e), 0);
    /* the key left empty has left the tree */
    assert_int_equal(llmq_test_redis_int(e.c, "ZCARD %ssm:normal", e.prefix), 0);
    llmq_test_account_close(&e);
}

static void test_running_job_not_sent_again(void **state)
{
    (void)state;
    struct llmq_test_account e;
    char eid[64];
    llmq_test_account_open(&e, "cancel-running");
    enqueue(&e, "r1");
    assert_int_equal(dispatch(&e, eid, sizeof(eid)), 1);
    cancel(&e, "", "r1", 0, 1, 0);
    char *flag = hget(&e, "job:r1", "cancel");
    assert_string_equal(flag, "1");
    free(flag);
    /* the worker hands it back untried (shutdown): due again at once */
    const char *argv[] = {e.prefix, "handback", "normal", eid,  "r1", "",   "-1", "",   "",   "0",
                          "0",      "",         "0",      "-1", "-1", "-1", "-1", "-1", "-1", "",
                          "-1",     "-1",       "-1",     "",   "",   "-1", "-1", "0",  ""};
    redisReply *r = llmq_script_run(e.c, LLMQ_SCRIPT_JOB_SETTLE, 1, 29, argv, NULL, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("job_settle: %s", r->str);
    freeReplyObject(r);
    assert_int_equal(dispatch(&e, NULL, 0), 0); /* the hook: not delivered again */
    assert_cancelled(&e, "r1");
    assert_int_equal(backlog(&e), 0);
    llmq_test_account_close(&e);
}

static void test_batch_ends_cancelled(void **state)
{
    (void)state;
    struct llmq_test_account e;
    llmq_test_account_open(&e, "cancel-batch");
    const char *bid = "batch_00ff";
    redisReply *r = redisCommand(e.c,
                                 "HSET %sgw:batch:%s status in_progress total 2 completed 0 "
                                 "failed 0 expired 0",
                                 e.prefix, bid);
    freeReplyObject(r);
    enqueue(&e, "batch_00ff.a");
    enqueue(&e, "batch_00ff.b");
    cancel(&e, bid, "batch_00ff.a", 1, 0, 0);
    char *st = hget(&e, "gw:batch:batch_00ff", "status");
    assert_string_equal(st, "cancelling"); /* b is still queued */
    free(st);
    cancel(&e, bid, "batch_00ff.b", 1, 0, 0);
    st = hget(&e, "gw:batch:batch_00ff", "status");
    char *failed = hget(&e, "gw:batch:batch_00ff", "failed");
    char *at = hget(&e, "gw:batch:batch_00ff", "cancelled_at");
    assert_string_equal(st, "cancelled");
    assert_string_equal(failed, "2");
    assert_non_null(at);
    free(st);
    free(failed);
    free(at);
    llmq_test_account_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queued_job_ends_at_once),
        cmocka_unit_test(test_many_queued_leave_the_counts),
        cmocka_unit_test(test_running_job_not_sent_again),
        cmocka_unit_test(test_batch_ends_cancelled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
