/* A Redis Cluster of real redis-server processes (--cluster-enabled yes) a
 * test starts on free loopback ports, and what tests do to it: find the node
 * of a slot, kill a primary, fail over, move a slot. Each node is a
 * llmq_test_redis (testsupport.h): killed when the test process ends, on
 * every exit path. Every wait is bounded (against hanging, not a timing
 * check) and returns -1 when it runs out. */
#ifndef LLMQ_TEST_CLUSTER_FIXTURE_H
#define LLMQ_TEST_CLUSTER_FIXTURE_H

#include <hiredis/hiredis.h>

#include "testsupport.h"

#define LLMQ_TEST_CLUSTER_NODES_MAX 12

struct llmq_test_cluster {
    struct llmq_test_redis nodes[LLMQ_TEST_CLUSTER_NODES_MAX]; /* primaries first */
    char ids[LLMQ_TEST_CLUSTER_NODES_MAX][48];                 /* CLUSTER MYID */
    int alive[LLMQ_TEST_CLUSTER_NODES_MAX];
    int bus_ports[LLMQ_TEST_CLUSTER_NODES_MAX]; /* --cluster-port */
    int n_nodes, n_primaries;
    char url[1024]; /* redis+cluster://127.0.0.1:P1,127.0.0.1:P2,... (every node a seed) */
};

/* Starts primaries nodes (slots split evenly in order) and replicas_each
 * replicas of each, joins them, and waits until every node says the cluster
 * is ok and agrees on the owner of every slot, and every replica's link is
 * up. Returns 0, or -1 (what failed on stderr; started nodes stopped). */
int llmq_test_cluster_start(struct llmq_test_cluster *c, int primaries, int replicas_each);

/* The same on host: "127.0.0.1" (what llmq_test_cluster_start uses) or
 * "::1", where the nodes meet, announce themselves and are named in url
 * ("[::1]:P"); they listen on 127.0.0.1 too, for the fixture's own
 * connections. */
int llmq_test_cluster_start_on(struct llmq_test_cluster *c, const char *host, int primaries,
                               int replicas_each);

/* Stops every node still running. */
void llmq_test_cluster_stop(struct llmq_test_cluster *c);

/* Waits up to timeout_ms until every live node says cluster_state:ok and
 * all of them name the same primary, a running one, for every slot. Returns 0 or -1. */
int llmq_test_cluster_wait_stable(struct llmq_test_cluster *c, long long timeout_ms);

/* The index (in nodes) of the primary serving slot, as a live node says;
 * -1 when none answers. */
int llmq_test_cluster_owner(struct llmq_test_cluster *c, int slot);

/* A new plain connection to node i (the test's own, not llmq's routing). */
redisContext *llmq_test_cluster_connect(struct llmq_test_cluster *c, int i);

/* The slot of account (llmq_cluster_account_slot). */
int llmq_test_cluster_account_slot(const char *account);

/* Writes into names[0..n) (each 64 bytes) unique account names starting
 * with prefix such that name i lives on primary i % n_primaries. */
void llmq_test_cluster_spread_accounts(struct llmq_test_cluster *c, const char *prefix, int n,
                                       char (*names)[64]);

/* SIGKILLs node i (no goodbye to the cluster). */
void llmq_test_cluster_kill(struct llmq_test_cluster *c, int i);

/* CLUSTER FAILOVER on replica i (a graceful, manual failover: its primary
 * hands over). Returns 0 once node i says it is a primary, -1 otherwise. */
int llmq_test_cluster_failover(struct llmq_test_cluster *c, int i, long long timeout_ms);

/* Moves slot from its owner to primary to, live, the way redis-cli
 * --cluster reshard does: SETSLOT IMPORTING on the target, MIGRATING on the
 * source, MIGRATE of the slot's keys batch_keys at a time with pause_ms
 * between batches (so calls meet the slot half-moved), then SETSLOT NODE on
 * every primary. Returns 0, or -1 with the step that failed on stderr.
 * *migrated receives the number of keys moved. */
int llmq_test_cluster_move_slot(struct llmq_test_cluster *c, int slot, int to, int batch_keys,
                                int pause_ms, long long *migrated);

#endif
