/* A producer sends the Functions library only when Redis does not have it
 * (llmq_script_ensure_loaded): the first producer of a new Redis loads it,
 * a second one only asks (INFO commandstats counts no second FUNCTION LOAD),
 * a Redis that lost it (FUNCTION FLUSH) or holds only another build's
 * library gets it again, and an enqueue after each connect runs. A private
 * redis-server, so the command counts are this test's alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "llmq/llmq.h"
#include "redis/script.h"
#include "testsupport.h"

static struct llmq_test_redis redis;
static redisContext *admin;

/* calls= of one command in INFO commandstats ("function|load"), 0 if none. */
static long long calls_of(const char *command)
{
    redisReply *r = redisCommand(admin, "INFO commandstats");
    assert_true(r != NULL && r->type == REDIS_REPLY_STRING);
    char want[64];
    snprintf(want, sizeof(want), "cmdstat_%s:calls=", command);
    const char *p = strstr(r->str, want);
    long long n = p ? strtoll(p + strlen(want), NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

static void command(const char *text)
{
    redisReply *r = redisCommand(admin, text);
    assert_true(r != NULL && r->type != REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

/* Opens a producer (which connects and prepares), counts the FUNCTION LOADs
 * so far (before any call: a call that misses would load too), enqueues one
 * job, closes. Returns that count. */
static long long producer_connects(const char *account)
{
    struct llmq_producer_options o = {.redis_url = redis.url, .account = account};
    struct llmq_producer *p = NULL;
    struct llmq_error err = {0};
    assert_int_equal(llmq_producer_open(&o, &p, &err), LLMQ_OK);
    long long loads = calls_of("function|load");
    struct llmq_enqueue_result res;
    assert_int_equal(llmq_producer_enqueue(p, "/v1/chat/completions",
                                           "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":"
                                           "\"user\",\"content\":\"hi\"}]}",
                                           NULL, &res, &err),
                     LLMQ_OK);
    llmq_producer_close(p);
    return loads;
}

static int setup(void **state)
{
    (void)state;
    if (llmq_test_redis_start(&redis, NULL) != 0)
        return -1;
    admin = redisConnect("127.0.0.1", redis.port);
    return admin != NULL && admin->err == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    redisFree(admin);
    llmq_test_redis_stop(&redis);
    return 0;
}

static void test_second_connect_sends_no_load(void **state)
{
    (void)state;
    command("FUNCTION FLUSH");
    command("CONFIG RESETSTAT");
    assert_int_equal(producer_connects("a1"), 1);
    assert_int_equal(producer_connects("a1"), 1);
    /* another account of the same Redis: the same library */
    assert_int_equal(producer_connects("a2"), 1);
    assert_int_equal(calls_of("function|load"), 1);
    assert_int_equal(calls_of("function|list"), 3);
}

static void test_lost_library_is_loaded_again(void **state)
{
    (void)state;
    producer_connects("b1");
    command("FUNCTION FLUSH");
    command("CONFIG RESETSTAT");
    assert_int_equal(producer_connects("b1"), 1);
}

static void test_another_builds_library_does_not_count(void **state)
{
    (void)state;
    command("FUNCTION FLUSH");
    /* an older build's library: another digest, so another name */
    redisReply *old = redisCommand(admin, "FUNCTION LOAD %s",
                                   "#!lua name=llmq_000000000000\n"
                                   "redis.register_function('llmq_enqueue_000000000000', "
                                   "function() return 1 end)");
    assert_true(old != NULL && old->type == REDIS_REPLY_STRING);
    freeReplyObject(old);
    command("CONFIG RESETSTAT");
    assert_int_equal(producer_connects("c1"), 1); /* loaded by the connect, not a call */
    redisReply *r = redisCommand(admin, "FUNCTION LIST LIBRARYNAME %s", llmq_script_library_name);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 1);
    freeReplyObject(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_connect_sends_no_load),
        cmocka_unit_test(test_lost_library_is_loaded_again),
        cmocka_unit_test(test_another_builds_library_does_not_count),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
