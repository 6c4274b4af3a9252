/* Commands on an asynchronous connection (redis_async.h) that follow a
 * Redis Cluster's redirections: a reply MOVED, ASK, TRYAGAIN, CLUSTERDOWN
 * or LOADING never ran (cluster_reply.h), so the command is sent again
 * where the cluster says — MOVED on the connection moved to the new owner,
 * ASK as ASKING + the command on the target, the others after a short
 * backoff — as often as the cluster asks within LLMQ_CLUSTER_REDIRECTS_MAX
 * and LLMQ_CLUSTER_RETRIES_MAX, and any other reply (a result, a script's
 * error) is the command's one run, handed to its callback. A connection
 * lost with commands in flight never resends them (they may have run): the
 * callback gets NULL, as without a cluster. A reply saying the server is a
 * replica now (a Sentinel failover) drops the connection, so it is made
 * again to the new master, and is answered as a lost connection.
 *
 * A command keeps its formatted bytes until its final reply. The script
 * runner (script.h) sends its FCALLs through here, with the one resend of
 * its own (the library loaded first, when Redis answers "Function not
 * found"). Loop thread only, as the connection. */
#ifndef LLMQ_REDIS_ROUTED_ASYNC_H
#define LLMQ_REDIS_ROUTED_ASYNC_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stddef.h>

#include "llmq/error.h"

/* Callback of a routed command: runs exactly once, with reply NULL when the
 * connection failed or closed before the final reply came. The reply lives
 * only for the call. */
typedef void llmq_redis_reply_fn(redisAsyncContext *ac, redisReply *reply, void *privdata);

/* A resend a command's user asks for, once: when wants(reply) says so (a
 * reply that is not a redirection), prelude(ac) sends what must go first
 * (its reply is not read; returns REDIS_OK or REDIS_ERR) on the connection
 * that answered, and the command goes again after it. Static. */
struct llmq_redis_resend_once {
    int (*wants)(const redisReply *reply);
    int (*prelude)(redisAsyncContext *ac);
};

/* Sends the command cmd[0..len) (as redisFormatCommand makes it; taken:
 * freed with redisFreeCommand, also on failure) on ac, following the
 * redirections of a cluster connection, and once (NULL: never) as once
 * says, on any connection. Returns LLMQ_OK (cb runs exactly once, later),
 * or LLMQ_EREDIS/LLMQ_ENOMEM (cb never runs; privdata stays the
 * caller's). */
enum llmq_rc llmq_redis_formatted_async(redisAsyncContext *ac, char *cmd, size_t len,
                                        const struct llmq_redis_resend_once *once,
                                        llmq_redis_reply_fn *cb, void *privdata);

/* Sends the plain command fmt (printf-like, as redisAsyncCommand) on ac,
 * following a cluster's redirections (the file comment), and cb gets the
 * one final reply (NULL when the connection was lost). For a command whose
 * key is in an account's slot (a key look-up, a result read) that must not
 * fail for a failover or a moving slot. On other connections it is
 * redisAsyncCommand. Returns LLMQ_OK (cb runs exactly once, later), or
 * LLMQ_EREDIS/LLMQ_ENOMEM (cb never runs). Not for MULTI/EXEC: each command
 * is followed alone. */
enum llmq_rc llmq_redis_command_async(redisAsyncContext *ac, redisCallbackFn *cb, void *privdata,
                                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
enum llmq_rc llmq_redis_vcommand_async(redisAsyncContext *ac, redisCallbackFn *cb, void *privdata,
                                       const char *fmt, va_list ap);

#endif
