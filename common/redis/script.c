/* Running the embedded scripts as Redis 7 Functions (FCALL), and loading
 * their library when Redis does not have it.
 *
 * The library (lua/ composed by cmake/embed_lua.cmake) is loaded once per
 * Redis (FUNCTION LOAD REPLACE) and from then on every call is FCALL of the
 * operation's function: no script text travels and nothing of the library is
 * re-initialised per call. "Function not found" (a new Redis, FUNCTION FLUSH,
 * a failover to a replica that never saw the library) makes the runner load
 * the library and call again, once; the caller never sees it. A client
 * that connects asks first (llmq_script_ensure_loaded: FUNCTION LIST of the
 * library's name, a few hundred bytes) and sends the ~140 KB library only
 * when Redis does not have it.
 *
 * On a Redis Cluster (cluster.h) a call is sent again when its reply is a
 * redirection, and only then (redis.c for a synchronous call, routed_async.c
 * for an async one, which keeps the formatted call until its final reply
 * and does the library's resend too). Every call declares, after its own
 * keys, the account's slot guard key (keys.h), so that while the slot
 * migrates every call is refused before it runs (cluster.h). */
#include "redis/script.h"

#include "redis/cluster.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/routed_async.h"
#include "redis/sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llmq_script_is_missing(const redisReply *r)
{
    /* Redis 7's reply when no loaded library registered the function;
     * NOSCRIPT too, in case a proxy in front of Redis answers as for EVALSHA. */
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           (strstr(r->str, "Function not found") != NULL || strncmp(r->str, "NOSCRIPT", 8) == 0);
}

/* The extra arguments build_command adds: FCALL, the function, nkeys, and
 * the slot guard key. */
#define CALL_EXTRA_ARGS 4

/* Builds the argv of "FCALL function nkeys+1 keys... guard args..." into
 * caller-provided arrays of size argc + CALL_EXTRA_ARGS; guard_buf (size
 * LLMQ_KEY_FIXED_MAX) receives the guard key of the account whose prefix
 * is the first key (a call without keys gets none). Returns the number of
 * arguments. */
static int build_command(enum llmq_script_id id, char *nkeys_buf, char *guard_buf, int nkeys,
                         int argc, const char **argv, const size_t *argvlen, const char **out,
                         size_t *outlen)
{
    int guard = nkeys > 0 && argc > 0 &&
                llmq_key(guard_buf, LLMQ_KEY_FIXED_MAX, argv[0], LLMQ_KEY_SLOT_GUARD, NULL, NULL) ==
                    LLMQ_OK;
    snprintf(nkeys_buf, 16, "%d", nkeys + guard);
    out[0] = "FCALL";
    out[1] = llmq_scripts[id].function;
    out[2] = nkeys_buf;
    for (int i = 0; i < 3; i++)
        outlen[i] = strlen(out[i]);
    int o = 3;
    for (int i = 0; i < argc; i++) {
        if (guard && i == nkeys) {
            out[o] = guard_buf;
            outlen[o++] = strlen(guard_buf);
        }
        out[o] = argv[i];
        outlen[o++] = argvlen ? argvlen[i] : strlen(argv[i]);
    }
    if (guard && argc == nkeys) {
        out[o] = guard_buf;
        outlen[o++] = strlen(guard_buf);
    }
    return o;
}

static const char *const load_argv[] = {"FUNCTION", "LOAD", "REPLACE", llmq_script_library};

int llmq_script_must_resend(redisContext *c, const redisReply *r)
{
    struct llmq_cluster_redirect rd;
    return llmq_script_is_missing(r) || (llmq_cluster_of_context(c) != NULL &&
                                         llmq_cluster_redirect_of(r, &rd) != LLMQ_REDIRECT_NONE);
}

enum llmq_rc llmq_script_load_all(redisContext *c, struct llmq_error *err)
{
    size_t lens[4] = {8, 4, 7, strlen(llmq_script_library)};
    redisReply *r = redisCommandArgv(c, 4, (const char **)load_argv, lens);
    enum llmq_rc rc = LLMQ_OK;
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        rc = llmq_error_set(err, LLMQ_EREDIS, "FUNCTION LOAD %s: %s", llmq_script_library_name,
                            r && r->type == REDIS_REPLY_ERROR ? r->str
                            : c->err                          ? llmq_redis_context_error(c)
                                                              : "bad reply");
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

/* 1 when Redis lists this build's library by its name (the name carries the
 * digest of the Lua text, so a listed library is this very code), 0 when
 * not or when Redis cannot say (FUNCTION LIST refused by a proxy: loading
 * then is the safe side). */
static int library_listed(redisContext *c)
{
    redisReply *r = redisCommand(c, "FUNCTION LIST LIBRARYNAME %s", llmq_script_library_name);
    int listed = 0;
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *lib = r->element[i];
        /* RESP2: [library_name, NAME, engine, LUA, functions, [...], ...] */
        for (size_t k = 0; lib->type == REDIS_REPLY_ARRAY && k + 1 < lib->elements; k += 2)
            if (lib->element[k]->type == REDIS_REPLY_STRING &&
                strcmp(lib->element[k]->str, "library_name") == 0 &&
                lib->element[k + 1]->type == REDIS_REPLY_STRING &&
                strcmp(lib->element[k + 1]->str, llmq_script_library_name) == 0)
                listed = 1;
    }
    if (r != NULL)
        freeReplyObject(r);
    return listed;
}

enum llmq_rc llmq_script_ensure_loaded(redisContext *c, struct llmq_error *err)
{
    if (library_listed(c))
        return LLMQ_OK;
    if (c->err)
        return llmq_error_set(err, LLMQ_EREDIS, "FUNCTION LIST %s: %s", llmq_script_library_name,
                              llmq_redis_context_error(c));
    return llmq_script_load_all(c, err);
}

/* Every primary of a Redis Cluster this process meets is given the library
 * (cluster.h): the cluster knows no script, the runner tells it what a new
 * primary needs. Set before main, so the first map fetched already hands
 * its primaries over; a program that runs no script links no script.c and
 * gives nodes nothing. */
__attribute__((constructor)) static void cluster_primaries_get_library(void)
{
    llmq_cluster_on_new_primary(llmq_script_ensure_loaded);
}

redisReply *llmq_script_run(redisContext *c, enum llmq_script_id id, int nkeys, int argc,
                            const char **argv, const size_t *argvlen, struct llmq_error *err)
{
    const char **cmd = malloc(sizeof(*cmd) * (size_t)(argc + CALL_EXTRA_ARGS));
    size_t *cmdlen = malloc(sizeof(*cmdlen) * (size_t)(argc + CALL_EXTRA_ARGS));
    char nkeys_buf[16], guard_buf[LLMQ_KEY_FIXED_MAX];
    char *formatted = NULL;
    redisReply *r = NULL;
    int len = -1;
    if (cmd != NULL && cmdlen != NULL) {
        int n = build_command(id, nkeys_buf, guard_buf, nkeys, argc, argv, argvlen, cmd, cmdlen);
        len = redisFormatCommandArgv(&formatted, n, cmd, cmdlen);
    }
    if (len < 0) {
        llmq_error_set(err, LLMQ_ENOMEM, "script %s: out of memory", llmq_scripts[id].name);
        goto out;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        /* redirections of a cluster followed there (redis.h) */
        r = llmq_redis_routed(c, formatted, (size_t)len);
        if (r != NULL && r->type == REDIS_REPLY_ERROR && llmq_sentinel_is_stale_error(r->str)) {
            /* A replica now (failover): report a connection error so the
             * caller reconnects, which asks Sentinel for the new master. */
            freeReplyObject(r);
            r = NULL;
            c->err = REDIS_ERR_OTHER;
            snprintf(c->errstr, sizeof(c->errstr), "server is a replica now (READONLY)");
            break;
        }
        if (!llmq_script_is_missing(r) || attempt == 1)
            break;
        freeReplyObject(r);
        r = NULL;
        struct llmq_error load_err = {0};
        if (llmq_script_load_all(c, &load_err) != LLMQ_OK) {
            llmq_error_set(err, LLMQ_EREDIS, "script %s: %s", llmq_scripts[id].name, load_err.msg);
            goto out;
        }
    }
    if (r == NULL && (err == NULL || err->rc == LLMQ_OK))
        llmq_error_set(err, LLMQ_EREDIS, "script %s: %s", llmq_scripts[id].name,
                       c->err ? llmq_redis_context_error(c) : "no reply");
out:
    free(formatted);
    free(cmd);
    free(cmdlen);
    return r;
}

enum llmq_rc llmq_script_append(redisContext *c, enum llmq_script_id id, int nkeys, int argc,
                                const char **argv, const size_t *argvlen)
{
    const char *cmd[argc + CALL_EXTRA_ARGS];
    size_t cmdlen[argc + CALL_EXTRA_ARGS];
    char nkeys_buf[16], guard_buf[LLMQ_KEY_FIXED_MAX];
    int n = build_command(id, nkeys_buf, guard_buf, nkeys, argc, argv, argvlen, cmd, cmdlen);
    return redisAppendCommandArgv(c, n, cmd, cmdlen) == REDIS_OK ? LLMQ_OK : LLMQ_EREDIS;
}

/* The resend of an async call Redis answered "Function not found": the
 * library first (FUNCTION LOAD REPLACE, its reply not read: the call's
 * reply says whether it worked), then the call again, once. */
static int send_library(redisAsyncContext *ac)
{
    size_t lens[4] = {8, 4, 7, strlen(llmq_script_library)};
    return redisAsyncCommandArgv(ac, NULL, NULL, 4, (const char **)load_argv, lens);
}

static const struct llmq_redis_resend_once library_reload = {llmq_script_is_missing, send_library};

enum llmq_rc llmq_script_run_async(redisAsyncContext *ac, enum llmq_script_id id, int nkeys,
                                   int argc, const char **argv, const size_t *argvlen,
                                   llmq_script_cb *cb, void *privdata)
{
    const char *cmd[argc + CALL_EXTRA_ARGS];
    size_t cmdlen[argc + CALL_EXTRA_ARGS];
    char nkeys_buf[16], guard_buf[LLMQ_KEY_FIXED_MAX];
    int n = build_command(id, nkeys_buf, guard_buf, nkeys, argc, argv, argvlen, cmd, cmdlen);
    char *formatted = NULL;
    int len = redisFormatCommandArgv(&formatted, n, cmd, cmdlen);
    if (len < 0)
        return LLMQ_ENOMEM;
    /* redirections of a cluster followed there (routed_async.h) */
    return llmq_redis_formatted_async(ac, formatted, (size_t)len, &library_reload, cb, privdata);
}
