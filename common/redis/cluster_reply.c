/* Decoders of Redis Cluster replies; see cluster_reply.h. */
#include "redis/cluster_reply.h"

#include <string.h>

#include "base/parse_int.h"
#include "redis/reply_read.h"

/* A slot or port: s[0..len) in min..max (llmq_parse_digits). */
static int parse_range(const char *s, size_t len, long min, long max, int *out)
{
    int64_t v;
    if (llmq_parse_digits(s, len, min, max, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

/* 1 when err[0..len) starts with the word w followed by a space or the end. */
static int starts_word(const char *err, size_t len, const char *w)
{
    size_t n = strlen(w);
    return len >= n && memcmp(err, w, n) == 0 && (len == n || err[n] == ' ');
}

/* "<slot> <host>:<port>" after MOVED/ASK; the port follows the last ':' (an
 * IPv6 host holds colons). */
static int parse_target(const char *p, size_t len, struct llmq_cluster_redirect *out)
{
    const char *sp = memchr(p, ' ', len);
    if (sp == NULL || parse_range(p, (size_t)(sp - p), 0, LLMQ_CLUSTER_SLOTS - 1, &out->slot))
        return -1;
    const char *addr = sp + 1, *end = p + len;
    const char *colon = NULL;
    for (const char *q = addr; q < end; q++)
        if (*q == ':')
            colon = q;
    if (colon == NULL || parse_range(colon + 1, (size_t)(end - colon - 1), 1, 65535, &out->port))
        return -1;
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= sizeof(out->host) || memchr(addr, ' ', hlen) != NULL ||
        memchr(addr, '\0', hlen) != NULL)
        return -1;
    if (hlen == 1 && addr[0] == '?')
        hlen = 0; /* the node does not know its address */
    memcpy(out->host, addr, hlen);
    out->host[hlen] = '\0';
    return 0;
}

enum llmq_cluster_redirect_kind llmq_cluster_redirect_parse(const char *err, size_t len,
                                                            struct llmq_cluster_redirect *out)
{
    memset(out, 0, sizeof(*out));
    if (err == NULL)
        return LLMQ_REDIRECT_NONE;
    if (starts_word(err, len, "MOVED") || starts_word(err, len, "ASK")) {
        int moved = err[0] == 'M';
        size_t skip = moved ? 6 : 4;
        if (len <= skip || parse_target(err + skip, len - skip, out) != 0) {
            memset(out, 0, sizeof(*out));
            return LLMQ_REDIRECT_NONE;
        }
        out->kind = moved ? LLMQ_REDIRECT_MOVED : LLMQ_REDIRECT_ASK;
        return out->kind;
    }
    if (starts_word(err, len, "TRYAGAIN") || starts_word(err, len, "CLUSTERDOWN") ||
        starts_word(err, len, "LOADING"))
        out->kind = LLMQ_REDIRECT_RETRY;
    return out->kind;
}

enum llmq_cluster_redirect_kind llmq_cluster_redirect_of(const redisReply *r,
                                                         struct llmq_cluster_redirect *out)
{
    if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL) {
        memset(out, 0, sizeof(*out));
        return LLMQ_REDIRECT_NONE;
    }
    return llmq_cluster_redirect_parse(r->str, r->len, out);
}

int llmq_cluster_map_node(struct llmq_cluster_map *map, const char *host, int port)
{
    for (int i = 0; i < map->n_nodes; i++)
        if (map->nodes[i].port == port && strcmp(map->nodes[i].host, host) == 0)
            return i;
    size_t hlen = strlen(host);
    if (map->n_nodes == LLMQ_CLUSTER_NODES_MAX || hlen >= sizeof(map->nodes[0].host))
        return -1;
    struct llmq_cluster_node *n = &map->nodes[map->n_nodes];
    memcpy(n->host, host, hlen + 1);
    n->port = port;
    return map->n_nodes++;
}

int llmq_cluster_slots_parse(const redisReply *r, const char *asked_host,
                             struct llmq_cluster_map *map)
{
    map->n_nodes = 0;
    for (int s = 0; s < LLMQ_CLUSTER_SLOTS; s++)
        map->owner[s] = -1;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return -1;
    int covered = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i];
        const redisReply *primary = llmq_reply_at(range, 2);
        int64_t start, end, port;
        char host[256];
        if (llmq_reply_int(llmq_reply_at(range, 0), &start) != 0 ||
            llmq_reply_int(llmq_reply_at(range, 1), &end) != 0 || start < 0 || end < start ||
            end >= LLMQ_CLUSTER_SLOTS ||
            llmq_reply_copy(llmq_reply_at(primary, 0), host, sizeof(host)) != 0 ||
            llmq_reply_int(llmq_reply_at(primary, 1), &port) != 0 || port < 1 || port > 65535)
            return -1;
        if (host[0] == '\0' || strcmp(host, "?") == 0) {
            if (asked_host == NULL || strlen(asked_host) >= sizeof(host))
                return -1;
            memcpy(host, asked_host, strlen(asked_host) + 1);
        }
        int idx = llmq_cluster_map_node(map, host, (int)port);
        if (idx < 0)
            return -1;
        for (int64_t s = start; s <= end; s++) {
            covered += map->owner[s] < 0;
            map->owner[s] = (int16_t)idx;
        }
    }
    return covered;
}
