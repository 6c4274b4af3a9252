/* Decoders of what a Redis Cluster node answers: the redirections of a
 * command (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) and the slot map of CLUSTER
 * SLOTS.
 *
 * A node decides a redirection in processCommand, before it runs the
 * command (cluster.c getNodeByQuery, then clusterRedirectClient): a command
 * answered MOVED, ASK, TRYAGAIN or CLUSTERDOWN never ran, so sending it again
 * elsewhere runs it at most once. Replies are untrusted (a proxy, a fuzzer):
 * a wrong shape is "not a redirection" or -1, never a crash.
 * Pure: no I/O, no allocation, no globals. */
#ifndef LLMQ_CLUSTER_REPLY_H
#define LLMQ_CLUSTER_REPLY_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "redis/crc16.h"

enum llmq_cluster_redirect_kind {
    LLMQ_REDIRECT_NONE = 0, /* not a redirection: the command ran (or failed on its own) */
    LLMQ_REDIRECT_MOVED,    /* the slot is served by host:port from now on */
    LLMQ_REDIRECT_ASK,      /* this one command: ASKING then the command at host:port */
    LLMQ_REDIRECT_RETRY,    /* TRYAGAIN, CLUSTERDOWN, LOADING: the same node, a bit later */
};

struct llmq_cluster_redirect {
    enum llmq_cluster_redirect_kind kind;
    int slot;       /* MOVED, ASK: 0..16383 */
    char host[256]; /* MOVED, ASK: "" when the node does not know its address
                       (the caller uses the host it asked) */
    int port;       /* MOVED, ASK: 1..65535 */
};

/* Decodes the error text err[0..len) (a reply's str and len) into *out.
 * Returns out->kind; LLMQ_REDIRECT_NONE (out zeroed) for any other error and
 * for a MOVED/ASK that is malformed (bad slot, port or host). */
enum llmq_cluster_redirect_kind llmq_cluster_redirect_parse(const char *err, size_t len,
                                                            struct llmq_cluster_redirect *out);

/* The same for a reply (may be NULL or not an error: LLMQ_REDIRECT_NONE). */
enum llmq_cluster_redirect_kind llmq_cluster_redirect_of(const redisReply *r,
                                                         struct llmq_cluster_redirect *out);

#define LLMQ_CLUSTER_NODES_MAX 64

struct llmq_cluster_node {
    char host[256];
    int port;
};

/* Which primary serves each slot. */
struct llmq_cluster_map {
    int n_nodes;
    struct llmq_cluster_node nodes[LLMQ_CLUSTER_NODES_MAX]; /* the primaries */
    int16_t owner[LLMQ_CLUSTER_SLOTS];                      /* index in nodes; -1: none */
};

/* Index of host:port in map's nodes, adding it when absent. Returns -1 when
 * the host does not fit or the map is full. */
int llmq_cluster_map_node(struct llmq_cluster_map *map, const char *host, int port);

/* Fills *map from a CLUSTER SLOTS reply r: each element [start, end,
 * [host, port, id, ...], replicas...] names the primary of slots
 * start..end. A primary whose host is "" or "?" (a node that does not know
 * its address) gets asked_host, the address the reply came from. Slots no
 * range names have owner -1. Returns the number of slots covered (0..16384),
 * or -1 when r is not such a reply (map then unusable). */
int llmq_cluster_slots_parse(const redisReply *r, const char *asked_host,
                             struct llmq_cluster_map *map);

#endif
