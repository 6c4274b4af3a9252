/* Retention (lua/lib/jobs.lua): done results kept by count and by age,
 * dead jobs kept until a human acts, events bounded, and queue streams trimmed
 * of acknowledged entries only: pending and undelivered entries stay. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "account.h"
#include "jobs_fake_worker.h"
#include "llmq/llmq.h"
#include "redis/redis.h"
#include "testsupport.h"

#define BODY "{\"model\":\"text-embedding-3-small\",\"input\":\"x\"}"

/* Enqueues n jobs "<tag><i>". */
static void enqueue_n(struct llmq_test_account *a, const char *tag, int n)
{
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s%d", tag, i);
        struct llmq_job_options o = {.job_id = id};
        assert_int_equal(llmq_producer_enqueue(a->producer, "/v1/embeddings", BODY, &o, NULL, NULL),
                         LLMQ_OK);
    }
}

/* Enqueues n jobs "<tag><i>" and lets the fake worker end them all (every
 * die_every-th dead, 0: none). */
static void enqueue_and_end(struct llmq_test_account *a, const char *tag, int n, int die_every)
{
    enqueue_n(a, tag, n);
    long ended = 0;
    while (ended < n)
        ended += fake_worker_run(a->c, a->prefix, 100, 100, die_every);
}

static void test_count_and_age(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "retcount");
    freeReplyObject(redisCommand(a.c, "HSET %ssettings result_max 5", a.prefix));
    enqueue_and_end(&a, "c", 20, 0);
    assert_int_equal(llmq_test_redis_int(a.c, "LLEN %sdone", a.prefix, ""), 5);
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof(id), "c%d", i);
        long long want = i >= 15; /* the newest five */
        assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sres:%s", a.prefix, id), want);
        /* a done job is its ended record alone: no hash */
        assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sjob:%s", a.prefix, id), 0);
    }
    /* a done job keeps no body; its id stays taken while the result lives */
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sbody:c19%s", a.prefix, ""), 0);
    struct llmq_job_options o = {.job_id = "c19"};
    assert_int_equal(llmq_producer_enqueue(a.producer, "/v1/embeddings", BODY, &o, NULL, NULL),
                     LLMQ_EDUPLICATE);
    /* ... and is free again once retention dropped it */
    o.job_id = "c0";
    assert_int_equal(llmq_producer_enqueue(a.producer, "/v1/embeddings", BODY, &o, NULL, NULL),
                     LLMQ_OK);

    /* age: results older than result_ttl_ms go at the next finish */
    freeReplyObject(
        redisCommand(a.c, "HSET %ssettings result_ttl_ms 300 result_max 1000", a.prefix));
    usleep(400 * 1000);
    assert_int_equal(fake_worker_run(a.c, a.prefix, 10, 100, 0), 1); /* c0 again */
    assert_int_equal(llmq_test_redis_int(a.c, "LLEN %sdone", a.prefix, ""), 1);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sjob:%s", a.prefix, "c19"), 0);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sres:%s", a.prefix, "c0"), 1);
    llmq_test_account_close(&a);
}

static void test_dead_kept(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "retdead");
    freeReplyObject(redisCommand(a.c, "HSET %ssettings result_max 1", a.prefix));
    enqueue_and_end(&a, "d", 6, 2); /* every 2nd dies */
    assert_int_equal(llmq_test_redis_int(a.c, "XLEN %sdead", a.prefix, ""), 3);
    assert_int_equal(llmq_test_redis_int(a.c, "LLEN %sdone", a.prefix, ""), 1);
    redisReply *r = redisCommand(a.c, "XRANGE %sdead - +", a.prefix);
    for (size_t i = 0; i < r->elements; i++) {
        const char *id = r->element[i]->element[1]->element[1]->str;
        assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sres:%s", a.prefix, id), 1);
        assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sbody:%s", a.prefix, id), 1);
        assert_int_equal(llmq_test_redis_int(a.c, "TTL %sjob:%s", a.prefix, id), -1);
    }
    freeReplyObject(r);
    llmq_test_account_close(&a);
}

/* The done index of older versions (a ZSET P results of ids scored by
 * fin_ms, docs/upgrading.md): each finish moves its newest 256 entries to
 * the head of P done, so the list stays in finish order and the ZSET goes;
 * the moved results are then swept as the list's own, oldest first. */
static void test_old_index_moved(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "retold");
    redisReply *t = redisCommand(a.c, "TIME");
    long long now_ms = atoll(t->element[0]->str) * 1000;
    freeReplyObject(t);
    /* 300 results as an older version left them: res:<id>, the hash, the ZSET */
    for (int i = 0; i < 300; i++) {
        long long fin = now_ms - 1000 + i;
        redisAppendCommand(a.c, "SET %sres:old%d {}", a.prefix, i);
        redisAppendCommand(a.c, "HSET %sjob:old%d state done fin_ms %lld", a.prefix, i, fin);
        redisAppendCommand(a.c, "ZADD %sresults %lld old%d", a.prefix, fin, i);
    }
    for (int i = 0; i < 900; i++) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(a.c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    enqueue_and_end(&a, "n", 1, 0);
    assert_int_equal(llmq_test_redis_int(a.c, "ZCARD %sresults", a.prefix, ""), 300 - 256);
    assert_int_equal(llmq_test_redis_int(a.c, "LLEN %sdone", a.prefix, ""), 257);
    enqueue_and_end(&a, "m", 1, 0);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sresults", a.prefix, ""), 0);
    redisReply *r = redisCommand(a.c, "LRANGE %sdone 0 -1", a.prefix);
    assert_int_equal(r->elements, 302);
    for (int i = 0; i < 300; i++) {
        char want[64];
        snprintf(want, sizeof(want), "%lld:old%d", now_ms - 1000 + i, i);
        assert_string_equal(r->element[i]->str, want);
    }
    assert_non_null(strstr(r->element[300]->str, ":n0"));
    assert_non_null(strstr(r->element[301]->str, ":m0"));
    freeReplyObject(r);
    /* by count now: the oldest go first, at most 64 for one finish */
    freeReplyObject(redisCommand(a.c, "HSET %ssettings result_max 100", a.prefix));
    enqueue_and_end(&a, "k", 1, 0);
    assert_int_equal(llmq_test_redis_int(a.c, "LLEN %sdone", a.prefix, ""), 303 - 64);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sres:old63", a.prefix, ""), 0);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sjob:old63", a.prefix, ""), 0);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sres:old64", a.prefix, ""), 1);
    /* a key of that name that is no ZSET is not ours: left alone, no failure */
    freeReplyObject(redisCommand(a.c, "SET %sresults x", a.prefix));
    enqueue_and_end(&a, "s", 1, 0);
    assert_int_equal(llmq_test_redis_int(a.c, "EXISTS %sresults", a.prefix, ""), 1);
    llmq_test_account_close(&a);
}

/* XREADGROUP of count entries of q:normal for consumer; returns the reply. */
static redisReply *read_group(redisContext *c, const char *prefix, const char *consumer, int count)
{
    return redisCommand(c, "XREADGROUP GROUP workers %s COUNT %d STREAMS %sq:normal >", consumer,
                        count, prefix);
}

static void test_trim_acknowledged_only(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "rettrim");
    enqueue_n(&a, "t", 300);
    /* The stream as a worker's deliveries leave it: entries of those jobs */
    for (int i = 0; i < 300; i++)
        freeReplyObject(redisCommand(a.c, "XADD %sq:normal * id t%d", a.prefix, i));
    /* 260 delivered and acknowledged but not deleted (a worker that does not
     * XDEL), then 10 delivered and pending, then 30 never delivered */
    redisReply *r = read_group(a.c, a.prefix, "acker", 260);
    const redisReply *entries = r->element[0]->element[1];
    for (size_t i = 0; i < entries->elements; i++)
        freeReplyObject(redisCommand(a.c, "XACK %sq:normal workers %s", a.prefix,
                                     entries->element[i]->element[0]->str));
    freeReplyObject(r);
    freeReplyObject(read_group(a.c, a.prefix, "slow", 10));
    /* the 256th finish checks the streams */
    for (int i = 0; i < 256; i++) {
        char id[16];
        snprintf(id, sizeof(id), "t%d", i);
        assert_int_equal(fake_worker_finish(a.c, a.prefix, id, 0), 1);
    }
    assert_int_equal(llmq_test_redis_int(a.c, "XLEN %sq:normal", a.prefix, ""), 40);
    r = redisCommand(a.c, "XPENDING %sq:normal workers", a.prefix);
    assert_int_equal(r->element[0]->integer, 10);
    freeReplyObject(r);
    r = read_group(a.c, a.prefix, "late", 100);
    assert_int_equal(r->element[0]->element[1]->elements, 30);
    freeReplyObject(r);
    /* events are kept by age: with events_ttl_ms 1, the next trim (256
     * finishes on) leaves only the newest */
    assert_true(llmq_test_redis_int(a.c, "XLEN %sevents", a.prefix, "") >= 256);
    freeReplyObject(redisCommand(a.c, "HSET %ssettings events_ttl_ms 1", a.prefix));
    for (int i = 256; i < 300; i++) {
        char id[16];
        snprintf(id, sizeof(id), "t%d", i);
        assert_int_equal(fake_worker_finish(a.c, a.prefix, id, 0), 1);
    }
    freeReplyObject(redisCommand(a.c, "HSET %sstats done 511", a.prefix));
    usleep(5 * 1000);
    enqueue_n(&a, "u", 1);
    assert_int_equal(fake_worker_finish(a.c, a.prefix, "u0", 0), 1); /* the 512th */
    assert_true(llmq_test_redis_int(a.c, "XLEN %sevents", a.prefix, "") <= 1);
    llmq_test_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_and_age),
        cmocka_unit_test(test_dead_kept),
        cmocka_unit_test(test_old_index_moved),
        cmocka_unit_test(test_trim_acknowledged_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
