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
 * Async runs keep a private copy of their arguments until the reply comes, so
 * a missing function can be answered by loading the library and sending the
 * same call again; the user callback then runs with that second reply.
 *
 * On a Redis Cluster (cluster.h) a call is sent again, as often as the
 * cluster asks within LLMQ_CLUSTER_REDIRECTS_MAX and LLMQ_CLUSTER_RETRIES_MAX,
 * when its reply is a redirection, and only then: a node decides MOVED, ASK,
 * TRYAGAIN and CLUSTERDOWN before it runs a command (cluster_reply.h), so
 * such a call never ran, and any other reply (a result, a script's error)
 * is the call's one run, handed to the caller. A connection lost with calls
 * in flight is never resent (they may have run): the caller gets NULL, as
 * without a cluster. Every call declares, after its own keys, the account's
 * slot guard key (keys.h), so that while the slot migrates every call
 * is refused before it runs (cluster.h). A plain command sent through
 * llmq_redis_command_async is followed the same way (by the same code),
 * without the library's handling. */
#include "redis/script.h"

#include "redis/cluster.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/redis_async.h"
#include "redis/sentinel.h"

#include <stdarg.h>
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

/* One async run: the arguments copied into one allocation, kept until the
 * final reply so a missing function can be loaded and the call resent. */
struct async_run {
    enum llmq_script_id id;
    int nkeys;
    int argc;
    int retried;   /* the library was loaded for it */
    int redirects; /* MOVED and ASK followed */
    int tries;     /* TRYAGAIN/CLUSTERDOWN/LOADING answers */
    int asking;    /* its next send goes to an ASK target: ASKING first */
    /* The cluster connection it was first sent on (NULL: not a cluster's):
     * alive whenever a reply to it comes (freeing a connection answers its
     * calls, deferred ones included, with NULL). */
    struct llmq_redis_async *home;
    llmq_script_cb *cb;
    void *privdata;
    const char **argv;
    size_t *argvlen;
    /* A plain command (llmq_redis_command_async), not a script: its RESP
     * bytes, sent as they are (NULL for a script call). */
    char *plain;
    size_t plain_len;
    redisCallbackFn *plain_cb;
};

static void async_run_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* Sends run (its FCALL, or its plain command); after_load first sends
 * FUNCTION LOAD REPLACE (its reply is not needed: the FCALL's reply says
 * whether it worked). */
static int async_run_send(redisAsyncContext *ac, struct async_run *run, int after_load)
{
    const char *cmd[run->argc + CALL_EXTRA_ARGS];
    size_t cmdlen[run->argc + CALL_EXTRA_ARGS];
    char nkeys_buf[16], guard_buf[LLMQ_KEY_FIXED_MAX];
    if (after_load) {
        size_t lens[4] = {8, 4, 7, strlen(llmq_script_library)};
        if (redisAsyncCommandArgv(ac, NULL, NULL, 4, (const char **)load_argv, lens) != REDIS_OK)
            return REDIS_ERR;
    }
    /* ASKING holds for the one command after it: nothing may come between. */
    if (run->asking && redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK)
        return REDIS_ERR;
    if (run->plain != NULL)
        return redisAsyncFormattedCommand(ac, async_run_reply, run, run->plain, run->plain_len);
    int n = build_command(run->id, nkeys_buf, guard_buf, run->nkeys, run->argc, run->argv,
                          run->argvlen, cmd, cmdlen);
    return redisAsyncCommandArgv(ac, async_run_reply, run, n, cmd, cmdlen);
}

/* Hands run its final reply (NULL: lost) and frees it. */
static void async_run_finish(redisAsyncContext *ac, struct async_run *run, redisReply *r)
{
    if (run->plain != NULL) {
        run->plain_cb(ac, r, run->privdata);
        redisFreeCommand(run->plain);
    } else {
        run->cb(ac, r, run->privdata);
    }
    free(run);
}

/* A run sent again once its connection is ready (llmq_redis_async_defer). */
static void async_run_resend(redisAsyncContext *ac, void *ud)
{
    struct async_run *run = ud;
    if (ac != NULL && async_run_send(ac, run, 0) == REDIS_OK)
        return;
    /* the connection failed first: as for a lost connection */
    async_run_finish(ac, run, NULL);
}

/* Sends run again as the redirection rd (a reply to it on ac) asks.
 * Returns 0 when it will be sent again (its callback runs later), -1 when it
 * has followed enough: the caller gets the error reply. */
static int async_run_redirect(redisAsyncContext *ac, struct async_run *run,
                              const struct llmq_cluster_redirect *rd)
{
    struct llmq_redis_async *home = run->home;
    struct llmq_cluster *cl = llmq_redis_async_cluster(home);
    if (cl == NULL)
        return -1;
    if (rd->kind == LLMQ_REDIRECT_RETRY) {
        if (++run->tries > LLMQ_CLUSTER_RETRIES_MAX)
            return -1;
        llmq_cluster_count_retry();
        run->asking = 0; /* from the owner again: the migration may be over */
        return llmq_redis_async_defer(home, llmq_cluster_retry_delay_ms(run->tries),
                                      async_run_resend, run);
    }
    if (++run->redirects > LLMQ_CLUSTER_REDIRECTS_MAX)
        return -1;
    const char *from = ac->c.tcp.host != NULL ? ac->c.tcp.host : "";
    char host[256];
    int port;
    if (rd->kind == LLMQ_REDIRECT_MOVED) {
        llmq_cluster_note_moved(cl, rd, from, host, sizeof(host), &port);
        llmq_redis_async_follow(home, host, port);
        run->asking = 0;
        return llmq_redis_async_defer(home, 0, async_run_resend, run);
    }
    snprintf(host, sizeof(host), "%s", rd->host[0] ? rd->host : from);
    struct llmq_redis_async *target = llmq_redis_async_asking(home, host, rd->port);
    if (target == NULL)
        return -1;
    llmq_cluster_count_ask();
    run->asking = 1;
    return llmq_redis_async_defer(target, 0, async_run_resend, run);
}

static void async_run_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct async_run *run = privdata;
    redisReply *r = reply;
    struct llmq_cluster_redirect rd;
    if (run->home != NULL && llmq_cluster_redirect_of(r, &rd) != LLMQ_REDIRECT_NONE &&
        async_run_redirect(ac, run, &rd) == 0)
        return;
    if (r != NULL && r->type == REDIS_REPLY_ERROR && llmq_sentinel_is_stale_error(r->str)) {
        /* A replica now (failover): drop the connection so it is made
         * again to the new master, and answer as for a lost connection. */
        redisAsyncDisconnect(ac);
        r = NULL;
    }
    if (run->plain == NULL && llmq_script_is_missing(r) && !run->retried) {
        run->retried = 1;
        if (async_run_send(ac, run, 1) == REDIS_OK)
            return;
        r = NULL; /* could not resend: report as a connection failure */
    }
    async_run_finish(ac, run, r);
}

enum llmq_rc llmq_redis_vcommand_async(redisAsyncContext *ac, redisCallbackFn *cb, void *privdata,
                                       const char *fmt, va_list ap)
{
    struct llmq_redis_async *owner = llmq_redis_async_owner(ac);
    if (llmq_redis_async_cluster(owner) == NULL) /* nothing to follow: as hiredis */
        return redisvAsyncCommand(ac, cb, privdata, fmt, ap) == REDIS_OK ? LLMQ_OK : LLMQ_EREDIS;
    struct async_run *run = calloc(1, sizeof(*run));
    if (run == NULL)
        return LLMQ_ENOMEM;
    int len = redisvFormatCommand(&run->plain, fmt, ap);
    if (len < 0) {
        free(run);
        return LLMQ_ENOMEM;
    }
    run->plain_len = (size_t)len;
    run->plain_cb = cb;
    run->privdata = privdata;
    run->home = owner;
    if (async_run_send(ac, run, 0) != REDIS_OK) {
        redisFreeCommand(run->plain);
        free(run);
        return LLMQ_EREDIS;
    }
    return LLMQ_OK;
}

enum llmq_rc llmq_redis_command_async(redisAsyncContext *ac, redisCallbackFn *cb, void *privdata,
                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum llmq_rc rc = llmq_redis_vcommand_async(ac, cb, privdata, fmt, ap);
    va_end(ap);
    return rc;
}

enum llmq_rc llmq_script_run_async(redisAsyncContext *ac, enum llmq_script_id id, int nkeys,
                                   int argc, const char **argv, const size_t *argvlen,
                                   llmq_script_cb *cb, void *privdata)
{
    size_t total = sizeof(struct async_run) + (size_t)argc * (sizeof(char *) + sizeof(size_t));
    for (int i = 0; i < argc; i++)
        total += (argvlen ? argvlen[i] : strlen(argv[i])) + 1;
    struct async_run *run = malloc(total);
    if (run == NULL)
        return LLMQ_ENOMEM;
    *run =
        (struct async_run){.id = id, .nkeys = nkeys, .argc = argc, .cb = cb, .privdata = privdata};
    run->argv = (const char **)(run + 1);
    run->argvlen = (size_t *)(run->argv + argc);
    char *data = (char *)(run->argvlen + argc);
    for (int i = 0; i < argc; i++) {
        size_t len = argvlen ? argvlen[i] : strlen(argv[i]);
        memcpy(data, argv[i], len);
        data[len] = '\0';
        run->argv[i] = data;
        run->argvlen[i] = len;
        data += len + 1;
    }
    struct llmq_redis_async *owner = llmq_redis_async_owner(ac);
    run->home = llmq_redis_async_cluster(owner) != NULL ? owner : NULL;
    if (async_run_send(ac, run, 0) != REDIS_OK) {
        free(run);
        return LLMQ_EREDIS;
    }
    return LLMQ_OK;
}
