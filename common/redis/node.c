/* One Redis node's synchronous connection and the meaning of its errors;
 * see node.h. */
#include "redis/node.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static struct timeval ms_to_timeval(int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* 1 when c's error is its timeout running out: hiredis says errno's text
 * (SO_RCVTIMEO, SO_SNDTIMEO: EAGAIN; the connect's poll: ETIMEDOUT), or our
 * message once llmq_redis_context_error rewrote it. */
static int timed_out(const redisContext *c)
{
    return c->err == REDIS_ERR_IO &&
           (strcmp(c->errstr, strerror(EAGAIN)) == 0 ||
            strcmp(c->errstr, strerror(ETIMEDOUT)) == 0 || strncmp(c->errstr, "Redis at ", 9) == 0);
}

const char *llmq_redis_context_error(redisContext *c)
{
    if (c == NULL || !c->err)
        return "no error";
    if (timed_out(c) && c->tcp.host != NULL && c->timeout != NULL)
        snprintf(c->errstr, sizeof(c->errstr), "Redis at %s:%d did not answer within %g s",
                 c->tcp.host, c->tcp.port,
                 (double)c->timeout->tv_sec + (double)c->timeout->tv_usec / 1e6);
    return c->errstr;
}

enum llmq_rc llmq_redis_error(redisContext *c, const redisReply *reply, const char *what,
                              struct llmq_error *err)
{
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
        /* A script's own error names its kind first: LLMQ_EINVAL is input the
         * account refuses (the caller's to fix), any other a script failure. */
        enum llmq_rc rc = strncmp(reply->str, "LLMQ_EINVAL ", 12) == 0 ? LLMQ_EINVAL
                          : strncmp(reply->str, "LLMQ_", 5) == 0       ? LLMQ_ESCRIPT
                                                                       : LLMQ_EREDIS;
        return llmq_error_set(err, rc, "%s: %s", what, reply->str);
    }
    if (c != NULL && c->err)
        return llmq_error_set(err, LLMQ_EREDIS, "%s: %s", what, llmq_redis_context_error(c));
    return llmq_error_set(err, LLMQ_EREDIS, "%s: no reply", what);
}

enum llmq_rc llmq_redis_handshake(redisContext *c, const struct llmq_redis_url *u,
                                  struct llmq_error *err)
{
    redisReply *r;
    if (u->password[0] != '\0') {
        if (u->user[0] != '\0')
            r = redisCommand(c, "AUTH %s %s", u->user, u->password);
        else
            r = redisCommand(c, "AUTH %s", u->password);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            /* The server's message never contains the password. */
            enum llmq_rc rc = llmq_redis_error(c, r, "redis AUTH", err);
            if (r != NULL)
                freeReplyObject(r);
            return rc;
        }
        freeReplyObject(r);
    }
    if (u->db != 0) {
        r = redisCommand(c, "SELECT %d", u->db);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            enum llmq_rc rc = llmq_redis_error(c, r, "redis SELECT", err);
            if (r != NULL)
                freeReplyObject(r);
            return rc;
        }
        freeReplyObject(r);
    }
    return LLMQ_OK;
}

redisContext *llmq_redis_node_connect(const struct llmq_redis_url *u, int timeout_ms,
                                      struct llmq_error *err)
{
    struct timeval tv = ms_to_timeval(timeout_ms);
    redisContext *c = redisConnectWithTimeout(u->host, u->port, tv);
    if (c == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "redis connect: out of memory");
        return NULL;
    }
    if (c->err) {
        if (timed_out(c)) /* the message names the address */
            llmq_error_set(err, LLMQ_EREDIS, "redis connect: %s", llmq_redis_context_error(c));
        else
            llmq_error_set(err, LLMQ_EREDIS, "redis connect %s:%d: %s", u->host, u->port,
                           c->errstr);
        redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, tv) != REDIS_OK || llmq_redis_handshake(c, u, err) != LLMQ_OK) {
        if (err != NULL && err->rc == LLMQ_OK)
            llmq_error_set(err, LLMQ_EREDIS, "redis connect: cannot set timeout");
        redisFree(c);
        return NULL;
    }
    return c;
}
