/* Synchronous Redis connections shared by every binary: resolved (Sentinel,
 * cluster), connected (node.h), a cluster's redirections followed; the
 * readers of flat field replies and SCAN. */
#include "redis/redis.h"

#include "redis/cluster.h"
#include "redis/node.h"
#include "redis/reply_read.h"
#include "redis/sentinel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

redisContext *llmq_redis_connect_parsed(const struct llmq_redis_url *url, int timeout_ms,
                                        struct llmq_error *err)
{
    struct llmq_redis_url resolved = *url;
    const struct llmq_redis_url *u = &resolved;
    if (llmq_sentinel_resolve(&resolved, timeout_ms, err) != LLMQ_OK ||
        llmq_cluster_resolve(&resolved, 0, timeout_ms, err) != LLMQ_OK)
        return NULL;
    redisContext *c = llmq_redis_node_connect(u, timeout_ms, err);
    if (c == NULL && llmq_redis_url_is_cluster(u)) {
        /* The node the map names may be gone (a failover): ask again. */
        struct llmq_error again = {0};
        if (llmq_cluster_resolve(&resolved, 1, timeout_ms, &again) != LLMQ_OK) {
            llmq_error_set(err, again.rc, "%s", again.msg);
            return NULL;
        }
        c = llmq_redis_node_connect(u, timeout_ms, err);
    }
    if (c != NULL && llmq_redis_url_is_cluster(u))
        llmq_cluster_attach(c, llmq_cluster_of(u));
    memset(&resolved, 0, sizeof(resolved)); /* the password */
    return c;
}

enum llmq_rc llmq_redis_follow(redisContext *c, const char *host, int port, int timeout_ms,
                               struct llmq_error *err)
{
    struct llmq_cluster *cl = llmq_cluster_of_context(c);
    if (cl == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "redis: not a cluster connection");
    redisContext *n = llmq_cluster_connect_node(cl, host, port, timeout_ms, err);
    if (n == NULL)
        return err ? err->rc : LLMQ_EREDIS;
    /* hiredis 0.14's redisContext holds no pointer to itself: its contents
     * can change places, and the caller's pointer now reads the new
     * connection while the old one is freed. */
    redisContext old = *c;
    *c = *n;
    *n = old;
    redisFree(n);
    return LLMQ_OK;
}

static int context_timeout_ms(const redisContext *c)
{
    if (c->timeout == NULL)
        return 5000;
    return (int)(c->timeout->tv_sec * 1000 + c->timeout->tv_usec / 1000);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The command at the target of an ASK: ASKING then cmd on a connection of
 * its own to host:port. Returns its reply, or NULL (the cause in c's
 * errstr, c->err set: the caller sees a connection error). */
static redisReply *run_asking(redisContext *c, struct llmq_cluster *cl, const char *host, int port,
                              const char *cmd, size_t len)
{
    struct llmq_error err = {0};
    redisContext *t = llmq_cluster_connect_node(cl, host, port, context_timeout_ms(c), &err);
    redisReply *ok = NULL, *r = NULL;
    if (t == NULL || redisAppendCommand(t, "ASKING") != REDIS_OK ||
        redisAppendFormattedCommand(t, cmd, len) != REDIS_OK ||
        redisGetReply(t, (void **)&ok) != REDIS_OK || redisGetReply(t, (void **)&r) != REDIS_OK) {
        c->err = REDIS_ERR_IO;
        snprintf(c->errstr, sizeof(c->errstr), "redis %.40s:%d (ASK): %.60s", host, port,
                 t == NULL ? err.msg : llmq_redis_context_error(t));
        r = NULL;
    }
    if (ok != NULL)
        freeReplyObject(ok);
    if (t != NULL)
        redisFree(t);
    return r;
}

redisReply *llmq_redis_routed(redisContext *c, const char *cmd, size_t len)
{
    struct llmq_cluster *cl = llmq_cluster_of_context(c);
    int redirects = 0, tries = 0, ask_port = 0;
    char ask_host[256] = "";
    for (;;) {
        redisReply *r = NULL;
        if (ask_port != 0) {
            r = run_asking(c, cl, ask_host, ask_port, cmd, len);
            ask_port = 0;
        } else if (redisAppendFormattedCommand(c, cmd, len) != REDIS_OK ||
                   redisGetReply(c, (void **)&r) != REDIS_OK) {
            r = NULL;
        }
        struct llmq_cluster_redirect rd;
        enum llmq_cluster_redirect_kind kind =
            cl != NULL ? llmq_cluster_redirect_of(r, &rd) : LLMQ_REDIRECT_NONE;
        if (kind == LLMQ_REDIRECT_RETRY && ++tries <= LLMQ_CLUSTER_RETRIES_MAX) {
            /* the slot migrates, or the cluster fails over: the same, later */
            freeReplyObject(r);
            llmq_cluster_count_retry();
            sleep_ms(llmq_cluster_retry_delay_ms(tries));
            continue;
        }
        if ((kind == LLMQ_REDIRECT_MOVED || kind == LLMQ_REDIRECT_ASK) &&
            ++redirects <= LLMQ_CLUSTER_REDIRECTS_MAX) {
            char from[256], host[256];
            snprintf(from, sizeof(from), "%s", c->tcp.host != NULL ? c->tcp.host : "");
            freeReplyObject(r);
            if (kind == LLMQ_REDIRECT_ASK) {
                llmq_cluster_count_ask();
                snprintf(ask_host, sizeof(ask_host), "%s", rd.host[0] ? rd.host : from);
                ask_port = rd.port;
                continue;
            }
            int port;
            llmq_cluster_note_moved(cl, &rd, from, host, sizeof(host), &port);
            llmq_cluster_count_moved();
            struct llmq_error err = {0};
            if (llmq_redis_follow(c, host, port, context_timeout_ms(c), &err) != LLMQ_OK) {
                c->err = REDIS_ERR_IO;
                snprintf(c->errstr, sizeof(c->errstr), "%.120s", err.msg);
                return NULL;
            }
            continue;
        }
        return r;
    }
}

redisReply *llmq_redis_command(redisContext *c, const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0) {
        c->err = REDIS_ERR_OOM;
        snprintf(c->errstr, sizeof(c->errstr), "out of memory");
        return NULL;
    }
    redisReply *r = llmq_redis_routed(c, cmd, (size_t)len);
    free(cmd);
    return r;
}

redisReply *llmq_redis_redo(redisContext *c, redisReply *r, const char *fmt, ...)
{
    struct llmq_cluster *cl = llmq_cluster_of_context(c);
    struct llmq_cluster_redirect rd;
    if (cl == NULL || llmq_cluster_redirect_of(r, &rd) == LLMQ_REDIRECT_NONE)
        return r;
    freeReplyObject(r);
    /* c still owes the rest of its pipeline: the command goes again on a
     * connection of its own to c's node, which follows the redirections. */
    struct llmq_error err = {0};
    redisContext *t = llmq_cluster_connect_node(cl, c->tcp.host != NULL ? c->tcp.host : "",
                                                c->tcp.port, context_timeout_ms(c), &err);
    if (t == NULL)
        return NULL;
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    r = len < 0 ? NULL : llmq_redis_routed(t, cmd, (size_t)len);
    free(cmd);
    redisFree(t);
    return r;
}

redisContext *llmq_redis_connect(const char *url, int timeout_ms, struct llmq_error *err)
{
    struct llmq_redis_url u;
    if (llmq_redis_url_parse(url, &u, err) != LLMQ_OK)
        return NULL;
    return llmq_redis_connect_parsed(&u, timeout_ms, err);
}

const char *llmq_redis_field_next(const redisReply *flat, const char *name, size_t *pos)
{
    if (flat == NULL || flat->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = *pos; i + 1 < flat->elements; i += 2)
        if (flat->element[i]->type == REDIS_REPLY_STRING &&
            flat->element[i + 1]->type == REDIS_REPLY_STRING &&
            strcmp(flat->element[i]->str, name) == 0) {
            *pos = i + 2;
            return flat->element[i + 1]->str;
        }
    *pos = flat->elements;
    return NULL;
}

const char *llmq_redis_field(const redisReply *flat, const char *name)
{
    size_t pos = 0;
    return llmq_redis_field_next(flat, name, &pos);
}

enum llmq_rc llmq_redis_scan(redisContext *c, const char *pattern, int count,
                             llmq_redis_scan_fn *each, void *ud, struct llmq_error *err)
{
    char cursor[32] = "0";
    int stop = 0;
    do {
        redisReply *r = redisCommand(c, "SCAN %s MATCH %s COUNT %d", cursor, pattern, count);
        const redisReply *next = llmq_reply_at(r, 0), *keys = llmq_reply_at(r, 1);
        if (next == NULL || llmq_reply_copy(next, cursor, sizeof(cursor)) != 0 || keys == NULL ||
            keys->type != REDIS_REPLY_ARRAY) {
            enum llmq_rc rc = r == NULL || r->type == REDIS_REPLY_ERROR
                                  ? llmq_redis_error(c, r, "SCAN", err)
                                  : llmq_error_set(err, LLMQ_EREDIS, "SCAN: unexpected reply");
            if (r != NULL)
                freeReplyObject(r);
            return rc;
        }
        for (size_t i = 0; i < keys->elements && !stop; i++)
            if (keys->element[i]->type == REDIS_REPLY_STRING)
                stop = each(keys->element[i]->str, ud);
        freeReplyObject(r);
    } while (!stop && strcmp(cursor, "0") != 0);
    return LLMQ_OK;
}
