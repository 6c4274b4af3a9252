/* cluster_reply.c: the redirections a cluster node answers and the slot map
 * of CLUSTER SLOTS, decoded from RESP text as a node sends it (the replies
 * built by hiredis's own reader). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "redis/cluster_reply.h"

static redisReply *resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    assert_int_equal(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &reply), REDIS_OK);
    assert_non_null(reply);
    redisReaderFree(rd);
    return reply;
}

static enum llmq_cluster_redirect_kind kind_of(const char *err, struct llmq_cluster_redirect *out)
{
    return llmq_cluster_redirect_parse(err, strlen(err), out);
}

static void test_redirects(void **state)
{
    (void)state;
    struct llmq_cluster_redirect rd;
    assert_int_equal(kind_of("MOVED 3999 127.0.0.1:6381", &rd), LLMQ_REDIRECT_MOVED);
    assert_int_equal(rd.slot, 3999);
    assert_string_equal(rd.host, "127.0.0.1");
    assert_int_equal(rd.port, 6381);
    assert_int_equal(kind_of("ASK 16383 node-b.example:7000", &rd), LLMQ_REDIRECT_ASK);
    assert_int_equal(rd.slot, 16383);
    assert_string_equal(rd.host, "node-b.example");
    /* IPv6: the port follows the last colon */
    assert_int_equal(kind_of("MOVED 0 ::1:7002", &rd), LLMQ_REDIRECT_MOVED);
    assert_string_equal(rd.host, "::1");
    assert_int_equal(rd.port, 7002);
    /* a node that does not know its address: the caller's host */
    assert_int_equal(kind_of("MOVED 12 :7003", &rd), LLMQ_REDIRECT_MOVED);
    assert_string_equal(rd.host, "");
    assert_int_equal(kind_of("ASK 12 ?:7003", &rd), LLMQ_REDIRECT_ASK);
    assert_string_equal(rd.host, "");
    assert_int_equal(kind_of("TRYAGAIN Multiple keys request during rehashing of slot", &rd),
                     LLMQ_REDIRECT_RETRY);
    assert_int_equal(kind_of("CLUSTERDOWN The cluster is down", &rd), LLMQ_REDIRECT_RETRY);
    assert_int_equal(kind_of("CLUSTERDOWN Hash slot not served", &rd), LLMQ_REDIRECT_RETRY);
    assert_int_equal(kind_of("LOADING Redis is loading the dataset in memory", &rd),
                     LLMQ_REDIRECT_RETRY);
    /* not redirections: the command ran, or failed on its own */
    const char *none[] = {"ERR unknown command",
                          "MOVEDX 1 h:1",
                          "MOVED",
                          "MOVED ",
                          "MOVED 16384 h:1",
                          "MOVED -1 h:1",
                          "MOVED 1 h:0",
                          "MOVED 1 h:65536",
                          "MOVED 1 h",
                          "MOVED 1 h:1x",
                          "MOVED x h:1",
                          "MOVED 1 a b:1",
                          "ASK 1",
                          "CROSSSLOT Keys in request don't hash to the same slot",
                          "LLMQ_MOVED 1 h:1",
                          "READONLY You can't write against a read only replica.",
                          NULL};
    for (int i = 0; none[i] != NULL; i++) {
        assert_int_equal(kind_of(none[i], &rd), LLMQ_REDIRECT_NONE);
        assert_int_equal(rd.kind, LLMQ_REDIRECT_NONE);
    }
    /* from a reply: only error replies */
    redisReply *r = resp("-MOVED 7 10.1.2.3:7000\r\n");
    assert_int_equal(llmq_cluster_redirect_of(r, &rd), LLMQ_REDIRECT_MOVED);
    assert_int_equal(rd.slot, 7);
    freeReplyObject(r);
    r = resp("$21\r\nMOVED 7 10.1.2.3:7000\r\n");
    assert_int_equal(llmq_cluster_redirect_of(r, &rd), LLMQ_REDIRECT_NONE);
    freeReplyObject(r);
    assert_int_equal(llmq_cluster_redirect_of(NULL, &rd), LLMQ_REDIRECT_NONE);
}

static void test_slots(void **state)
{
    (void)state;
    struct llmq_cluster_map *map = malloc(sizeof(*map));
    /* two primaries, one with a replica and a node id; the second range's
     * primary does not know its address ("") */
    redisReply *r = resp("*2\r\n"
                         "*4\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
                         "*2\r\n$9\r\n127.0.0.1\r\n:7002\r\n"
                         "*3\r\n:8192\r\n:16000\r\n*2\r\n$0\r\n\r\n:7001\r\n");
    assert_int_equal(llmq_cluster_slots_parse(r, "10.9.9.9", map), 16001);
    assert_int_equal(map->n_nodes, 2);
    assert_int_equal(map->nodes[map->owner[0]].port, 7000);
    assert_int_equal(map->nodes[map->owner[8191]].port, 7000);
    assert_int_equal(map->nodes[map->owner[8192]].port, 7001);
    assert_string_equal(map->nodes[map->owner[9000]].host, "10.9.9.9");
    assert_int_equal(map->owner[16001], -1);
    assert_int_equal(map->owner[16383], -1);
    freeReplyObject(r);
    /* the same primary in two ranges is one node */
    r = resp(
        "*2\r\n*3\r\n:0\r\n:0\r\n*2\r\n$1\r\na\r\n:1\r\n*3\r\n:5\r\n:6\r\n*2\r\n$1\r\na\r\n:1\r\n");
    assert_int_equal(llmq_cluster_slots_parse(r, "x", map), 3);
    assert_int_equal(map->n_nodes, 1);
    freeReplyObject(r);
    /* malformed */
    const char *bad[] = {"+OK\r\n",
                         "*1\r\n:1\r\n",
                         "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\na\r\n:1\r\n",     /* end < start */
                         "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n", /* past the last */
                         "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:0\r\n",     /* port 0 */
                         "*1\r\n*2\r\n:0\r\n:1\r\n",                            /* no primary */
                         "*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$1\r\na\r\n",           /* no port */
                         NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        r = resp(bad[i]);
        assert_int_equal(llmq_cluster_slots_parse(r, "x", map), -1);
        freeReplyObject(r);
    }
    assert_int_equal(llmq_cluster_slots_parse(NULL, "x", map), -1);
    /* an empty cluster */
    r = resp("*0\r\n");
    assert_int_equal(llmq_cluster_slots_parse(r, "x", map), 0);
    freeReplyObject(r);
    free(map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redirects),
        cmocka_unit_test(test_slots),
    };
    return cmocka_run_group_tests_name("cluster_reply", tests, NULL, NULL);
}
