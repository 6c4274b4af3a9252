/* 100,000 small jobs through the producer API (validation, cost estimation,
 * pipelined enqueue) into one account, then counted: one stream entry and
 * one hash per job, and enqueueing them again creates none. Under the
 * sanitizers this takes a few seconds: everything is pipelined. */
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
#include "testsupport.h"

#define N 100000

static void test_100k(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "e100k");
    struct llmq_error err = {0};

    struct llmq_request *reqs = calloc(N, sizeof(*reqs));
    struct llmq_enqueue_result *res = calloc(N, sizeof(*res));
    char(*ids)[16] = calloc(N, sizeof(*ids));
    char(*bodies)[128] = calloc(N, sizeof(*bodies));
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof(ids[i]), "j%d", i);
        snprintf(bodies[i], sizeof(bodies[i]),
                 "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":"
                 "\"number %d\"}],\"max_tokens\":8}",
                 i);
        reqs[i] = (struct llmq_request){
            .url = "/v1/chat/completions", .body = bodies[i], .options = {.job_id = ids[i]}};
    }
    long long t0 = llmq_test_now_ms();
    assert_int_equal(llmq_producer_enqueue_many(a.producer, reqs, N, res, &err), LLMQ_OK);
    long long t1 = llmq_test_now_ms();
    fprintf(stderr, "enqueued %d jobs in %lld ms\n", N, t1 - t0);
    size_t created = 0;
    for (int i = 0; i < N; i++)
        created += res[i].rc == LLMQ_OK;
    assert_int_equal(created, N);

    redisReply *r = redisCommand(a.c, "LLEN %sbacklog:normal", a.prefix);
    assert_int_equal(r->integer, N);
    freeReplyObject(r);
    /* every job is there, a record each (waiting): pipelined EXISTS */
    for (int i = 0; i < N; i++)
        redisAppendCommand(a.c, "EXISTS %sjr:%s", a.prefix, ids[i]);
    long long found = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(redisGetReply(a.c, (void **)&r), REDIS_OK);
        found += r->integer;
        freeReplyObject(r);
    }
    assert_int_equal(found, N);
    fprintf(stderr, "counted in %lld ms\n", llmq_test_now_ms() - t1);

    /* again (a tenth of them, to keep the test short): duplicates, nothing new */
    assert_int_equal(llmq_producer_enqueue_many(a.producer, reqs, N / 10, res, &err), LLMQ_OK);
    for (int i = 0; i < N / 10; i++)
        assert_int_equal(res[i].rc, LLMQ_EDUPLICATE);
    r = redisCommand(a.c, "LLEN %sbacklog:normal", a.prefix);
    assert_int_equal(r->integer, N);
    freeReplyObject(r);

    /* clean up: this a.name is large */
    r = redisCommand(a.c, "DEL %sbacklog:normal %skq:normal|gpt-4o-mini||", a.prefix, a.prefix);
    freeReplyObject(r);
    for (int i = 0; i < N; i++)
        redisAppendCommand(a.c, "UNLINK %sjr:%s", a.prefix, ids[i]);
    for (int i = 0; i < N; i++) {
        assert_int_equal(redisGetReply(a.c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    llmq_test_account_close(&a);
    free(reqs);
    free(res);
    free(ids);
    free(bodies);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_100k)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
