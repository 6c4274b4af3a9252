/* Redis URLs: redis://[[user]:password@]host[:port][/db]
 * and, for Redis Sentinel,
 *   redis-sentinel://[[user]:password@]host:port[,host:port...]/master-name[/db]
 * (the password is the data nodes'; sentinels are asked without AUTH). For a
 * Sentinel URL host and port are the master's, filled by
 * llmq_sentinel_resolve (sentinel.h) before each connect.
 *
 * The only way a Redis address reaches llmq (flag --redis or env
 * LLMQ_REDIS_URL). Parsing is pure: no I/O, no allocation. */
#ifndef LLMQ_REDIS_URL_H
#define LLMQ_REDIS_URL_H

#include <stddef.h>

#include "llmq/error.h"

#define LLMQ_REDIS_URL_DEFAULT "redis://127.0.0.1:6379/0"

#define LLMQ_SENTINELS_MAX 8

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
};

/* Parses url (borrowed) into *out. Returns LLMQ_OK, or LLMQ_EINVAL with a
 * message naming the bad part (the password is never echoed). */
enum llmq_rc llmq_redis_url_parse(const char *url, struct llmq_redis_url *out,
                                  struct llmq_error *err);

/* Writes the URL without its password (for logs) into buf of size n. */
void llmq_redis_url_redacted(const struct llmq_redis_url *u, char *buf, size_t n);

#endif
