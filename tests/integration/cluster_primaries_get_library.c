/* Redis Cluster routing knows no script: the layer above it hands each new
 * primary what it needs through a hook (cluster.h
 * llmq_cluster_on_new_primary), and the script runner sets it before main
 * (script.c: the Functions library). A cluster of 3 primaries, no call run:
 *   - one synchronous connect leaves the library on every primary (the
 *     first map fetched hands them all over);
 *   - libraries flushed and the hook cleared, a connect to the same nodes as
 *     another cluster URL (a new map) gives them nothing: the hook, not the
 *     connect or the cluster, loads it;
 *   - the runner's hook set again, a third URL's connect loads it on every
 *     primary again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster_support.h"
#include "redis/cluster.h"

#define PRIMARIES 3

/* How many primaries of cl have this build's library. */
static int primaries_with_library(struct llmq_test_cluster *cl)
{
    int n = 0;
    for (int i = 0; i < cl->n_primaries; i++) {
        redisContext *c = llmq_test_cluster_connect(cl, i);
        assert_non_null(c);
        redisReply *r = redisCommand(c, "FUNCTION LIST LIBRARYNAME %s", llmq_script_library_name);
        n += r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1;
        if (r != NULL)
            freeReplyObject(r);
        redisFree(c);
    }
    return n;
}

static void flush_libraries(struct llmq_test_cluster *cl)
{
    for (int i = 0; i < cl->n_primaries; i++) {
        redisContext *c = llmq_test_cluster_connect(cl, i);
        assert_non_null(c);
        redisReply *r = redisCommand(c, "FUNCTION FLUSH");
        assert_true(r != NULL && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
        redisFree(c);
    }
}

/* Connects once to cl as the cluster URL whose first seed is node first (a
 * cluster state of its own: the map is fetched anew) and disconnects. */
static void connect_once(struct llmq_test_cluster *cl, int first)
{
    char url[1024];
    int n = snprintf(url, sizeof(url), "redis+cluster://");
    for (int k = 0; k < cl->n_primaries; k++)
        n += snprintf(url + n, sizeof(url) - (size_t)n, "%s127.0.0.1:%d", k ? "," : "",
                      cl->nodes[(first + k) % cl->n_primaries].port);
    struct llmq_error err = {0};
    redisContext *c = llmq_redis_connect(url, 5000, &err);
    if (c == NULL)
        fail_msg("connect %s: %s", url, err.msg);
    redisFree(c);
}

static void test_primaries_get_the_library_through_the_hook(void **state)
{
    (void)state;
    struct llmq_test_cluster cl;
    assert_int_equal(llmq_test_cluster_start(&cl, PRIMARIES, 0), 0);
    assert_int_equal(primaries_with_library(&cl), 0);

    connect_once(&cl, 0);
    assert_int_equal(primaries_with_library(&cl), PRIMARIES);

    flush_libraries(&cl);
    llmq_cluster_on_new_primary(NULL);
    connect_once(&cl, 1);
    assert_int_equal(primaries_with_library(&cl), 0);

    llmq_cluster_on_new_primary(llmq_script_ensure_loaded);
    connect_once(&cl, 2);
    assert_int_equal(primaries_with_library(&cl), PRIMARIES);
    llmq_test_cluster_stop(&cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_primaries_get_the_library_through_the_hook),
    };
    return cmocka_run_group_tests_name("cluster_primaries_get_library", tests, NULL, NULL);
}
