/* One Redis node: a synchronous connection to a known address, its
 * handshake (AUTH, SELECT), and what a failed context or an error reply
 * means. The layer under the rest of common/redis: it asks no Sentinel and
 * no cluster (redis.h resolves the address and follows a cluster;
 * cluster.h opens its nodes with llmq_redis_node_connect). */
#ifndef LLMQ_REDIS_NODE_H
#define LLMQ_REDIS_NODE_H

#include <hiredis/hiredis.h>

#include "llmq/error.h"
#include "redis/redis_url.h"

/* Connects to u->host:u->port as they are (u borrowed; its Sentinel and
 * cluster parts are not looked at), with connect and command timeouts of
 * timeout_ms, then runs the handshake (llmq_redis_handshake). Returns a
 * new context (free with redisFree) or NULL with err filled. */
redisContext *llmq_redis_node_connect(const struct llmq_redis_url *u, int timeout_ms,
                                      struct llmq_error *err);

/* Runs AUTH and SELECT as u asks on a fresh synchronous context. */
enum llmq_rc llmq_redis_handshake(redisContext *c, const struct llmq_redis_url *u,
                                  struct llmq_error *err);

/* Why c failed, for a message (borrowed from c): its errstr, except that a
 * command or connect that ran into the context's timeout becomes "Redis at
 * HOST:PORT did not answer within N s" (written into c->errstr, so later
 * readers see it too). "no error" when c (may be NULL) has none. */
const char *llmq_redis_context_error(redisContext *c);

/* Fills err from a context error or an error reply; returns LLMQ_EREDIS,
 * LLMQ_EINVAL (a script's error reply "LLMQ_EINVAL ...": input it refuses) or
 * LLMQ_ESCRIPT (a script's other error replies). reply may be NULL. */
enum llmq_rc llmq_redis_error(redisContext *c, const redisReply *reply, const char *what,
                              struct llmq_error *err);

#endif
