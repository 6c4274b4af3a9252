/* The embedded Redis scripts (lua/<op>.lua) and how to run them.
 *
 * Every run is EVALSHA; a NOSCRIPT reply (after SCRIPT FLUSH or a Redis
 * restart) makes the runner send the full text once with EVAL, which also
 * caches it, and hands that reply to the caller. The caller never sees
 * NOSCRIPT. */
#ifndef LLMQ_SCRIPT_H
#define LLMQ_SCRIPT_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#include "llmq/error.h"
#include "scripts_gen.h"

struct llmq_script {
    const char *name; /* the op name, "acquire" for lua/acquire.lua */
    const char *text;
};

extern const struct llmq_script llmq_scripts[LLMQ_SCRIPT_COUNT];

/* Hex SHA-1 of script id (41 bytes with NUL), computed once per process;
 * thread-safe. */
const char *llmq_script_sha(enum llmq_script_id id);

/* Runs script id synchronously with nkeys keys followed by the other
 * arguments: argv[0..argc) (borrowed; argvlen may be NULL for C strings).
 * Returns the reply (caller frees with freeReplyObject), or NULL with err
 * filled on a connection error. An error reply is returned as a reply. */
redisReply *llmq_script_run(redisContext *c, enum llmq_script_id id, int nkeys, int argc,
                            const char **argv, const size_t *argvlen, struct llmq_error *err);

/* Appends EVALSHA of script id to c's output buffer for pipelining (read with
 * redisGetReply). The scripts must be loaded first (llmq_script_load_all). */
enum llmq_rc llmq_script_append(redisContext *c, enum llmq_script_id id, int nkeys, int argc,
                                const char **argv, const size_t *argvlen);

/* SCRIPT LOAD of every embedded script. */
enum llmq_rc llmq_script_load_all(redisContext *c, struct llmq_error *err);

/* Callback of an async run: runs exactly once, with reply NULL when the
 * connection failed or closed before the reply came. The reply lives only for
 * the call. */
typedef void llmq_script_cb(redisAsyncContext *ac, redisReply *reply, void *privdata);

/* Runs script id on ac. The arguments are copied (borrowed for the call only).
 * Returns LLMQ_OK, after which cb runs exactly once later; otherwise cb never
 * runs and privdata stays the caller's. */
enum llmq_rc llmq_script_run_async(redisAsyncContext *ac, enum llmq_script_id id, int nkeys,
                                   int argc, const char **argv, const size_t *argvlen,
                                   llmq_script_cb *cb, void *privdata);

#endif
