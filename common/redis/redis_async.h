/* One asynchronous Redis connection on a libev loop that keeps itself up.
 *
 * Lifecycle: DISCONNECTED -> CONNECTING (TCP, AUTH, SELECT, then a PING whose
 * answer proves the server usable) -> READY; any failure (a refused AUTH or
 * SELECT included: the connection never falls back to another database) or a
 * connect timeout goes back to DISCONNECTED and arms a reconnect timer
 * (exponential backoff, each delay in [step/2, step]: llmq_backoff_reconnect_ms).
 * Every failed attempt is logged at warn with its cause (refused, timeout,
 * name resolution, WRONGPASS/NOAUTH, SELECT refused), repeats of one cause at
 * most every 30 s. hiredis 0.14 has no async timeouts, hence our own connect
 * timer. Commands may be sent only while READY (llmq_redis_async_context
 * returns NULL otherwise); when the connection drops, hiredis runs every
 * pending command callback with reply == NULL.
 *
 * A ready connection whose oldest outstanding command has had no answer for
 * command_timeout_ms (plus block_ms, for a connection that carries blocking
 * reads) is failed the same way: one warn line naming the address and the
 * bound, not ready (the state callback runs), every pending callback once
 * with reply == NULL, then the usual backoff and reconnect. A connection
 * idle that long is sent a PING, so a hung server is noticed without
 * traffic too. The cost is one timer per connection, not one per command. */
#ifndef LLMQ_REDIS_ASYNC_H
#define LLMQ_REDIS_ASYNC_H

#include <hiredis/async.h>

#include "llmq/error.h"
#include "redis/redis_url.h"

struct ev_loop;
struct llmq_cluster;
struct llmq_redis_async;

/* Told about every change between ready (1) and not ready (0). */
typedef void llmq_redis_async_state_cb(struct llmq_redis_async *ra, int ready, void *privdata);

#define LLMQ_REDIS_COMMAND_TIMEOUT_MS_DEFAULT 5000

struct llmq_redis_async_config {
    int timeout_ms;         /* connect timeout; 0: 2000 */
    int command_timeout_ms; /* see the file comment; 0: LLMQ_REDIS_COMMAND_TIMEOUT_MS_DEFAULT */
    int block_ms;           /* the longest BLOCK of a read sent on it; 0: none */
    int reconnect_min_ms;   /* 0: 100 */
    int reconnect_max_ms;   /* 0: 5000 */
    const char *name;       /* for log lines ("limiter", "worker"); static */
    /* 1: the user sets the connection up further once it is ready (a
     * SUBSCRIBE) and says when that worked (llmq_redis_async_setup_done);
     * until then the connection has not proved usable: dropped (say the
     * setup was refused), it reconnects after a backoff that goes on
     * growing, and a repeated cause is logged at the rate of failed
     * attempts. 0: ready is usable (the backoff starts again from
     * reconnect_min_ms). */
    int setup_by_user;
};

/* Starts connecting to url (copied) on loop (borrowed) with cfg (copied; its
 * zero fields take the defaults above). cb (may be NULL) runs on each change
 * of readiness, never before this returns. Returns NULL with err: LLMQ_EINVAL
 * when loop, url or cfg is NULL, LLMQ_ENOMEM on allocation failure. */
struct llmq_redis_async *llmq_redis_async_new(struct ev_loop *loop,
                                              const struct llmq_redis_url *url,
                                              const struct llmq_redis_async_config *cfg,
                                              llmq_redis_async_state_cb *cb, void *privdata,
                                              struct llmq_error *err);

/* The context to send commands on, or NULL when not ready (but see
 * following a MOVED, below). Borrowed. */
redisAsyncContext *llmq_redis_async_context(struct llmq_redis_async *ra);

int llmq_redis_async_ready(const struct llmq_redis_async *ra);

/* 1 once the connection has been ready at least once. */
int llmq_redis_async_ever_ready(const struct llmq_redis_async *ra);

/* Why the connection is not ready: the cause of the last failed attempt
 * ("" while ready or before any attempt failed). Borrowed, valid until the
 * next loop iteration. */
const char *llmq_redis_async_last_error(const struct llmq_redis_async *ra);

/* The user's setup of a ready connection (setup_by_user) worked: from now
 * on the connection counts as usable (the next failure reconnects after
 * reconnect_min_ms). No effect when not ready. */
void llmq_redis_async_setup_done(struct llmq_redis_async *ra);

/* Drops the connection now (not ready; pending callbacks run with NULL, at
 * the end of the running callback when called from one) and reconnects
 * after the backoff: for a caller that saw the connection misbehave. */
void llmq_redis_async_reset(struct llmq_redis_async *ra);

/* Redis Cluster (cluster.h). A connection made for a cluster URL goes to
 * the primary serving its route's slot (llmq_redis_url_route), asking the
 * cluster again at each reconnect after a failure, and follows every MOVED
 * it is answered (whatever the command): it leaves the old node (which
 * still answers what it was sent, within the command timeout), is not ready
 * until the new node has answered its handshake, then ready again (the
 * state callback runs both times). Meanwhile llmq_redis_async_context
 * already returns the new node's context: a move is planned, not a
 * failure, so what is sent then queues behind the handshake (and gets
 * reply NULL only if that node fails) instead of finding no connection.
 * Calls that must survive a redirection are sent again by their runner
 * (routed_async.c) through the functions below. */

/* Moves the connection to host:port (a MOVED's target, borrowed) unless it
 * is there already. No effect on a connection that is not a cluster's. */
void llmq_redis_async_follow(struct llmq_redis_async *ra, const char *host, int port);

/* A call waiting for the connection: runs once with the ready context, or
 * with ac NULL when an attempt to connect fails (or the connection is lost)
 * before, or when the connection is freed (from llmq_redis_async_free). */
typedef void llmq_redis_async_deferred_fn(redisAsyncContext *ac, void *ud);

/* Runs fn(ac, ud) once, delay_ms from now or later, when ra is ready (see
 * the type); never before this returns. Returns 0, or -1 when out of
 * memory (fn never runs). */
int llmq_redis_async_defer(struct llmq_redis_async *ra, int delay_ms,
                           llmq_redis_async_deferred_fn *fn, void *ud);

/* The connection that made ac, or NULL for a context made otherwise. */
struct llmq_redis_async *llmq_redis_async_owner(const redisAsyncContext *ac);

/* ra's cluster, or NULL (ra NULL or not a cluster connection). */
struct llmq_cluster *llmq_redis_async_cluster(const struct llmq_redis_async *ra);

/* A connection to host:port, the target of an ASK, owned by ra (kept for
 * the next ASK to the same node, freed with ra or at an ASK to another
 * node). NULL when out of memory or ra is not a cluster connection. */
struct llmq_redis_async *llmq_redis_async_asking(struct llmq_redis_async *ra, const char *host,
                                                 int port);

struct ev_loop *llmq_redis_async_loop(const struct llmq_redis_async *ra);

/* Closes and frees; pending command callbacks and deferred calls run with
 * reply (ac) NULL before it returns; the state callback does not run. NULL is
 * a no-op. */
void llmq_redis_async_free(struct llmq_redis_async *ra);

#endif
