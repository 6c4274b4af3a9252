/* Synchronous Redis connections (CLIs, tests, the inline limiter): the
 * address resolved through Sentinel (sentinel.h) or a cluster's slot map
 * (cluster.h), the node connected (node.h: its handshake and errors, which
 * async clients share too), and a cluster's redirections followed. The
 * names and the account prefix keys are built from are keys.h's
 * (llmq_name_valid, llmq_account_prefix), included here for the callers
 * that find them through this header. */
#ifndef LLMQ_REDIS_H
#define LLMQ_REDIS_H

#include <hiredis/hiredis.h>

#include "llmq/error.h"
#include "redis/keys.h"
#include "redis/node.h"
#include "redis/redis_url.h"

/* Connects to url (borrowed), with connect and command timeouts of timeout_ms,
 * authenticates and selects the database. A cluster URL connects to the
 * node serving its route (llmq_redis_url_route; cluster.h), asking the
 * cluster again once when that node does not answer. Returns a new context (free with
 * redisFree) or NULL with err filled. */
redisContext *llmq_redis_connect(const char *url, int timeout_ms, struct llmq_error *err);

/* Same, from a parsed URL. */
redisContext *llmq_redis_connect_parsed(const struct llmq_redis_url *u, int timeout_ms,
                                        struct llmq_error *err);

/* Moves the cluster connection c (made by llmq_redis_connect*, borrowed) to
 * the node host:port in place: c then reads and writes that node; what was
 * pending on the old one is dropped. For a MOVED (cluster.h). Returns
 * LLMQ_OK, or an error (c unchanged) when the node cannot be reached or c is
 * not a cluster connection. */
enum llmq_rc llmq_redis_follow(redisContext *c, const char *host, int port, int timeout_ms,
                               struct llmq_error *err);

/* Sends the command cmd[0..len) (as redisFormatCommand makes it; borrowed)
 * on c and returns its reply (caller frees), NULL on a connection error
 * (c->err, c->errstr). On a cluster connection the cluster's redirections
 * are followed, and only they (each one never ran: cluster_reply.h): MOVED
 * moves c to the slot's new owner (llmq_redis_follow), ASK runs the command
 * once after ASKING on the target, TRYAGAIN/CLUSTERDOWN/LOADING wait a
 * little and send it again; past LLMQ_CLUSTER_REDIRECTS_MAX or
 * LLMQ_CLUSTER_RETRIES_MAX the redirection itself is the reply. On other
 * connections the same as redisCommand. */
redisReply *llmq_redis_routed(redisContext *c, const char *cmd, size_t len);

/* llmq_redis_routed with redisCommand's format and arguments. */
redisReply *llmq_redis_command(redisContext *c, const char *fmt, ...);

/* For a reply r (taken) read from a pipeline on c (borrowed): when c is a
 * cluster connection and r a redirection, the command (fmt and arguments as
 * redisCommand: the one r answers) is sent again on a connection of its own
 * to c's node (c still owes the rest of its pipeline) following the
 * redirections there, and that reply is returned (NULL when the node cannot
 * be reached); otherwise r itself. */
redisReply *llmq_redis_redo(redisContext *c, redisReply *r, const char *fmt, ...);

/* The value of field name in a flat field/value array (a stream entry's
 * fields, an HGETALL reply), or NULL when absent or not a string. Borrowed
 * from the reply. */
const char *llmq_redis_field(const redisReply *flat, const char *name);

/* The value of the next field name at or after element *pos of flat (a
 * field that repeats: an events entry names each job it tells of with an
 * "id" field), or NULL when there is none; *pos moves past it. Start with
 * *pos = 0. Borrowed from the reply. */
const char *llmq_redis_field_next(const redisReply *flat, const char *name, size_t *pos);

/* Called by llmq_redis_scan for each key found (borrowed: valid during the
 * call); returns 0 to go on, nonzero to stop the scan. */
typedef int llmq_redis_scan_fn(const char *key, void *ud);

/* Walks SCAN ... MATCH pattern COUNT count from cursor 0 to its end (or
 * until each stops it), calling each for every string key of every batch.
 * Returns LLMQ_OK, or LLMQ_EREDIS (err) when a SCAN fails or its reply is
 * not [cursor, [keys...]]. */
enum llmq_rc llmq_redis_scan(redisContext *c, const char *pattern, int count,
                             llmq_redis_scan_fn *each, void *ud, struct llmq_error *err);

#endif
