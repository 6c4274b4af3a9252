/* The reply accessors of reply_read.h. */
#include "redis/reply_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Digits of the longest int64 ("-9223372036854775808") */
#define INT64_TEXT_MAX 20

const redisReply *llmq_reply_at(const redisReply *r, size_t i)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return NULL;
    return r->element[i];
}

int llmq_reply_int(const redisReply *e, int64_t *out)
{
    if (e == NULL)
        return -1;
    if (e->type == REDIS_REPLY_INTEGER) {
        *out = e->integer;
        return 0;
    }
    if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > INT64_TEXT_MAX)
        return -1;
    char buf[INT64_TEXT_MAX + 1], *end = NULL;
    memcpy(buf, e->str, e->len);
    buf[e->len] = '\0';
    if (buf[0] != '-' && (buf[0] < '0' || buf[0] > '9'))
        return -1; /* strtoll would skip spaces and take '+' */
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno != 0 || end == buf || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

long long llmq_reply_int_or(const redisReply *e, long long def)
{
    int64_t v = 0;
    return llmq_reply_int(e, &v) == 0 ? (long long)v : def;
}

int llmq_reply_copy(const redisReply *e, char *buf, size_t n)
{
    if (e == NULL || n == 0)
        return -1;
    if (e->type == REDIS_REPLY_INTEGER) {
        char tmp[INT64_TEXT_MAX + 2];
        int k = snprintf(tmp, sizeof(tmp), "%lld", e->integer);
        if (k < 0 || (size_t)k >= n)
            return -1;
        memcpy(buf, tmp, (size_t)k + 1);
        return 0;
    }
    if (e->type != REDIS_REPLY_STRING || e->len >= n)
        return -1;
    memcpy(buf, e->str, e->len);
    buf[e->len] = '\0';
    return 0;
}

const char *llmq_reply_str_or(const redisReply *e, const char *def)
{
    return e != NULL && e->type == REDIS_REPLY_STRING ? e->str : def;
}

char *llmq_reply_dup(const redisReply *e)
{
    if (e == NULL || (e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS))
        return NULL;
    char *s = malloc(e->len + 1);
    if (s != NULL) {
        memcpy(s, e->str, e->len);
        s[e->len] = '\0';
    }
    return s;
}
