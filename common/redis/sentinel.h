/* Redis Sentinel: finding the current master of a redis-sentinel:// URL.
 *
 * Each (re)connect asks the sentinels in turn (SENTINEL
 * get-master-addr-by-name) and connects to the answer; after a failover the
 * old master refuses writes (READONLY) or drops the connection, the client
 * reconnects, and the question is asked again — so clients follow a failover.
 * The question is a short synchronous exchange (timeout per sentinel): it
 * runs only when a connection is (re)made, which is rare and backed off; an
 * event loop's connection (redis_async.c) asks it in a thread of its own,
 * off the loop. Thread-safe (it touches only its arguments). */
#ifndef LLMQ_SENTINEL_H
#define LLMQ_SENTINEL_H

#include "llmq/error.h"
#include "redis/redis_url.h"

/* For a Sentinel URL, sets u->host and u->port to the master's address as
 * the first sentinel that answers says. A plain URL is left alone. Returns
 * LLMQ_OK, or LLMQ_EREDIS when no sentinel knows the master. */
enum llmq_rc llmq_sentinel_resolve(struct llmq_redis_url *u, int timeout_ms,
                                   struct llmq_error *err);

/* 1 when reply text is a "you are talking to a replica" error (READONLY):
 * the connection is stale after a failover and must be made again. */
int llmq_sentinel_is_stale_error(const char *reply_text);

#endif
