/* llmq results (by id, --all, --wait with a timeout, missing ids) and
 * llmq settings (get, set with checks, unset back to the default). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "jobs_cli_run.h"
#include "jobs_fake_worker.h"
#include "account.h"
#include "llmq/llmq.h"
#include "redis/redis.h"
#include "testsupport.h"

#define BODY "{\"model\":\"text-embedding-3-small\",\"input\":\"x\"}"

static void test_results(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "results");
    const char *ids[] = {"r1", "r2", "r3"};
    for (int i = 0; i < 3; i++) {
        struct llmq_job_options jo = {.job_id = ids[i]};
        assert_int_equal(llmq_producer_enqueue(a.producer, "/v1/embeddings", BODY, &jo, NULL, NULL),
                         LLMQ_OK);
    }
    const char *one[] = {"llmq", "results", "r1", NULL};
    struct cli_run r = cli_run(a.name, one);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "1 of 1 job(s) have no result"));
    cli_free(&r);
    const char *waiting[] = {"llmq", "results", "--wait", "--timeout", "1", "r1", NULL};
    r = cli_run(a.name, waiting);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "still running"));
    cli_free(&r);

    assert_int_equal(fake_worker_run(a.c, a.prefix, 10, 100, 3), 3); /* r3 dies */
    const char *two[] = {"llmq", "results", "r2", "r1", NULL};
    r = cli_run(a.name, two);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 2);
    assert_non_null(strstr(r.out, "\"custom_id\":\"r1\""));
    cli_free(&r);
    const char *dead[] = {"llmq", "results", "--wait", "r3", NULL};
    r = cli_run(a.name, dead);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.out, "\"code\":\"http_400\""));
    cli_free(&r);
    const char *all[] = {"llmq", "results", "--all", NULL};
    r = cli_run(a.name, all);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 3);
    assert_non_null(strstr(strstr(r.out, "r2"), "r3")); /* done ones first, then dead */
    cli_free(&r);
    llmq_test_account_close(&a);
}

/* Results written by an older version (P res:<id>, indexed in the ZSET
 * P results; docs/upgrading.md) are found by every reader: llmq results by
 * id, --wait and --all, llmq status, the producer API, and enqueue's
 * idempotency. o1 still has its hash (state done, no result field), o2 only
 * its result; n1 finished with this version. */
static void test_old_results_found(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "oldres");
    freeReplyObject(redisCommand(a.c, "SET %sres:o1 {\"custom_id\":\"o1\"}", a.prefix));
    freeReplyObject(redisCommand(a.c, "HSET %sjob:o1 id o1 state done fin_ms 1000", a.prefix));
    freeReplyObject(redisCommand(a.c, "SET %sres:o2 {\"custom_id\":\"o2\"}", a.prefix));
    struct llmq_job_options jo = {.job_id = "n1"};
    assert_int_equal(llmq_producer_enqueue(a.producer, "/v1/embeddings", BODY, &jo, NULL, NULL),
                     LLMQ_OK);
    assert_int_equal(fake_worker_run(a.c, a.prefix, 10, 100, 0), 1);
    /* (written after n1's finish, which would have moved it to P done) */
    freeReplyObject(redisCommand(a.c, "ZADD %sresults 1000 o1 1001 o2", a.prefix));

    const char *named[] = {"llmq", "results", "o2", "o1", "n1", NULL};
    struct cli_run r = cli_run(a.name, named);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 3);
    assert_non_null(strstr(r.out, "\"custom_id\":\"o1\""));
    assert_non_null(strstr(r.out, "\"custom_id\":\"o2\""));
    cli_free(&r);
    const char *waiting[] = {"llmq", "results", "--wait", "--timeout", "5", "o2", NULL};
    r = cli_run(a.name, waiting);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "{\"custom_id\":\"o2\"}\n");
    cli_free(&r);
    /* --all: what is left of the older index first (o1, o2), then P done */
    const char *all[] = {"llmq", "results", "--all", NULL};
    r = cli_run(a.name, all);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 3);
    const char *o1 = strstr(r.out, "\"o1\""), *o2 = strstr(r.out, "\"o2\"");
    assert_true(o1 != NULL && o2 != NULL && o1 < o2 && strstr(o2, "n1") != NULL);
    cli_free(&r);
    const char *status[] = {"llmq", "status", "--json", NULL};
    r = cli_run(a.name, status);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"results_kept\":3"));
    cli_free(&r);

    char *line = NULL;
    int dead = -1;
    assert_int_equal(llmq_producer_result(a.producer, "o2", &line, &dead, NULL), LLMQ_OK);
    assert_string_equal(line, "{\"custom_id\":\"o2\"}");
    assert_int_equal(dead, 0);
    llmq_free(line);
    jo.job_id = "o2";
    assert_int_equal(llmq_producer_enqueue(a.producer, "/v1/embeddings", BODY, &jo, NULL, NULL),
                     LLMQ_EDUPLICATE);
    llmq_test_account_close(&a);
}

/* An id finished, gone (its hash expired), enqueued and finished again has
 * two entries in P done: the old one neither prints the new result a second
 * time in --all nor takes it away when the sweep drops that entry. */
static void test_id_finished_twice(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "twice");
    for (int round = 0; round < 2; round++) {
        struct llmq_job_options jo = {.job_id = "x0"};
        assert_int_equal(llmq_producer_enqueue(a.producer, "/v1/embeddings", BODY, &jo, NULL, NULL),
                         LLMQ_OK);
        assert_int_equal(fake_worker_run(a.c, a.prefix, 10, 100, 0), 1);
        if (round == 0) {
            freeReplyObject(
                redisCommand(a.c, "DEL %sjob:x0 %sres:x0", a.prefix, a.prefix)); /* expired */
            usleep(5 * 1000); /* a later fin_ms */
        }
    }
    assert_int_equal(llmq_test_redis_int(a.c, "LLEN %sdone", a.prefix, ""), 2);
    const char *all[] = {"llmq", "results", "--all", NULL};
    struct cli_run r = cli_run(a.name, all);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 1);
    cli_free(&r);
    /* result_max 2 with y0 done too: the sweep drops the oldest entry (x0's
     * first), and x0's result stays */
    freeReplyObject(redisCommand(a.c, "HSET %ssettings result_max 2", a.prefix));
    struct llmq_job_options jo = {.job_id = "y0"};
    assert_int_equal(llmq_producer_enqueue(a.producer, "/v1/embeddings", BODY, &jo, NULL, NULL),
                     LLMQ_OK);
    assert_int_equal(fake_worker_run(a.c, a.prefix, 10, 100, 0), 1);
    assert_int_equal(llmq_test_redis_int(a.c, "LLEN %sdone", a.prefix, ""), 2);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sres:%s", a.prefix, "x0"), 1);
    r = cli_run(a.name, all);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 2);
    assert_non_null(strstr(strstr(r.out, "\"x0\""), "\"y0\"")); /* in finish order */
    cli_free(&r);
    llmq_test_account_close(&a);
}

static void test_settings(void **state)
{
    (void)state;
    char account[96];
    llmq_test_unique_name(account, sizeof(account), "settings");
    const char *get[] = {"llmq", "settings", NULL};
    struct cli_run r = cli_run(account, get);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "result_ttl_ms 604800000 (default)"));
    assert_non_null(strstr(r.out, "max_body_bytes 1048576 (default)"));
    cli_free(&r);
    const char *set[] = {"llmq", "settings", "set", "result_max", "500", NULL};
    r = cli_run(account, set);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "result_max 500\n");
    cli_free(&r);
    const char *bad[] = {"llmq", "settings", "set", "result_max", "-1", NULL};
    r = cli_run(account, bad);
    assert_int_equal(r.status, 2);
    cli_free(&r);
    const char *unknown[] = {"llmq", "settings", "set", "nope", "1", NULL};
    r = cli_run(account, unknown);
    assert_int_equal(r.status, 2);
    cli_free(&r);
    const char *unset[] = {"llmq", "settings", "unset", "result_max", NULL};
    r = cli_run(account, unset);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "result_max 1000000 (default)\n");
    cli_free(&r);
    /* the enqueue size limit comes from settings when no flag is given */
    const char *small[] = {"llmq", "settings", "set", "max_body_bytes", "20", NULL};
    r = cli_run(account, small);
    cli_free(&r);
    char path[] = "/tmp/llmq-settings-XXXXXX";
    int fd = mkstemp(path);
    const char *line = "{\"custom_id\":\"big\",\"url\":\"/v1/"
                       "embeddings\",\"body\":{\"model\":\"m\",\"input\":\"a long "
                       "enough input\"}}\n";
    assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    close(fd);
    const char *enq[] = {"llmq", "enqueue", path, NULL};
    r = cli_run(account, enq);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "over the size limit"));
    cli_free(&r);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results),
        cmocka_unit_test(test_old_results_found),
        cmocka_unit_test(test_id_finished_twice),
        cmocka_unit_test(test_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
