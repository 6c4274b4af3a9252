/* The embedded Redis scripts (lua/<op>.lua) and how to run them.
 *
 * The scripts are one Redis 7 Functions library (cmake/embed_lua.cmake): it
 * is loaded once per Redis (FUNCTION LOAD), and each run is FCALL of the
 * operation's function. When Redis does not have the library ("Function not
 * found": a restart without persistence, FUNCTION FLUSH, a failover to a
 * replica that never saw it) the runner loads it and calls again, once, and
 * hands that reply to the caller. The caller never sees the miss. On a Redis
 * Cluster the runner also follows the cluster's redirections (redis.h for
 * a synchronous run, routed_async.h for an async one, which also offers
 * plain commands followed the same way: llmq_redis_command_async). */
#ifndef LLMQ_SCRIPT_H
#define LLMQ_SCRIPT_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#include "llmq/error.h"
#include "redis/routed_async.h"
#include "scripts_gen.h"

struct llmq_script {
    const char *name;     /* the op name, "acquire" for lua/acquire.lua */
    const char *function; /* its function in the library, "llmq_acquire_<tag>" */
};

extern const struct llmq_script llmq_scripts[LLMQ_SCRIPT_COUNT];
/* The library's text (FUNCTION LOAD) and its name, "llmq_<tag>". */
extern const char llmq_script_library[];
extern const char llmq_script_library_name[];

/* 1 when r is Redis's answer to a call of a function it does not have. */
int llmq_script_is_missing(const redisReply *r);

/* Runs script id synchronously with nkeys keys followed by the other
 * arguments: argv[0..argc) (borrowed; argvlen may be NULL for C strings).
 * Returns the reply (caller frees with freeReplyObject), or NULL with err
 * filled on a connection error. An error reply is returned as a reply. */
redisReply *llmq_script_run(redisContext *c, enum llmq_script_id id, int nkeys, int argc,
                            const char **argv, const size_t *argvlen, struct llmq_error *err);

/* Appends FCALL of script id to c's output buffer for pipelining (read with
 * redisGetReply). Load the library first (llmq_script_load_all); a reply that
 * llmq_script_is_missing means it was lost meanwhile: load and run again. */
enum llmq_rc llmq_script_append(redisContext *c, enum llmq_script_id id, int nkeys, int argc,
                                const char **argv, const size_t *argvlen);

/* 1 when a reply to a call appended with llmq_script_append must be run
 * again with llmq_script_run: the function was missing, or (on a cluster
 * connection, c borrowed) the reply is a redirection, which never ran. */
int llmq_script_must_resend(redisContext *c, const redisReply *r);

/* FUNCTION LOAD REPLACE of the library (harmless when it is loaded). */
enum llmq_rc llmq_script_load_all(redisContext *c, struct llmq_error *err);

/* Loads the library (llmq_script_load_all) only when Redis does not list it
 * by this build's name (FUNCTION LIST LIBRARYNAME llmq_<tag>): a library of
 * another build, older or newer, has another name, so it does not count.
 * For a client that connects: most find the library there and send only
 * the question. Returns LLMQ_OK, or LLMQ_EREDIS with err. */
enum llmq_rc llmq_script_ensure_loaded(redisContext *c, struct llmq_error *err);

/* Callback of an async run: runs exactly once, with reply NULL when the
 * connection failed or closed before the reply came. The reply lives only for
 * the call. */
typedef llmq_redis_reply_fn llmq_script_cb;

/* Runs script id on ac. The arguments are copied (borrowed for the call only).
 * Returns LLMQ_OK, after which cb runs exactly once later; otherwise cb never
 * runs and privdata stays the caller's. */
enum llmq_rc llmq_script_run_async(redisAsyncContext *ac, enum llmq_script_id id, int nkeys,
                                   int argc, const char **argv, const size_t *argvlen,
                                   llmq_script_cb *cb, void *privdata);

#endif
