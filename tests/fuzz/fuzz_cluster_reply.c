/* Fuzzes what llmq makes of a hostile reply from a Redis Cluster node
 * (common/redis/cluster_reply.h): the bytes are decoded by hiredis's own RESP
 * reader into a redisReply (as a connection would), then read as a
 * redirection (MOVED, ASK, TRYAGAIN, ...) and as a CLUSTER SLOTS map; the
 * same bytes are also read as the text of an error reply. A redirection must
 * name a slot 0..16383, a port 1..65535 and a host without spaces; a map only
 * nodes it holds, with ports in range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "redis/cluster_reply.h"

static void check_redirect(enum llmq_cluster_redirect_kind kind,
                           const struct llmq_cluster_redirect *rd)
{
    if (kind != rd->kind)
        __builtin_trap();
    if (kind == LLMQ_REDIRECT_MOVED || kind == LLMQ_REDIRECT_ASK) {
        if (rd->slot < 0 || rd->slot >= LLMQ_CLUSTER_SLOTS || rd->port < 1 || rd->port > 65535 ||
            strlen(rd->host) >= sizeof(rd->host) || strchr(rd->host, ' ') != NULL)
            __builtin_trap();
    }
}

static struct llmq_cluster_map map;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct llmq_cluster_redirect rd;
    check_redirect(llmq_cluster_redirect_parse((const char *)data, size, &rd), &rd);
    redisReply *r = fuzz_reply_from_bytes(data, size);
    if (r == NULL)
        return 0;
    check_redirect(llmq_cluster_redirect_of(r, &rd), &rd);
    int covered = llmq_cluster_slots_parse(r, "127.0.0.1", &map);
    if (covered < -1 || covered > LLMQ_CLUSTER_SLOTS)
        __builtin_trap();
    if (covered >= 0) {
        int counted = 0;
        for (int s = 0; s < LLMQ_CLUSTER_SLOTS; s++) {
            if (map.owner[s] < -1 || map.owner[s] >= map.n_nodes)
                __builtin_trap();
            counted += map.owner[s] >= 0;
        }
        if (counted != covered)
            __builtin_trap();
        for (int i = 0; i < map.n_nodes; i++)
            if (map.nodes[i].port < 1 || map.nodes[i].port > 65535 ||
                strlen(map.nodes[i].host) >= sizeof(map.nodes[i].host))
                __builtin_trap();
    }
    freeReplyObject(r);
    return 0;
}
