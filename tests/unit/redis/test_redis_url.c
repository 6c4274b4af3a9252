/* Redis URL parsing (common/redis/redis_url.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "redis/redis_url.h"

static void test_valid(void **state)
{
    (void)state;
    struct llmq_redis_url u;
    struct llmq_error err = {0};
    assert_int_equal(llmq_redis_url_parse("redis://localhost", &u, &err), LLMQ_OK);
    assert_string_equal(u.host, "localhost");
    assert_int_equal(u.port, 6379);
    assert_int_equal(u.db, 0);
    assert_int_equal(llmq_redis_url_parse("redis://app:p%40ss:w@10.0.0.1:6380/3", &u, &err),
                     LLMQ_OK);
    assert_string_equal(u.user, "app");
    assert_string_equal(u.password, "p@ss:w");
    assert_int_equal(u.port, 6380);
    assert_int_equal(u.db, 3);
    assert_int_equal(llmq_redis_url_parse("redis://secret@h:1/", &u, &err), LLMQ_OK);
    assert_string_equal(u.user, "");
    assert_string_equal(u.password, "secret");
    assert_int_equal(llmq_redis_url_parse("redis://[::1]:7000/1", &u, &err), LLMQ_OK);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 7000);
    char red[128];
    llmq_redis_url_parse("redis://app:hunter2@h:1/2", &u, &err);
    llmq_redis_url_redacted(&u, red, sizeof(red));
    assert_null(strstr(red, "hunter2"));
    assert_string_equal(red, "redis://app:***@h:1/2");
}

static void test_invalid(void **state)
{
    (void)state;
    struct llmq_redis_url u;
    struct llmq_error err = {0};
    const char *bad[] = {"",
                         "http://h",
                         "redis://",
                         "redis://:1",
                         "redis://h:0",
                         "redis://h:65536",
                         "redis://h:x",
                         "redis://h/db",
                         "redis://a:%zz@h",
                         "redis://[::1",
                         NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        err.msg[0] = '\0';
        assert_int_equal(llmq_redis_url_parse(bad[i], &u, &err), LLMQ_EINVAL);
        assert_true(strncmp(err.msg, "redis url:", 10) == 0);
    }
    /* The password never appears in an error. */
    assert_int_equal(llmq_redis_url_parse("redis://u:topsecret@h:99999", &u, &err), LLMQ_EINVAL);
    assert_null(strstr(err.msg, "topsecret"));
}

static void test_sentinel(void **state)
{
    (void)state;
    struct llmq_redis_url u;
    struct llmq_error err = {0};
    assert_int_equal(
        llmq_redis_url_parse("redis-sentinel://:pw@s1:26379,s2:26380/mymaster/2", &u, &err),
        LLMQ_OK);
    assert_int_equal(u.n_sentinels, 2);
    assert_string_equal(u.sentinels[0].host, "s1");
    assert_int_equal(u.sentinels[1].port, 26380);
    assert_string_equal(u.master_name, "mymaster");
    assert_int_equal(u.db, 2);
    assert_string_equal(u.password, "pw");
    char red[160];
    llmq_redis_url_redacted(&u, red, sizeof(red));
    assert_null(strstr(red, "pw@"));
    const char *bad[] = {"redis-sentinel://s1:26379", "redis-sentinel://s1/m",
                         "redis-sentinel:///m",       "redis-sentinel://s1:0/m",
                         "redis-sentinel://s1:1/",    NULL};
    for (int i = 0; bad[i] != NULL; i++)
        assert_int_equal(llmq_redis_url_parse(bad[i], &u, &err), LLMQ_EINVAL);
}

static void test_cluster(void **state)
{
    (void)state;
    struct llmq_redis_url u;
    struct llmq_error err = {0};
    /* IPv6 seeds in brackets, beside names and IPv4 */
    assert_int_equal(
        llmq_redis_url_parse("redis+cluster://app:p%40ss@[::1]:7000,n2:7001,[fe80::1%25eth0]:7002",
                             &u, &err),
        LLMQ_OK);
    assert_int_equal(u.n_seeds, 3);
    assert_string_equal(u.seeds[0].host, "::1");
    assert_int_equal(u.seeds[0].port, 7000);
    assert_string_equal(u.seeds[1].host, "n2");
    assert_string_equal(u.seeds[2].host, "fe80::1%eth0"); /* a zone, percent-escaped */
    assert_int_equal(u.seeds[2].port, 7002);
    assert_string_equal(u.host, "::1"); /* until routed, the first seed */
    char red6[256];
    llmq_redis_url_redacted(&u, red6, sizeof(red6));
    assert_string_equal(red6, "redis+cluster://app:***@[::1]:7000,.../0");
    assert_int_equal(llmq_redis_url_parse("redis+cluster://[::1]:7000,[::1]:7001", &u, &err),
                     LLMQ_OK);
    assert_int_equal(u.n_seeds, 2);
    assert_string_equal(u.seeds[1].host, "::1");
    assert_int_equal(u.seeds[1].port, 7001);
    /* an IPv6 seed without brackets, or without a port, is refused naming the form */
    const char *bad6[] = {"redis+cluster://::1:7000",
                          "redis+cluster://[::1]",
                          "redis+cluster://[::1]7000",
                          "redis+cluster://[::1:7000",
                          "redis+cluster://[]:7000",
                          "redis+cluster://h:1,[::1]:0",
                          "redis-sentinel://[::1]:26379,::1:26380/m",
                          NULL};
    for (int i = 0; bad6[i] != NULL; i++) {
        err.msg[0] = '\0';
        assert_int_equal(llmq_redis_url_parse(bad6[i], &u, &err), LLMQ_EINVAL);
        if (strstr(err.msg, "[::1]:port") == NULL)
            fprintf(stderr, "%s: %s\n", bad6[i], err.msg);
        assert_non_null(strstr(err.msg, "[::1]:port"));
    }
    assert_int_equal(llmq_redis_url_parse("redis-sentinel://[::1]:26379,[::1]:26380/m", &u, &err),
                     LLMQ_OK);
    assert_string_equal(u.sentinels[1].host, "::1");
    assert_int_equal(u.sentinels[1].port, 26380);
    char addr[64];
    llmq_redis_addr_format("::1", 7000, addr, sizeof(addr));
    assert_string_equal(addr, "[::1]:7000");
    llmq_redis_addr_format("10.0.0.1", 7000, addr, sizeof(addr));
    assert_string_equal(addr, "10.0.0.1:7000");
    assert_int_equal(
        llmq_redis_url_parse("redis+cluster://app:p%40ss@10.0.0.1:7000,n2:7001/0", &u, &err),
        LLMQ_OK);
    assert_true(llmq_redis_url_is_cluster(&u));
    assert_int_equal(u.n_seeds, 2);
    assert_string_equal(u.seeds[0].host, "10.0.0.1");
    assert_int_equal(u.seeds[1].port, 7001);
    assert_string_equal(u.user, "app");
    assert_string_equal(u.password, "p@ss");
    assert_int_equal(u.db, 0);
    assert_int_equal(u.route_slot, -1);
    /* until routed, the first seed */
    assert_string_equal(u.host, "10.0.0.1");
    assert_int_equal(u.port, 7000);
    llmq_redis_url_route(&u, "user1000"); /* CLUSTER KEYSLOT {user1000}x is 3443 */
    assert_int_equal(u.route_slot, 3443);
    char red[256];
    llmq_redis_url_redacted(&u, red, sizeof(red));
    assert_null(strstr(red, "p@ss"));
    assert_non_null(strstr(red, "redis+cluster://app:***@10.0.0.1:7000"));
    /* a plain URL is not routed */
    assert_int_equal(llmq_redis_url_parse("redis://h:1", &u, &err), LLMQ_OK);
    llmq_redis_url_route(&u, "user1000");
    assert_int_equal(u.route_slot, -1);
    assert_false(llmq_redis_url_is_cluster(&u));
    const char *bad[] = {
        "redis+cluster://",       "redis+cluster://h",     "redis+cluster://h:0",
        "redis+cluster://h:1,/0", "redis+cluster://h:1/3", "redis+cluster://h:1,:2",
        "rediss+cluster://h:1",   "rediss://h:1",          NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        err.msg[0] = '\0';
        assert_int_equal(llmq_redis_url_parse(bad[i], &u, &err), LLMQ_EINVAL);
        assert_true(strncmp(err.msg, "redis url:", 10) == 0);
    }
    assert_int_equal(llmq_redis_url_parse("redis+cluster://h:1/3", &u, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "database 0"));
    assert_int_equal(llmq_redis_url_parse("rediss+cluster://h:1", &u, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "TLS"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_sentinel),
        cmocka_unit_test(test_cluster),
    };
    return cmocka_run_group_tests_name("redis_url", tests, NULL, NULL);
}
