/* The producer across Redis trouble, on a private redis-server: a FUNCTION
 * FLUSH in the middle of a pipelined enqueue (every call meets "Function not
 * found" and is run again), and a restart (calls fail with LLMQ_EREDIS while it is down,
 * then the same handle reconnects and works). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "llmq/llmq.h"
#include "testsupport.h"

#define N 5000

static struct llmq_request *make_requests(int n, const char *tag, char (*ids)[32])
{
    struct llmq_request *reqs = calloc((size_t)n, sizeof(*reqs));
    for (int i = 0; i < n; i++) {
        snprintf(ids[i], 32, "%s%d", tag, i);
        reqs[i] =
            (struct llmq_request){.url = "/v1/embeddings",
                                  .body = "{\"model\":\"text-embedding-3-small\",\"input\":\"x\"}",
                                  .options = {.job_id = ids[i]}};
    }
    return reqs;
}

static long long xlen(redisContext *c)
{
    redisReply *r = redisCommand(c, "LLEN llmq:{recon}:backlog:normal");
    long long v = r ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

static void test_noscript_and_restart(void **state)
{
    (void)state;
    struct llmq_test_redis s = {0};
    assert_int_equal(llmq_test_redis_start(&s, "--save '' --appendonly no"), 0);
    struct llmq_producer_options o = {.redis_url = s.url, .account = "recon", .timeout_ms = 2000};
    struct llmq_producer *p = NULL;
    struct llmq_error err = {0};
    assert_int_equal(llmq_producer_open(&o, &p, &err), LLMQ_OK);
    char(*ids)[32] = calloc(N, 32);
    struct llmq_enqueue_result *res = calloc(N, sizeof(*res));

    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s.port, tv);
    freeReplyObject(redisCommand(c, "FUNCTION FLUSH"));
    struct llmq_request *reqs = make_requests(N, "a", ids);
    assert_int_equal(llmq_producer_enqueue_many(p, reqs, N, res, &err), LLMQ_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(res[i].rc, LLMQ_OK);
    assert_int_equal(xlen(c), N);
    redisFree(c);
    free(reqs);

    llmq_test_redis_stop(&s);
    reqs = make_requests(10, "b", ids);
    assert_int_equal(llmq_producer_enqueue_many(p, reqs, 10, res, &err), LLMQ_EREDIS);
    assert_int_equal(llmq_producer_enqueue_many(p, reqs, 10, res, &err), LLMQ_EREDIS);
    char *line = NULL;
    assert_int_equal(llmq_producer_result(p, "a1", &line, NULL, &err), LLMQ_EREDIS);
    assert_int_equal(llmq_test_redis_start(&s, "--save '' --appendonly no"), 0); /* same port */
    assert_int_equal(llmq_producer_enqueue_many(p, reqs, 10, res, &err), LLMQ_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(res[i].rc, LLMQ_OK);
    c = redisConnectWithTimeout("127.0.0.1", s.port, tv);
    assert_int_equal(xlen(c), 10); /* a fresh server: only the new ones */
    redisFree(c);
    free(reqs);
    free(res);
    free(ids);
    llmq_producer_close(p);
    llmq_test_redis_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_noscript_and_restart)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
