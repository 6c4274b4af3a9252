/* Redis URLs: redis://[[user]:password@]host[:port][/db]
 * and, for Redis Sentinel,
 *   redis-sentinel://[[user]:password@]host:port[,host:port...]/master-name[/db]
 * (the password is the data nodes'; sentinels are asked without AUTH). For a
 * Sentinel URL host and port are the master's, filled by
 * llmq_sentinel_resolve (sentinel.h) before each connect.
 * And, for Redis Cluster,
 *   redis+cluster://[[user]:password@]host:port[,host:port...][/0]
 * where the addresses are seed nodes (any nodes of the cluster: the slot map
 * is asked of them); host and port are then the node serving the slot of the
 * connection's account (llmq_redis_url_route), filled by llmq_cluster_resolve
 * (cluster.h) before each connect. A cluster has database 0 only. The TLS
 * form rediss+cluster:// is recognised and refused: hiredis 0.14 (Debian 12)
 * has no TLS (the message says so). In every form an IPv6 host is written
 * in brackets: redis+cluster://[::1]:7000,[::1]:7001.
 *
 * The only way a Redis address reaches llmq (flag --redis or env
 * LLMQ_REDIS_URL). Parsing is pure: no I/O, no allocation. */
#ifndef LLMQ_REDIS_URL_H
#define LLMQ_REDIS_URL_H

#include <stddef.h>

#include "llmq/error.h"

#define LLMQ_REDIS_URL_DEFAULT "redis://127.0.0.1:6379/0"

#define LLMQ_SENTINELS_MAX 8
#define LLMQ_CLUSTER_SEEDS_MAX 16

struct llmq_sentinel_addr {
    char host[256];
    int port;
};

struct llmq_redis_url {
    char host[256];
    int port;
    struct llmq_sentinel_addr sentinels[LLMQ_SENTINELS_MAX];
    int n_sentinels;       /* 0: a plain redis:// URL */
    char master_name[128]; /* Sentinel: the monitored master's name */
    char user[128];        /* empty: no ACL user (AUTH with password only) */
    char password[256];    /* empty: no AUTH */
    int db;
    /* Cluster: the seed nodes (n_seeds 0: not a cluster URL), and the slot
     * of the account the connection serves (route_slot -1: none yet, then
     * the first node that answers). */
    struct llmq_sentinel_addr seeds[LLMQ_CLUSTER_SEEDS_MAX];
    int n_seeds;
    int route_slot;
};

/* Parses url (borrowed) into *out. Returns LLMQ_OK, or LLMQ_EINVAL with a
 * message naming the bad part (the password is never echoed). */
enum llmq_rc llmq_redis_url_parse(const char *url, struct llmq_redis_url *out,
                                  struct llmq_error *err);

/* 1 when u is a redis+cluster:// URL. */
int llmq_redis_url_is_cluster(const struct llmq_redis_url *u);

/* Makes u's connections serve account (borrowed): on a cluster, they go to
 * the node of the account's slot (crc16.h). No effect on other URLs. */
void llmq_redis_url_route(struct llmq_redis_url *u, const char *account);

/* Writes host:port into buf of size n, an IPv6 host in brackets
 * ("[::1]:7000"), as URLs and `llmq status` show an address. */
void llmq_redis_addr_format(const char *host, int port, char *buf, size_t n);

/* Writes the URL without its password (for logs) into buf of size n. */
void llmq_redis_url_redacted(const struct llmq_redis_url *u, char *buf, size_t n);

#endif
