/* An asynchronous push of a gateway-sized batch (20,000 jobs, 313 enqueue
 * calls) keeps at most LLMQ_JOB_STORE_ASYNC_WINDOW calls in flight on its
 * connection — counted as hiredis's list of callbacks waiting for a reply,
 * read after every loop iteration and right after the push returns — and
 * every job still lands: each outcome says created, Redis holds every job,
 * and the callback runs once. Before the window, all 313 calls were queued
 * at once (~40 MB in the connection's output buffer). A second push of the
 * same ids (the gate's lease and key copied, the caller's gone) finds every
 * id taken. On the fixture redis-server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job.h"
#include "jobs/job_store.h"
#include "redis/redis_async.h"
#include "redis/redis_url.h"
#include "account.h"
#include "testsupport.h"

#define JOBS 20000

struct watch {
    struct llmq_redis_async *ra;
    size_t most_in_flight; /* the most callbacks seen waiting */
    int ready;
    int pushed; /* times the push's callback ran */
    enum llmq_rc rc;
    char msg[256];
};

static size_t waiting_callbacks(struct llmq_redis_async *ra)
{
    redisAsyncContext *ac = llmq_redis_async_context(ra);
    size_t n = 0;
    for (redisCallback *cb = ac != NULL ? ac->replies.head : NULL; cb != NULL; cb = cb->next)
        n++;
    return n;
}

static void note(struct watch *w)
{
    size_t n = waiting_callbacks(w->ra);
    if (n > w->most_in_flight)
        w->most_in_flight = n;
}

static void on_check(struct ev_loop *loop, ev_check *c, int revents)
{
    (void)loop;
    (void)revents;
    note(c->data);
}

static void on_state(struct llmq_redis_async *ra, int ready, void *privdata)
{
    (void)ra;
    ((struct watch *)privdata)->ready = ready;
}

static void on_pushed(enum llmq_rc rc, const struct llmq_error *err, void *ud)
{
    struct watch *w = ud;
    w->pushed++;
    w->rc = rc;
    snprintf(w->msg, sizeof(w->msg), "%s", err != NULL ? err->msg : "");
}

/* Runs the loop until *flag is set or timeout_ms passed (against hanging,
 * not a timing check). */
static void run_until(struct ev_loop *loop, const int *flag, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    while (*flag == 0 && llmq_test_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
}

static void push(struct ev_loop *loop, struct watch *w, const char *prefix,
                 const struct llmq_job *jobs, struct llmq_job_outcome *out)
{
    /* the gate's names live on this frame only: the push copies them */
    char lease[32], key_id[17];
    snprintf(lease, sizeof(lease), "gw-window-test");
    snprintf(key_id, sizeof(key_id), "0123456789abcdef");
    const struct llmq_job_gate gate = {.lease = lease, .key_id = key_id};
    struct llmq_error err = {0};
    w->pushed = 0;
    w->most_in_flight = 0;
    redisAsyncContext *ac = llmq_redis_async_context(w->ra);
    assert_non_null(ac);
    enum llmq_rc rc =
        llmq_job_store_push_async(ac, prefix, &gate, jobs, JOBS, out, on_pushed, w, &err);
    if (rc != LLMQ_OK)
        fail_msg("push: %s", err.msg);
    memset(lease, 'x', sizeof(lease) - 1);
    memset(key_id, 'y', sizeof(key_id) - 1);
    note(w);
    run_until(loop, &w->pushed, 300000);
    assert_int_equal(w->pushed, 1);
    print_message("most enqueue calls in flight: %zu (window %d)\n", w->most_in_flight,
                  LLMQ_JOB_STORE_ASYNC_WINDOW);
    assert_true(w->most_in_flight <= LLMQ_JOB_STORE_ASYNC_WINDOW);
    /* and it does pipeline: the window fills */
    assert_int_equal(w->most_in_flight, LLMQ_JOB_STORE_ASYNC_WINDOW);
}

static void test_push_async_window(void **state)
{
    (void)state;
    struct llmq_test_account acct;
    llmq_test_account_open(&acct, "pushwin");
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_store_prepare(acct.c, acct.prefix, &err), LLMQ_OK);

    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_job *jobs = calloc(JOBS, sizeof(*jobs));
    struct llmq_job_outcome *out = calloc(JOBS, sizeof(*out));
    assert_true(jobs != NULL && out != NULL);
    for (size_t i = 0; i < JOBS; i++) {
        char line[512];
        int len = snprintf(line, sizeof(line),
                           "{\"custom_id\":\"w-%zu\",\"method\":\"POST\",\"url\":\"/v1/chat/"
                           "completions\",\"body\":{\"model\":\"gpt-4o-mini\",\"messages\":[{"
                           "\"role\":\"user\",\"content\":\"line %zu of a big batch\"}]}}",
                           i, i);
        assert_int_equal(llmq_job_from_line(line, (size_t)len, &d, &jobs[i], &err), LLMQ_OK);
    }

    struct llmq_redis_url url;
    assert_int_equal(llmq_redis_url_parse(llmq_test_redis_url(), &url, &err), LLMQ_OK);
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct watch w = {0};
    struct llmq_redis_async_config cfg = {.name = "test-push"};
    w.ra = llmq_redis_async_new(loop, &url, &cfg, on_state, &w, &err);
    assert_non_null(w.ra);
    run_until(loop, &w.ready, 30000);
    assert_true(w.ready);
    ev_check check;
    ev_check_init(&check, on_check);
    check.data = &w;
    ev_check_start(loop, &check);

    push(loop, &w, acct.prefix, jobs, out);
    if (w.rc != LLMQ_OK)
        fail_msg("push ended: %s", w.msg);
    size_t created = 0;
    for (size_t i = 0; i < JOBS; i++)
        created += out[i].created;
    assert_int_equal(created, JOBS);
    /* every job is in Redis (its record), gated as asked */
    for (size_t i = 0; i < JOBS; i++)
        redisAppendCommand(acct.c, "EXISTS %sjr:%s", acct.prefix, jobs[i].id);
    long long stored = 0;
    for (size_t i = 0; i < JOBS; i++) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(acct.c, (void **)&r), REDIS_OK);
        assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER);
        stored += r->integer;
        freeReplyObject(r);
    }
    print_message("job records stored: %lld\n", stored);
    assert_int_equal(stored, JOBS);
    redisReply *r = redisCommand(acct.c, "GET %sjr:%s", acct.prefix, jobs[JOBS - 1].id);
    assert_true(r != NULL && r->type == REDIS_REPLY_STRING);
    assert_non_null(memmem(r->str, r->len, "gw-window-test", 14));
    assert_non_null(memmem(r->str, r->len, "0123456789abcdef", 16));
    freeReplyObject(r);

    /* Again with the same ids: every one is taken, none created twice. */
    push(loop, &w, acct.prefix, jobs, out);
    assert_int_equal(w.rc, LLMQ_OK);
    created = 0;
    for (size_t i = 0; i < JOBS; i++)
        created += out[i].created;
    assert_int_equal(created, 0);

    ev_check_stop(loop, &check);
    llmq_redis_async_free(w.ra);
    ev_loop_destroy(loop);
    for (size_t i = 0; i < JOBS; i++)
        llmq_job_clear(&jobs[i]);
    free(jobs);
    free(out);
    llmq_test_account_close(&acct);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_async_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
