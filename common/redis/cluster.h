/* Redis Cluster routing: which node serves an account, and what a client
 * does when the cluster says otherwise.
 *
 * Every llmq key of an account is in the slot of "{ACCOUNT}" (crc16.h), so
 * every connection llmq makes serves one account (a worker: two per account;
 * the CLI, a producer, a gateway: the account they are given) and goes to the
 * primary serving that slot. This module keeps, per process and per cluster
 * URL (its seeds and user), the slot map (CLUSTER SLOTS, asked of the seeds
 * and the known primaries), the credentials to open a connection to any node,
 * and which nodes have been given the Functions library.
 *
 * The map is fetched at the first connect, again at each reconnect after a
 * failure (that is how a failover is followed: the killed primary's replica
 * now serves its slots) and when a MOVED names a node; a MOVED also updates
 * its slot at once. Each primary of a freshly fetched map that this process
 * has not seen before is handed to the hook of the layer above
 * (llmq_cluster_on_new_primary: the script runner gives it the Functions
 * library, FUNCTION LOAD when FUNCTION LIST does not have it); a node that
 * loses it later answers "Function not found" and script.c loads it there.
 * This module knows no script: it connects through node.h, below it.
 *
 * Redirections (cluster_reply.h) never ran, so the call is sent again
 * (redis.c for a synchronous call, routed_async.c for an async one):
 * MOVED on the connection moved to the new owner, ASK as ASKING + the call on
 * the target, TRYAGAIN/CLUSTERDOWN after a short backoff. Every call declares
 * the account's slot guard key (keys.h, never written) beside its
 * prefix: a call whose slot is being migrated finds its declared keys
 * missing, so the source answers ASK and the target (after ASKING, several
 * keys missing) TRYAGAIN — no script runs half on one node and half on the
 * other; the account waits until the slot has moved.
 *
 * The fetch is synchronous (as Sentinel's lookup): rare, bounded by the
 * connect timeout per node; an event loop's connection (redis_async.c)
 * resolves in a thread of its own, off the loop. Thread-safe: one mutex per cluster, never held
 * across I/O. A cluster's state lives until the process ends (at most
 * LLMQ_CLUSTERS_MAX cluster URLs per process). */
#ifndef LLMQ_CLUSTER_H
#define LLMQ_CLUSTER_H

#include <hiredis/hiredis.h>

#include "llmq/error.h"
#include "redis/cluster_reply.h"
#include "redis/redis_url.h"

#define LLMQ_CLUSTERS_MAX 8
/* The most redirections one call follows before its error reply is handed
 * to the caller (a cluster that keeps moving a slot back and forth). */
#define LLMQ_CLUSTER_REDIRECTS_MAX 16
/* The most tries of one call answered TRYAGAIN/CLUSTERDOWN/LOADING, spaced
 * llmq_cluster_retry_delay_ms apart: about 15 s, longer than a failover. */
#define LLMQ_CLUSTER_RETRIES_MAX 80

struct llmq_cluster;

/* The state of the cluster u (borrowed) names, made at first use. NULL when
 * u is not a cluster URL, or LLMQ_CLUSTERS_MAX clusters are known already. */
struct llmq_cluster *llmq_cluster_of(const struct llmq_redis_url *u);

/* Before a connect to u (a no-op for other URLs): fetches the slot map when
 * there is none, or when refresh is set (and the map is older than 100 ms:
 * many connections failing together fetch it once), gives the library to
 * the primaries new to this process, and writes into u->host and u->port
 * the primary serving u->route_slot (unrouted: the first primary of the
 * map). timeout_ms bounds each node's connect and reply. Returns LLMQ_OK, or
 * LLMQ_EREDIS with err naming the seeds that did not answer or the slot no
 * node serves. */
enum llmq_rc llmq_cluster_resolve(struct llmq_redis_url *u, int refresh, int timeout_ms,
                                  struct llmq_error *err);

/* A MOVED (redirect, borrowed) came from the node at from_host: its slot is
 * served by the node it names (its host "" meaning from_host) from now on.
 * Writes that node's address into host (n bytes) and *port. */
void llmq_cluster_note_moved(struct llmq_cluster *cl, const struct llmq_cluster_redirect *redirect,
                             const char *from_host, char *host, size_t n, int *port);

/* The map is stale (a node did not answer): the next resolve fetches it. */
void llmq_cluster_invalidate(struct llmq_cluster *cl);

/* The primary serving slot in the current map, into host (n bytes) and
 * *port. Returns 0, or -1 when the map has no owner for it. */
int llmq_cluster_owner(struct llmq_cluster *cl, int slot, char *host, size_t n, int *port);

/* The primaries of the current map into out[0..max); returns how many. */
int llmq_cluster_primaries(struct llmq_cluster *cl, struct llmq_cluster_node *out, int max);

/* A new synchronous connection to the node host:port of cl, authenticated
 * with the cluster URL's credentials (timeouts timeout_ms). NULL with err. */
redisContext *llmq_cluster_connect_node(struct llmq_cluster *cl, const char *host, int port,
                                        int timeout_ms, struct llmq_error *err);

/* Told of a primary this process meets for the first time in a fetched
 * map, with a new connection c to it (borrowed: closed after): what the
 * node must be given before calls reach it. Returns LLMQ_OK, or an error
 * (err) and the node is handed over again at the next fetch. */
typedef enum llmq_rc llmq_cluster_primary_fn(redisContext *c, struct llmq_error *err);

/* Sets the one hook of the process (fn, NULL: none) that each primary new
 * to it is handed to, from the layer above the cluster (script.c sets
 * llmq_script_ensure_loaded before main runs). Thread-safe. */
void llmq_cluster_on_new_primary(llmq_cluster_primary_fn *fn);

/* The credentials of cl (borrowed, for the async handshake): a URL whose
 * user and password are the cluster's. */
const struct llmq_redis_url *llmq_cluster_url(const struct llmq_cluster *cl);

/* Ties the synchronous context c to cl (llmq_redis_routed, redis.h, then
 * follows the cluster's redirections on it), and reads it back: NULL for a context made otherwise.
 */
void llmq_cluster_attach(redisContext *c, struct llmq_cluster *cl);
struct llmq_cluster *llmq_cluster_of_context(const redisContext *c);

/* Milliseconds to wait before try number tries (1, 2, ...) of a call that
 * was answered TRYAGAIN/CLUSTERDOWN/LOADING: 10 ms doubling to 250 ms. */
int llmq_cluster_retry_delay_ms(int tries);

/* Redirections followed and retries made by this process, for tests and
 * logs (monotonic). */
struct llmq_cluster_counts {
    long long moved, ask, retried, map_fetches;
    long long library_loads; /* primaries the hook (llmq_cluster_on_new_primary) took */
};
void llmq_cluster_counts(struct llmq_cluster_counts *out);
void llmq_cluster_count_moved(void);
void llmq_cluster_count_ask(void);
void llmq_cluster_count_retry(void);

#endif
