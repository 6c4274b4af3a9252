/* A long-lived producer (the synchronous API) over Redis Cluster fetches the
 * slot map again after a map that had no primary for its slot: 3 primaries,
 * no replicas, coverage not required (the slots of a dead node do not stop
 * the others). The producer's account lives on primary 0.
 *   1. an enqueue works;
 *   2. primary 0 dies and no node serves the account's slot any more
 *      (CLUSTER DELSLOTS on the others): the next call fails on the lost
 *      connection, the one after it reconnects, fetches the map and meets
 *      "no primary serves slot";
 *   3. primary 1 takes the slot (CLUSTER ADDSLOTS): the same handle's next
 *      call succeeds on primary 1, and the map was fetched again for it (a
 *      map with a hole is stale; keeping it would refuse every call of the
 *      process until a restart). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_fixture.h"
#include "llmq/llmq.h"
#include "redis/cluster.h"
#include "redis/cluster_reply.h"

#define BODY "{\"model\":\"text-embedding-3-small\",\"input\":\"x\"}"

/* Runs fmt on node i of c; asserts a reply that is no error. */
static void node_ok(struct llmq_test_cluster *c, int i, const char *fmt, ...)
{
    redisContext *r = llmq_test_cluster_connect(c, i);
    assert_non_null(r);
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    if (rep == NULL || rep->type == REDIS_REPLY_ERROR)
        fprintf(stderr, "node %d: %s: %s\n", i, fmt, rep ? rep->str : r->errstr);
    assert_non_null(rep);
    assert_int_not_equal(rep->type, REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    redisFree(r);
}

/* The port of the primary node i says serves slot (0: none). */
static int slot_port_at(struct llmq_test_cluster *c, int i, int slot)
{
    redisContext *r = llmq_test_cluster_connect(c, i);
    assert_non_null(r);
    redisReply *rep = redisCommand(r, "CLUSTER SLOTS");
    struct llmq_cluster_map *map = calloc(1, sizeof(*map));
    assert_non_null(map);
    int port = 0;
    if (llmq_cluster_slots_parse(rep, "127.0.0.1", map) >= 0 && map->owner[slot] >= 0)
        port = map->nodes[map->owner[slot]].port;
    free(map);
    freeReplyObject(rep);
    redisFree(r);
    return port;
}

/* Waits (a deadline against hanging) until nodes 1 and 2 both say slot is
 * served by the node of port (0: by none). */
static void wait_slot_port(struct llmq_test_cluster *c, int slot, int port)
{
    long long deadline = llmq_test_now_ms() + 20000;
    while (slot_port_at(c, 1, slot) != port || slot_port_at(c, 2, slot) != port) {
        assert_true(llmq_test_now_ms() < deadline);
        usleep(20000);
    }
}

static long long map_fetches(void)
{
    struct llmq_cluster_counts n;
    llmq_cluster_counts(&n);
    return n.map_fetches;
}

static void test_map_without_the_slot_is_fetched_again(void **state)
{
    (void)state;
    struct llmq_test_cluster cl;
    assert_int_equal(llmq_test_cluster_start(&cl, 3, 0), 0);
    for (int i = 0; i < 3; i++)
        node_ok(&cl, i, "CONFIG SET cluster-require-full-coverage no");
    char names[3][64];
    llmq_test_cluster_spread_accounts(&cl, "stalemap", 3, names);
    int slot = llmq_test_cluster_account_slot(names[0]);
    assert_int_equal(llmq_test_cluster_owner(&cl, slot), 0);

    /* 1. a long-lived handle; its first enqueue works */
    struct llmq_producer_options o = {.redis_url = cl.url, .account = names[0], .timeout_ms = 2000};
    struct llmq_producer *p = NULL;
    struct llmq_error err = {0};
    assert_int_equal(llmq_producer_open(&o, &p, &err), LLMQ_OK);
    struct llmq_enqueue_result res;
    struct llmq_job_options jo = {.job_id = "j1"};
    assert_int_equal(llmq_producer_enqueue(p, "/v1/embeddings", BODY, &jo, &res, &err), LLMQ_OK);

    /* 2. its node dies and no node serves its slot */
    llmq_test_cluster_kill(&cl, 0);
    node_ok(&cl, 1, "CLUSTER DELSLOTS %d", slot);
    node_ok(&cl, 2, "CLUSTER DELSLOTS %d", slot);
    wait_slot_port(&cl, slot, 0);
    usleep(200000); /* past the least time between two fetches of one map */
    jo.job_id = "j2";
    enum llmq_rc rc = llmq_producer_enqueue(p, "/v1/embeddings", BODY, &jo, &res, &err);
    printf("# with its node dead: %s\n", err.msg);
    assert_int_not_equal(rc, LLMQ_OK); /* the connection is lost */
    memset(&err, 0, sizeof(err));
    rc = llmq_producer_enqueue(p, "/v1/embeddings", BODY, &jo, &res, &err);
    printf("# reconnecting: %s\n", err.msg);
    assert_int_not_equal(rc, LLMQ_OK);
    assert_non_null(strstr(err.msg, "no primary serves slot"));

    /* 3. the slot is served again: the same handle works */
    node_ok(&cl, 1, "CLUSTER ADDSLOTS %d", slot);
    wait_slot_port(&cl, slot, cl.nodes[1].port);
    long long fetches = map_fetches();
    memset(&err, 0, sizeof(err));
    rc = llmq_producer_enqueue(p, "/v1/embeddings", BODY, &jo, &res, &err);
    if (rc != LLMQ_OK)
        fprintf(stderr, "enqueue once the slot is served again: %s\n", err.msg);
    assert_int_equal(rc, LLMQ_OK);
    printf("# map fetches for that call: %lld\n", map_fetches() - fetches);
    assert_true(map_fetches() > fetches);
    /* the job (its record, while queued) is on primary 1 */
    redisContext *r1 = llmq_test_cluster_connect(&cl, 1);
    assert_non_null(r1);
    redisReply *x = redisCommand(r1, "EXISTS llmq:{%s}:jr:j2", names[0]);
    assert_non_null(x);
    assert_int_equal(x->integer, 1);
    freeReplyObject(x);
    redisFree(r1);

    llmq_producer_close(p);
    llmq_test_cluster_stop(&cl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_without_the_slot_is_fetched_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
