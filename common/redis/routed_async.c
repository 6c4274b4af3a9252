/* Async commands that follow a cluster's redirections; see routed_async.h.
 *
 * A run keeps its command's bytes until the final reply, so a redirection
 * (which never ran) or its user's one resend can send the same command
 * again; the user callback then runs with the reply that ends it. Every
 * call of a script declares, after its own keys, the account's slot guard
 * key (keys.h, script.c), so that while the slot migrates every call is
 * refused before it runs (cluster.h) and followed here. */
#include "redis/routed_async.h"

#include <stdio.h>
#include <stdlib.h>

#include "redis/cluster.h"
#include "redis/redis_async.h"
#include "redis/sentinel.h"

/* One command on its way: its bytes, kept until the final reply. */
struct async_run {
    char *cmd; /* as redisFormatCommand makes it */
    size_t len;
    const struct llmq_redis_resend_once *once; /* NULL: none */
    int resent;                                /* once's resend was made */
    int redirects;                             /* MOVED and ASK followed */
    int tries;                                 /* TRYAGAIN/CLUSTERDOWN/LOADING answers */
    int asking; /* its next send goes to an ASK target: ASKING first */
    /* The cluster connection it was first sent on (NULL: not a cluster's):
     * alive whenever a reply to it comes (freeing a connection answers its
     * calls, deferred ones included, with NULL). */
    struct llmq_redis_async *home;
    llmq_redis_reply_fn *cb;
    redisCallbackFn *plain_cb; /* a plain command's (llmq_redis_command_async), cb NULL */
    void *privdata;
};

static void async_run_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* Sends run; after_prelude first sends its user's prelude (its reply is not
 * needed: the command's reply says whether it worked). */
static int async_run_send(redisAsyncContext *ac, struct async_run *run, int after_prelude)
{
    if (after_prelude && run->once->prelude(ac) != REDIS_OK)
        return REDIS_ERR;
    /* ASKING holds for the one command after it: nothing may come between. */
    if (run->asking && redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK)
        return REDIS_ERR;
    return redisAsyncFormattedCommand(ac, async_run_reply, run, run->cmd, run->len);
}

/* Hands run its final reply (NULL: lost) and frees it. */
static void async_run_finish(redisAsyncContext *ac, struct async_run *run, redisReply *r)
{
    if (run->plain_cb != NULL)
        run->plain_cb(ac, r, run->privdata);
    else
        run->cb(ac, r, run->privdata);
    redisFreeCommand(run->cmd);
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
    if (run->once != NULL && !run->resent && run->once->wants(r)) {
        run->resent = 1;
        if (async_run_send(ac, run, 1) == REDIS_OK)
            return;
        r = NULL; /* could not resend: report as a connection failure */
    }
    async_run_finish(ac, run, r);
}

/* Starts run for cmd (taken) with one of cb and plain_cb. */
static enum llmq_rc async_run_start(redisAsyncContext *ac, char *cmd, size_t len,
                                    const struct llmq_redis_resend_once *once,
                                    llmq_redis_reply_fn *cb, redisCallbackFn *plain_cb,
                                    void *privdata)
{
    struct async_run *run = calloc(1, sizeof(*run));
    if (run == NULL) {
        redisFreeCommand(cmd);
        return LLMQ_ENOMEM;
    }
    *run = (struct async_run){
        .cmd = cmd, .len = len, .once = once, .cb = cb, .plain_cb = plain_cb, .privdata = privdata};
    struct llmq_redis_async *owner = llmq_redis_async_owner(ac);
    run->home = llmq_redis_async_cluster(owner) != NULL ? owner : NULL;
    if (async_run_send(ac, run, 0) != REDIS_OK) {
        redisFreeCommand(run->cmd);
        free(run);
        return LLMQ_EREDIS;
    }
    return LLMQ_OK;
}

enum llmq_rc llmq_redis_formatted_async(redisAsyncContext *ac, char *cmd, size_t len,
                                        const struct llmq_redis_resend_once *once,
                                        llmq_redis_reply_fn *cb, void *privdata)
{
    return async_run_start(ac, cmd, len, once, cb, NULL, privdata);
}

enum llmq_rc llmq_redis_vcommand_async(redisAsyncContext *ac, redisCallbackFn *cb, void *privdata,
                                       const char *fmt, va_list ap)
{
    struct llmq_redis_async *owner = llmq_redis_async_owner(ac);
    if (llmq_redis_async_cluster(owner) == NULL) /* nothing to follow: as hiredis */
        return redisvAsyncCommand(ac, cb, privdata, fmt, ap) == REDIS_OK ? LLMQ_OK : LLMQ_EREDIS;
    char *cmd = NULL;
    int len = redisvFormatCommand(&cmd, fmt, ap);
    if (len < 0)
        return LLMQ_ENOMEM;
    return async_run_start(ac, cmd, (size_t)len, NULL, NULL, cb, privdata);
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
