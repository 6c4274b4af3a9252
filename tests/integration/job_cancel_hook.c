/* lua/job_cancel.lua and its hook in dispatch, against a real Redis:
 *   - a queued job is ended at once: dead, reason cancelled, its result line
 *     says so, and dispatch never delivers it;
 *   - a running job is only flagged; handed back (as at a worker's shutdown)
 *     and due again, dispatch dead-letters it instead of sending it again;
 *   - a gateway batch counts its cancelled jobs and ends as cancelled once
 *     every job has ended (lua/lib/30_jobs.lua llmq_jobs_batch_settle). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "account.h"
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

static void assert_cancelled(struct llmq_test_account *e, const char *id)
{
    char key[256];
    snprintf(key, sizeof(key), "job:%s", id);
    char *state = hget(e, key, "state"), *err = hget(e, key, "last_error");
    assert_string_equal(state, "dead");
    assert_string_equal(err, "cancelled");
    free(state);
    free(err);
    char *line = NULL;
    int dead = 0;
    assert_int_equal(llmq_producer_result(e->producer, id, &line, &dead, NULL), LLMQ_OK);
    assert_int_equal(dead, 1);
    assert_non_null(strstr(line, "\"code\":\"cancelled\""));
    llmq_free(line);
}

static void test_queued_job_ends_at_once(void **state)
{
    (void)state;
    struct llmq_test_account e;
    llmq_test_account_open(&e, "cancel-queued");
    enqueue(&e, "q1");
    cancel(&e, "", "q1", 1, 0, 0);
    assert_cancelled(&e, "q1");
    assert_int_equal(dispatch(&e, NULL, 0), 0);
    cancel(&e, "", "q1", 0, 0, 1); /* again: it has ended */
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
                          "0",      "",         "0",      "-1", "-1", "-1", "-1", "-1", "-1", ""};
    redisReply *r = llmq_script_run(e.c, LLMQ_SCRIPT_JOB_SETTLE, 1, 20, argv, NULL, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("job_settle: %s", r->str);
    freeReplyObject(r);
    assert_int_equal(dispatch(&e, NULL, 0), 0); /* the hook: not delivered again */
    assert_cancelled(&e, "r1");
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
        cmocka_unit_test(test_running_job_not_sent_again),
        cmocka_unit_test(test_batch_ends_cancelled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
