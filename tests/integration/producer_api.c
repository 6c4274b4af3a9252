/* The producer API against a real redis-server: enqueue one and many,
 * duplicates, invalid batches written not at all, results by id and by
 * waiting (with a stand-in worker), timeouts. */
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
#include "jobs_fake_worker.h"
#include "llmq/llmq.h"
#include "redis/redis.h"
#include "testsupport.h"

#define BODY "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"

static int setup(void **state)
{
    struct llmq_test_account *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return -1;
    llmq_test_account_open(a, "producer");
    *state = a;
    return 0;
}

static int teardown(void **state)
{
    llmq_test_account_close(*state);
    free(*state);
    return 0;
}

static void test_enqueue_one_and_duplicate(void **state)
{
    struct llmq_test_account *f = *state;
    struct llmq_enqueue_result res;
    struct llmq_error err = {0};
    struct llmq_job_options o = {
        .job_id = "one", .priority = LLMQ_PRIORITY_HIGH, .tenant = "acme", .max_attempts = 3};
    assert_int_equal(
        llmq_producer_enqueue(f->producer, "/v1/chat/completions", BODY, &o, &res, &err), LLMQ_OK);
    assert_string_equal(res.job_id, "one");
    assert_string_equal(res.state, "queued");
    assert_true(res.cost_tokens > 0);
    const char *names[] = {"prio", "tenant", "max_attempts", "attempts", "state"};
    const char *want[] = {"high", "acme", "3", "0", "queued"};
    for (int i = 0; i < 5; i++) {
        char *v = llmq_test_job_field(f->c, f->prefix, "one", names[i]);
        assert_non_null(v);
        assert_string_equal(v, want[i]);
        free(v);
    }
    assert_int_equal(llmq_test_job_int(f->c, f->prefix, "one", "cost", -1), res.cost_tokens);
    assert_int_equal(
        llmq_producer_enqueue(f->producer, "/v1/chat/completions", BODY, &o, &res, &err),
        LLMQ_EDUPLICATE);
    assert_string_equal(res.state, "queued");
    assert_int_equal(llmq_test_redis_int(f->c, "LLEN %sbacklog:%s", f->prefix, "high"), 1);
    /* generated ids */
    assert_int_equal(llmq_producer_enqueue(f->producer, "/v1/embeddings",
                                           "{\"model\":\"text-embedding-3-small\",\"input\":\"x\"}",
                                           NULL, &res, &err),
                     LLMQ_OK);
    assert_int_equal(strncmp(res.job_id, "job-", 4), 0);
    assert_int_equal(llmq_producer_enqueue(f->producer, "/v1/nope", BODY, NULL, &res, &err),
                     LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "unknown url"));
    /* a count that would wrap the cost (2^61 x 8 = 0) is refused, naming it */
    assert_int_equal(llmq_producer_enqueue(f->producer, "/v1/chat/completions",
                                           "{\"model\":\"gpt-4o-mini\",\"messages\":[],"
                                           "\"max_tokens\":8,\"n\":2305843009213693952}",
                                           NULL, &res, &err),
                     LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "Invalid 'n'"));
    assert_int_equal(llmq_producer_enqueue(f->producer, "/v1/chat/completions",
                                           "{\"model\":\"gpt-4o-mini\",\"messages\":[],"
                                           "\"max_tokens\":9007199254740993}",
                                           NULL, &res, &err),
                     LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "Invalid 'max_tokens'"));
}

static void test_many_invalid_writes_nothing(void **state)
{
    struct llmq_test_account *f = *state;
    struct llmq_request reqs[3] = {
        {.url = "/v1/chat/completions", .body = BODY, .options = {.job_id = "m1"}},
        {.url = "/v1/chat/completions", .body = "{\"messages\":[]}", .options = {.job_id = "m2"}},
        {.url = "/v1/chat/completions", .body = BODY, .options = {.job_id = "m3"}},
    };
    struct llmq_enqueue_result res[3];
    struct llmq_error err = {0};
    assert_int_equal(llmq_producer_enqueue_many(f->producer, reqs, 3, res, &err), LLMQ_EINVAL);
    assert_int_equal(res[0].rc, LLMQ_OK);
    assert_int_equal(res[1].rc, LLMQ_EINVAL);
    assert_non_null(strstr(res[1].message, "model"));
    assert_int_equal(llmq_test_job_exists(f->c, f->prefix, "m1"), 0);
    reqs[1].body = BODY;
    assert_int_equal(llmq_producer_enqueue_many(f->producer, reqs, 3, res, &err), LLMQ_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(res[i].rc, LLMQ_OK);
}

struct collected {
    int n;
    int dead;
    char ids[8][64];
};

static void collect(const struct llmq_result *r, void *ud)
{
    struct collected *c = ud;
    if (c->n < 8)
        snprintf(c->ids[c->n], sizeof(c->ids[0]), "%s", r->job_id);
    c->n++;
    c->dead += r->dead;
}

static void test_results_by_id_and_wait(void **state)
{
    struct llmq_test_account *f = *state;
    struct llmq_request reqs[4];
    const char *ids[4] = {"w1", "w2", "w3", "w4"};
    for (int i = 0; i < 4; i++)
        reqs[i] = (struct llmq_request){
            .url = "/v1/chat/completions", .body = BODY, .options = {.job_id = ids[i]}};
    struct llmq_enqueue_result res[4];
    struct llmq_error err = {0};
    assert_int_equal(llmq_producer_enqueue_many(f->producer, reqs, 4, res, &err), LLMQ_OK);
    char *line = NULL;
    assert_int_equal(llmq_producer_result(f->producer, "w1", &line, NULL, &err), LLMQ_ENOTFOUND);
    /* nothing ended: the wait times out, reporting none */
    struct collected got = {0};
    size_t done = 99;
    assert_int_equal(llmq_producer_wait(f->producer, ids, 4, 200, collect, &got, &done, &err),
                     LLMQ_ETIMEOUT);
    assert_int_equal(done, 0);
    /* w1 ends before the wait, the rest during it (the fake worker runs now,
     * so all four are there; the wait must report each exactly once) */
    assert_int_equal(fake_worker_finish(f->c, f->prefix, "w1", 0), 1);
    assert_int_equal(fake_worker_finish(f->c, f->prefix, "w1", 0), 0); /* once only */
    /* w1 ended already: dispatch drops it, the fake worker ends the other 3 */
    assert_int_equal(fake_worker_run(f->c, f->prefix, 100, 100, 3), 3);
    assert_int_equal(llmq_producer_wait(f->producer, ids, 4, 5000, collect, &got, &done, &err),
                     LLMQ_OK);
    assert_int_equal(done, 4);
    assert_int_equal(got.n, 4);
    int dead = 0;
    assert_int_equal(llmq_producer_result(f->producer, "w2", &line, &dead, &err), LLMQ_OK);
    assert_non_null(strstr(line, "\"custom_id\":\"w2\""));
    assert_non_null(strstr(line, "\"status_code\":200"));
    llmq_free(line);
    assert_int_equal(dead, 0);
}

static void test_bad_open(void **state)
{
    (void)state;
    struct llmq_producer *p = NULL;
    struct llmq_error err = {0};
    struct llmq_producer_options o = {.redis_url = "http://nope", .account = "a"};
    assert_int_equal(llmq_producer_open(&o, &p, &err), LLMQ_EINVAL);
    o.redis_url = llmq_test_redis_url();
    o.account = "bad{account}";
    assert_int_equal(llmq_producer_open(&o, &p, &err), LLMQ_EINVAL);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d/0", llmq_test_free_port());
    o.redis_url = url;
    o.account = "a";
    o.timeout_ms = 500;
    assert_int_equal(llmq_producer_open(&o, &p, &err), LLMQ_EREDIS);
    llmq_producer_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_enqueue_one_and_duplicate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_invalid_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_results_by_id_and_wait, setup, teardown),
        cmocka_unit_test(test_bad_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
