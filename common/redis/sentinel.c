/* Sentinel master lookup; see sentinel.h. */
#include "redis/sentinel.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Asks one sentinel; returns 0 and fills host/port, or -1. */
static int ask(const struct llmq_sentinel_addr *s, const char *master, int timeout_ms, char *host,
               size_t host_len, int *port)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
    int rc = -1;
    if (c == NULL || c->err || redisSetTimeout(c, tv) != REDIS_OK)
        goto out;
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", master);
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
        r->element[0]->len < host_len) {
        long p = strtol(r->element[1]->str, NULL, 10);
        if (p > 0 && p < 65536) {
            memcpy(host, r->element[0]->str, r->element[0]->len);
            host[r->element[0]->len] = '\0';
            *port = (int)p;
            rc = 0;
        }
    }
    if (r != NULL)
        freeReplyObject(r);
out:
    if (c != NULL)
        redisFree(c);
    return rc;
}

enum llmq_rc llmq_sentinel_resolve(struct llmq_redis_url *u, int timeout_ms, struct llmq_error *err)
{
    if (u->n_sentinels == 0)
        return LLMQ_OK;
    int per = timeout_ms / u->n_sentinels;
    if (per < 100)
        per = 100;
    for (int i = 0; i < u->n_sentinels; i++) {
        char host[256];
        int port;
        if (ask(&u->sentinels[i], u->master_name, per, host, sizeof(host), &port) == 0) {
            memcpy(u->host, host, sizeof(u->host));
            u->port = port;
            return LLMQ_OK;
        }
    }
    return llmq_error_set(err, LLMQ_EREDIS, "redis sentinel: no sentinel knows master '%s'",
                          u->master_name);
}

int llmq_sentinel_is_stale_error(const char *reply_text)
{
    return reply_text != NULL && strncmp(reply_text, "READONLY", 8) == 0;
}
