/* The dead-letter stream through the CLI: list (text and JSON), retry by id
 * (fresh attempts, same body, result dropped), retry of a job that is not
 * dead (refused), purge --all (gone for good, the id free again). */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs_cli_run.h"
#include "jobs/job_pack.h"
#include "jobs_fake_worker.h"
#include "account.h"
#include "llmq/llmq.h"
#include "redis/redis.h"
#include "testsupport.h"

#define BODY "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"

static char *hget(redisContext *c, const char *prefix, const char *id, const char *field)
{
    redisReply *r = redisCommand(c, "HGET %sjob:%s %s", prefix, id, field);
    char *v = r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    freeReplyObject(r);
    return v;
}

static void test_list_retry_purge(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "dead");
    const char *ids[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) {
        struct llmq_job_options jo = {.job_id = ids[i], .priority = LLMQ_PRIORITY_LOW};
        assert_int_equal(
            llmq_producer_enqueue(a.producer, "/v1/chat/completions", BODY, &jo, NULL, NULL),
            LLMQ_OK);
    }
    assert_int_equal(fake_worker_run(a.c, a.prefix, 100, 100, 2), 4); /* b and d die */

    const char *list_json[] = {"llmq", "dead", "list", "--json", NULL};
    struct cli_run r = cli_run(a.name, list_json);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 2);
    json_t *first = json_loadb(r.out, (size_t)(strchr(r.out, '\n') - r.out), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(first, "id")), "b");
    assert_string_equal(json_string_value(json_object_get(first, "reason")), "http_400");
    assert_string_equal(json_string_value(json_object_get(json_object_get(first, "error"), "code")),
                        "http_400");
    json_decref(first);
    cli_free(&r);

    const char *retry[] = {"llmq", "dead", "retry", "b", NULL};
    r = cli_run(a.name, retry);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "b\n");
    cli_free(&r);
    char *st = hget(a.c, a.prefix, "b", "state"), *att = hget(a.c, a.prefix, "b", "attempts");
    /* the body kept, as it was stored (packed: jobs/job_pack.h) */
    redisReply *br = redisCommand(a.c, "GET %sbody:b", a.prefix);
    char *body = NULL;
    size_t body_len = 0;
    if (br->type == REDIS_REPLY_STRING)
        assert_int_equal(llmq_job_unpack(br->str, br->len, 1 << 20, &body, &body_len, NULL),
                         LLMQ_OK);
    freeReplyObject(br);
    assert_string_equal(st, "queued");
    assert_string_equal(att, "0");
    assert_string_equal(body, BODY);
    free(st);
    free(att);
    free(body);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sres:%s", a.prefix, "b"), 0);
    assert_int_equal(llmq_test_redis_int(a.c, "XLEN %sdead", a.prefix, ""), 1);
    assert_int_equal(llmq_test_redis_int(a.c, "LLEN %sbacklog:low", a.prefix, ""),
                     1); /* the retried job */
    /* the worker can run it again; this time it is done */
    assert_int_equal(fake_worker_run(a.c, a.prefix, 100, 100, 0), 1);
    char *line = NULL;
    int dead = 1;
    assert_int_equal(llmq_producer_result(a.producer, "b", &line, &dead, NULL), LLMQ_OK);
    assert_int_equal(dead, 0);
    llmq_free(line);

    const char *retry_done[] = {"llmq", "dead", "retry", "a", NULL};
    r = cli_run(a.name, retry_done);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "a: is not dead"));
    cli_free(&r);

    const char *purge[] = {"llmq", "dead", "purge", "--all", NULL};
    r = cli_run(a.name, purge);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "d\n");
    cli_free(&r);
    assert_int_equal(llmq_test_redis_int(a.c, "XLEN %sdead", a.prefix, ""), 0);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sjob:%s", a.prefix, "d"), 0);
    struct llmq_job_options jo = {.job_id = "d"};
    assert_int_equal(
        llmq_producer_enqueue(a.producer, "/v1/chat/completions", BODY, &jo, NULL, NULL), LLMQ_OK);

    const char *list_text[] = {"llmq", "dead", "list", NULL};
    r = cli_run(a.name, list_text);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "");
    cli_free(&r);
    const char *bad[] = {"llmq", "dead", "retry", NULL};
    r = cli_run(a.name, bad);
    assert_int_equal(r.status, 2);
    cli_free(&r);
    llmq_test_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_list_retry_purge)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
