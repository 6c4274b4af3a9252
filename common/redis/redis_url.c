/* Parsing of redis:// URLs. Percent-escapes in user and password are decoded so
 * passwords with '@' or ':' can be given. */
#include "redis/redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse_int.h"
#include "redis/crc16.h"

/* Copies src[0..len) into dst (size n), decoding %XX. Returns 0, or -1 when the
 * result does not fit or an escape is malformed. */
static int copy_decoded(char *dst, size_t n, const char *src, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = llmq_hex_digit_value((unsigned char)src[i + 1]);
            int lo = llmq_hex_digit_value((unsigned char)src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (o + 1 >= n)
            return -1;
        dst[o++] = c;
    }
    dst[o] = '\0';
    return 0;
}

/* A port or database number: s[0..len) in min..max (llmq_parse_digits). */
static int parse_int(const char *s, size_t len, int min, int max, int *out)
{
    int64_t v;
    if (llmq_parse_digits(s, len, min, max, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

/* Splits "host[:port]" or "[ipv6]:port" in p..end: the host, decoded, into
 * host (n bytes), and *port_at to the text after the port's ':' (NULL when
 * there is none). Returns NULL, or what is wrong (for the message). */
static const char *split_host_port(const char *p, const char *end, char *host, size_t n,
                                   const char **port_at)
{
    const char *start = p, *stop;
    *port_at = NULL;
    if (p < end && *p == '[') { /* [::1]:6379: an IPv6 address holds colons */
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (close == NULL)
            return "unterminated [ in host";
        if (close + 1 < end && close[1] != ':')
            return "junk after ]";
        if (close + 1 < end)
            *port_at = close + 2;
        start = p + 1;
        stop = close;
    } else {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        stop = colon ? colon : end;
        if (colon != NULL)
            *port_at = colon + 1;
    }
    if (stop == start)
        return "missing host";
    if (copy_decoded(host, n, start, (size_t)(stop - start)) != 0)
        return "host too long";
    return NULL;
}

/* Parses "host:port[,host:port...]" (a host may be "[ipv6]") from p to end
 * into addrs (at most max, counted in *n); what names the list in messages. */
static enum llmq_rc parse_addrs(const char *p, const char *end, struct llmq_sentinel_addr *addrs,
                                int max, int *n, const char *what, struct llmq_error *err)
{
    while (p < end) {
        /* a comma never occurs inside brackets: the first one ends the address */
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        const char *port_at;
        if (*n == max)
            return llmq_error_set(err, LLMQ_EINVAL, "redis url: more than %d %ss", max, what);
        struct llmq_sentinel_addr *a = &addrs[(*n)++];
        if (split_host_port(p, stop, a->host, sizeof(a->host), &port_at) != NULL ||
            port_at == NULL || parse_int(port_at, (size_t)(stop - port_at), 1, 65535, &a->port))
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "redis url: each %s must be host:port (1..65535; an IPv6 "
                                  "address in brackets: [::1]:port)",
                                  what);
        if (comma != NULL && comma + 1 == end)
            return llmq_error_set(err, LLMQ_EINVAL, "redis url: empty %s after ','", what);
        p = comma ? comma + 1 : stop;
    }
    if (*n == 0)
        return llmq_error_set(err, LLMQ_EINVAL, "redis url: no %s given", what);
    return LLMQ_OK;
}

/* Parses "host:port[,host:port...][/0]" of a cluster URL. */
static enum llmq_rc parse_seeds(const char *p, struct llmq_redis_url *out, struct llmq_error *err)
{
    const char *slash = strchr(p, '/');
    const char *end = slash ? slash : p + strlen(p);
    enum llmq_rc rc =
        parse_addrs(p, end, out->seeds, LLMQ_CLUSTER_SEEDS_MAX, &out->n_seeds, "seed node", err);
    if (rc != LLMQ_OK)
        return rc;
    if (slash != NULL && slash[1] != '\0' && strcmp(slash + 1, "0") != 0)
        return llmq_error_set(err, LLMQ_EINVAL,
                              "redis url: a cluster has database 0 only (got /%s)", slash + 1);
    /* Until routed, connections go to the first seed. */
    memcpy(out->host, out->seeds[0].host, sizeof(out->host));
    out->port = out->seeds[0].port;
    return LLMQ_OK;
}

/* Parses "host:port[,host:port...]/master[/db]" of a Sentinel URL. */
static enum llmq_rc parse_sentinels(const char *p, struct llmq_redis_url *out,
                                    struct llmq_error *err)
{
    const char *slash = strchr(p, '/');
    if (slash == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "redis url: sentinel URL needs /master-name");
    enum llmq_rc rc = parse_addrs(p, slash, out->sentinels, LLMQ_SENTINELS_MAX, &out->n_sentinels,
                                  "sentinel", err);
    if (rc != LLMQ_OK)
        return rc;
    const char *name = slash + 1, *db = strchr(name, '/');
    size_t name_len = db ? (size_t)(db - name) : strlen(name);
    if (name_len == 0 ||
        copy_decoded(out->master_name, sizeof(out->master_name), name, name_len) != 0)
        return llmq_error_set(err, LLMQ_EINVAL, "redis url: bad or missing master name");
    if (db != NULL && db[1] != '\0' && parse_int(db + 1, strlen(db + 1), 0, 1000000, &out->db))
        return llmq_error_set(err, LLMQ_EINVAL, "redis url: database must be a number");
    return LLMQ_OK;
}

enum llmq_rc llmq_redis_url_parse(const char *url, struct llmq_redis_url *out,
                                  struct llmq_error *err)
{
    static const char scheme[] = "redis://";
    static const char sentinel_scheme[] = "redis-sentinel://";
    static const char cluster_scheme[] = "redis+cluster://";
    static const char tls_cluster_scheme[] = "rediss+cluster://";
    memset(out, 0, sizeof(*out));
    out->port = 6379;
    out->route_slot = -1;
    if (url != NULL && (strncmp(url, tls_cluster_scheme, sizeof(tls_cluster_scheme) - 1) == 0 ||
                        strncmp(url, "rediss://", 9) == 0))
        return llmq_error_set(err, LLMQ_EINVAL,
                              "redis url: TLS (rediss://, rediss+cluster://) is not supported: "
                              "this build's hiredis 0.14 has no TLS");
    int sentinel = url != NULL && strncmp(url, sentinel_scheme, sizeof(sentinel_scheme) - 1) == 0;
    int cluster = url != NULL && strncmp(url, cluster_scheme, sizeof(cluster_scheme) - 1) == 0;
    if (url == NULL || (!sentinel && !cluster && strncmp(url, scheme, sizeof(scheme) - 1) != 0))
        return llmq_error_set(
            err, LLMQ_EINVAL,
            "redis url: must start with redis://, redis-sentinel:// or redis+cluster://");
    const char *p = url +
                    (sentinel  ? sizeof(sentinel_scheme)
                     : cluster ? sizeof(cluster_scheme)
                               : sizeof(scheme)) -
                    1;
    const char *end = p + strlen(p);
    const char *slash = strchr(p, '/');
    const char *auth_end = memchr(p, '@', (size_t)((slash ? slash : end) - p));
    if (auth_end != NULL) {
        const char *colon = memchr(p, ':', (size_t)(auth_end - p));
        const char *user_end = colon ? colon : auth_end;
        if (copy_decoded(out->user, sizeof(out->user), p, (size_t)(user_end - p)) != 0)
            return llmq_error_set(err, LLMQ_EINVAL, "redis url: bad or too long user name");
        if (colon != NULL && copy_decoded(out->password, sizeof(out->password), colon + 1,
                                          (size_t)(auth_end - colon - 1)) != 0)
            return llmq_error_set(err, LLMQ_EINVAL, "redis url: bad or too long password");
        if (colon == NULL) {
            /* "redis://secret@host" is the common password-only form. */
            memcpy(out->password, out->user,
                   sizeof(out->password) < sizeof(out->user) ? sizeof(out->password)
                                                             : sizeof(out->user));
            out->user[0] = '\0';
        }
        p = auth_end + 1;
    }
    if (sentinel)
        return parse_sentinels(p, out, err);
    if (cluster)
        return parse_seeds(p, out, err);
    const char *host_end = slash ? slash : end;
    const char *port_at;
    const char *bad = split_host_port(p, host_end, out->host, sizeof(out->host), &port_at);
    if (bad != NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "redis url: %s", bad);
    if (port_at != NULL && parse_int(port_at, (size_t)(host_end - port_at), 1, 65535, &out->port))
        return llmq_error_set(err, LLMQ_EINVAL, "redis url: port must be 1..65535");
    if (slash != NULL && slash + 1 < end &&
        parse_int(slash + 1, (size_t)(end - slash - 1), 0, 1000000, &out->db) != 0)
        return llmq_error_set(err, LLMQ_EINVAL, "redis url: database must be a number");
    return LLMQ_OK;
}

int llmq_redis_url_is_cluster(const struct llmq_redis_url *u)
{
    return u->n_seeds > 0;
}

void llmq_redis_url_route(struct llmq_redis_url *u, const char *account)
{
    if (u->n_seeds > 0 && account != NULL && account[0] != '\0')
        u->route_slot = llmq_cluster_account_slot(account);
}

void llmq_redis_addr_format(const char *host, int port, char *buf, size_t n)
{
    int v6 = strchr(host, ':') != NULL;
    snprintf(buf, n, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

void llmq_redis_url_redacted(const struct llmq_redis_url *u, char *buf, size_t n)
{
    const char *auth = u->password[0] ? ":***" : "";
    const char *at = (u->user[0] || u->password[0]) ? "@" : "";
    char addr[300];
    if (u->n_seeds > 0) {
        llmq_redis_addr_format(u->seeds[0].host, u->seeds[0].port, addr, sizeof(addr));
        snprintf(buf, n, "redis+cluster://%s%s%s%s%s/0", u->user, auth, at, addr,
                 u->n_seeds > 1 ? ",..." : "");
        return;
    }
    if (u->n_sentinels > 0) {
        llmq_redis_addr_format(u->sentinels[0].host, u->sentinels[0].port, addr, sizeof(addr));
        snprintf(buf, n, "redis-sentinel://%s%s%s%s/%s/%d", u->user, auth, at, addr, u->master_name,
                 u->db);
        return;
    }
    llmq_redis_addr_format(u->host, u->port, addr, sizeof(addr));
    snprintf(buf, n, "redis://%s%s%s%s/%d", u->user, auth, at, addr, u->db);
}
