/* The test cluster; see cluster_fixture.h. */
#include "cluster_fixture.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis/cluster_reply.h"
#include "redis/crc16.h"
#include "redis/redis_url.h"

#define NODE_ARGS                                                                                  \
    "--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 1000 "          \
    "--appendonly no"

static redisReply *cmd(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    return rep;
}

redisContext *llmq_test_cluster_connect(struct llmq_test_cluster *c, int i)
{
    struct timeval tv = {2, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", c->nodes[i].port, tv);
    if (r != NULL && r->err) {
        redisFree(r);
        return NULL;
    }
    if (r != NULL)
        redisSetTimeout(r, tv);
    return r;
}

/* Runs a command (fmt and its arguments, as redisCommand) on node i;
 * returns 0 when it answers without an error. */
static int node_ok(struct llmq_test_cluster *c, int i, const char *fmt, ...)
{
    redisContext *r = llmq_test_cluster_connect(c, i);
    if (r == NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    int ok = rep != NULL && rep->type != REDIS_REPLY_ERROR;
    if (!ok)
        fprintf(stderr, "cluster fixture: node %d: %s: %s\n", i, fmt, rep ? rep->str : r->errstr);
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return ok ? 0 : -1;
}

/* Node i's INFO section text contains needle. */
static int info_has(struct llmq_test_cluster *c, int i, const char *section, const char *needle)
{
    redisContext *r = llmq_test_cluster_connect(c, i);
    if (r == NULL)
        return 0;
    redisReply *rep =
        strcmp(section, "cluster") == 0 ? cmd(r, "CLUSTER INFO") : cmd(r, "INFO %s", section);
    int has = rep != NULL && rep->type == REDIS_REPLY_STRING && strstr(rep->str, needle) != NULL;
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return has;
}

/* The owner port of every slot as node i says, into owner[16384]. */
static int node_map(struct llmq_test_cluster *c, int i, int *owner)
{
    redisContext *r = llmq_test_cluster_connect(c, i);
    if (r == NULL)
        return -1;
    redisReply *rep = cmd(r, "CLUSTER SLOTS");
    struct llmq_cluster_map *map = malloc(sizeof(*map));
    int covered = map ? llmq_cluster_slots_parse(rep, "127.0.0.1", map) : -1;
    for (int s = 0; covered >= 0 && s < LLMQ_CLUSTER_SLOTS; s++)
        owner[s] = map->owner[s] >= 0 ? map->nodes[map->owner[s]].port : -1;
    free(map);
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return covered == LLMQ_CLUSTER_SLOTS ? 0 : -1;
}

int llmq_test_cluster_wait_stable(struct llmq_test_cluster *c, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    int *first = malloc(sizeof(int) * LLMQ_CLUSTER_SLOTS);
    int *other = malloc(sizeof(int) * LLMQ_CLUSTER_SLOTS);
    int stable = 0;
    while (!stable && llmq_test_now_ms() < deadline) {
        stable = 1;
        int have_first = 0;
        for (int i = 0; i < c->n_nodes && stable; i++) {
            if (!c->alive[i])
                continue;
            if (!info_has(c, i, "cluster", "cluster_state:ok") ||
                node_map(c, i, have_first ? other : first) != 0)
                stable = 0;
            else if (have_first && memcmp(first, other, sizeof(int) * LLMQ_CLUSTER_SLOTS) != 0)
                stable = 0;
            have_first = 1;
        }
        /* and every owner is a node still running (a killed primary is
         * named until the cluster has failed it over) */
        for (int s = 0; stable && s < LLMQ_CLUSTER_SLOTS; s++) {
            int live = 0;
            for (int k = 0; k < c->n_nodes && !live; k++)
                live = c->alive[k] && c->nodes[k].port == first[s];
            stable = live;
        }
        if (!stable)
            usleep(50000);
    }
    free(first);
    free(other);
    return stable ? 0 : -1;
}

int llmq_test_cluster_owner(struct llmq_test_cluster *c, int slot)
{
    int *owner = malloc(sizeof(int) * LLMQ_CLUSTER_SLOTS);
    int found = -1;
    for (int i = 0; i < c->n_nodes && found < 0; i++) {
        if (!c->alive[i] || node_map(c, i, owner) != 0)
            continue;
        for (int k = 0; k < c->n_nodes; k++)
            if (c->nodes[k].port == owner[slot])
                found = k;
    }
    free(owner);
    return found;
}

void llmq_test_cluster_stop(struct llmq_test_cluster *c)
{
    for (int i = 0; i < c->n_nodes; i++)
        if (c->alive[i]) {
            llmq_test_redis_stop(&c->nodes[i]);
            c->alive[i] = 0;
        }
}

static int read_id(struct llmq_test_cluster *c, int i)
{
    redisContext *r = llmq_test_cluster_connect(c, i);
    redisReply *rep = r ? cmd(r, "CLUSTER MYID") : NULL;
    int ok = rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len < sizeof(c->ids[i]);
    if (ok)
        snprintf(c->ids[i], sizeof(c->ids[i]), "%s", rep->str);
    if (rep)
        freeReplyObject(rep);
    if (r)
        redisFree(r);
    return ok ? 0 : -1;
}

/* Waits until node i's CLUSTER NODES lists every node. */
static int wait_known(struct llmq_test_cluster *c, int i, long long deadline)
{
    while (llmq_test_now_ms() < deadline) {
        redisContext *r = llmq_test_cluster_connect(c, i);
        redisReply *rep = r ? cmd(r, "CLUSTER NODES") : NULL;
        int all = rep != NULL && rep->type == REDIS_REPLY_STRING;
        for (int k = 0; all && k < c->n_nodes; k++)
            all = strstr(rep->str, c->ids[k]) != NULL;
        if (all) /* and no handshake in progress */
            all = strstr(rep->str, "handshake") == NULL;
        if (rep)
            freeReplyObject(rep);
        if (r)
            redisFree(r);
        if (all)
            return 0;
        usleep(50000);
    }
    return -1;
}

int llmq_test_cluster_start(struct llmq_test_cluster *c, int primaries, int replicas_each)
{
    return llmq_test_cluster_start_on(c, "127.0.0.1", primaries, replicas_each);
}

int llmq_test_cluster_start_on(struct llmq_test_cluster *c, const char *host, int primaries,
                               int replicas_each)
{
    memset(c, 0, sizeof(*c));
    /* Nodes on ::1 listen on 127.0.0.1 too: the fixture's own connections
     * (llmq_test_cluster_connect, MIGRATE) stay on IPv4; the cluster and
     * llmq know the nodes by host only. */
    int v4 = strcmp(host, "127.0.0.1") == 0;
    c->n_primaries = primaries;
    c->n_nodes = primaries * (1 + replicas_each);
    if (primaries < 1 || c->n_nodes > LLMQ_TEST_CLUSTER_NODES_MAX)
        return -1;
    long long deadline = llmq_test_now_ms() + 30000;
    size_t off = (size_t)snprintf(c->url, sizeof(c->url), "redis+cluster://");
    for (int i = 0; i < c->n_nodes; i++) {
        /* The cluster bus listens on a port of its own (by default the
         * node's + 10000, which may be taken or past 65535): a free one. */
        char args[256];
        c->bus_ports[i] = llmq_test_free_port();
        snprintf(args, sizeof(args), NODE_ARGS " --cluster-port %d%s%s", c->bus_ports[i],
                 v4 ? "" : " --bind 127.0.0.1 ", v4 ? "" : host);
        if (llmq_test_redis_start(&c->nodes[i], args) != 0 || read_id(c, i) != 0) {
            fprintf(stderr, "cluster fixture: node %d did not start\n", i);
            llmq_test_cluster_stop(c);
            return -1;
        }
        c->alive[i] = 1;
        char addr[80];
        llmq_redis_addr_format(host, c->nodes[i].port, addr, sizeof(addr));
        off += (size_t)snprintf(c->url + off, sizeof(c->url) - off, "%s%s", i ? "," : "", addr);
    }
    for (int p = 0; p < primaries; p++) {
        char lo[16], hi[16];
        snprintf(lo, sizeof(lo), "%d", p * LLMQ_CLUSTER_SLOTS / primaries);
        snprintf(hi, sizeof(hi), "%d", (p + 1) * LLMQ_CLUSTER_SLOTS / primaries - 1);
        if (node_ok(c, p, "CLUSTER ADDSLOTSRANGE %s %s", lo, hi) != 0)
            goto fail;
    }
    for (int i = 1; i < c->n_nodes; i++) {
        char port[16], bus[16];
        snprintf(port, sizeof(port), "%d", c->nodes[0].port);
        snprintf(bus, sizeof(bus), "%d", c->bus_ports[0]);
        if (node_ok(c, i, "CLUSTER MEET %s %s %s", host, port, bus) != 0)
            goto fail;
    }
    for (int i = 0; i < c->n_nodes; i++)
        if (wait_known(c, i, deadline) != 0) {
            fprintf(stderr, "cluster fixture: node %d never met every node\n", i);
            goto fail;
        }
    for (int i = primaries; i < c->n_nodes; i++)
        if (node_ok(c, i, "CLUSTER REPLICATE %s", c->ids[(i - primaries) % primaries]) != 0)
            goto fail;
    for (int i = primaries; i < c->n_nodes; i++)
        while (!info_has(c, i, "replication", "master_link_status:up"))
            if (llmq_test_now_ms() > deadline) {
                fprintf(stderr, "cluster fixture: replica %d never linked\n", i);
                goto fail;
            } else
                usleep(50000);
    if (llmq_test_cluster_wait_stable(c, deadline - llmq_test_now_ms()) != 0) {
        fprintf(stderr, "cluster fixture: the cluster never became stable\n");
        goto fail;
    }
    return 0;
fail:
    llmq_test_cluster_stop(c);
    return -1;
}

int llmq_test_cluster_account_slot(const char *account)
{
    return llmq_cluster_account_slot(account);
}

void llmq_test_cluster_spread_accounts(struct llmq_test_cluster *c, const char *prefix, int n,
                                       char (*names)[64])
{
    char base[48];
    llmq_test_unique_name(base, sizeof(base), prefix);
    int k = 0;
    for (int i = 0; i < n; i++) {
        int want = i % c->n_primaries;
        for (;; k++) {
            snprintf(names[i], 64, "%s-%d", base, k);
            int slot = llmq_cluster_account_slot(names[i]);
            if (slot * c->n_primaries / LLMQ_CLUSTER_SLOTS == want)
                break;
        }
        k++;
    }
}

void llmq_test_cluster_kill(struct llmq_test_cluster *c, int i)
{
    if (!c->alive[i])
        return;
    kill(c->nodes[i].pid, SIGKILL);
    waitpid(c->nodes[i].pid, NULL, 0);
    c->nodes[i].pid = 0;
    c->alive[i] = 0;
}

int llmq_test_cluster_failover(struct llmq_test_cluster *c, int i, long long timeout_ms)
{
    if (node_ok(c, i, "CLUSTER FAILOVER") != 0)
        return -1;
    long long deadline = llmq_test_now_ms() + timeout_ms;
    while (llmq_test_now_ms() < deadline) {
        if (info_has(c, i, "replication", "role:master"))
            return 0;
        usleep(50000);
    }
    return -1;
}

int llmq_test_cluster_move_slot(struct llmq_test_cluster *c, int slot, int to, int batch_keys,
                                int pause_ms, long long *migrated)
{
    *migrated = 0;
    int from = llmq_test_cluster_owner(c, slot);
    if (from < 0 || from == to)
        return -1;
    char s[16], port[16], batch[16];
    snprintf(s, sizeof(s), "%d", slot);
    snprintf(port, sizeof(port), "%d", c->nodes[to].port);
    snprintf(batch, sizeof(batch), "%d", batch_keys);
    redisContext *src = llmq_test_cluster_connect(c, from), *dst = llmq_test_cluster_connect(c, to);
    int rc = -1;
    if (src == NULL || dst == NULL)
        goto out;
    redisReply *r = cmd(dst, "CLUSTER SETSLOT %s IMPORTING %s", s, c->ids[from]);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r)
        freeReplyObject(r);
    r = ok ? cmd(src, "CLUSTER SETSLOT %s MIGRATING %s", s, c->ids[to]) : NULL;
    ok = r && r->type != REDIS_REPLY_ERROR;
    if (r)
        freeReplyObject(r);
    if (!ok) {
        fprintf(stderr, "cluster fixture: SETSLOT IMPORTING/MIGRATING failed\n");
        goto out;
    }
    for (;;) {
        r = cmd(src, "CLUSTER GETKEYSINSLOT %s %s", s, batch);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            fprintf(stderr, "cluster fixture: GETKEYSINSLOT failed\n");
            if (r)
                freeReplyObject(r);
            goto out;
        }
        size_t n = r->elements;
        if (n == 0) {
            freeReplyObject(r);
            break;
        }
        const char **argv = calloc(n + 8, sizeof(*argv));
        size_t k = 0;
        argv[k++] = "MIGRATE";
        argv[k++] = "127.0.0.1";
        argv[k++] = port;
        argv[k++] = "";
        argv[k++] = "0";
        argv[k++] = "5000";
        argv[k++] = "KEYS";
        for (size_t j = 0; j < n; j++)
            argv[k++] = r->element[j]->str;
        redisReply *m = redisCommandArgv(src, (int)k, argv, NULL);
        ok = m && m->type != REDIS_REPLY_ERROR;
        if (!ok)
            fprintf(stderr, "cluster fixture: MIGRATE failed: %s\n", m ? m->str : src->errstr);
        if (m)
            freeReplyObject(m);
        free(argv);
        freeReplyObject(r);
        if (!ok)
            goto out;
        *migrated += (long long)n;
        usleep((useconds_t)pause_ms * 1000);
    }
    /* The new owner first, then the old, then the rest (as redis-cli). */
    int order[LLMQ_TEST_CLUSTER_NODES_MAX], n_order = 0;
    order[n_order++] = to;
    order[n_order++] = from;
    for (int i = 0; i < c->n_nodes; i++) /* the primaries now (a failover may have swapped) */
        if (i != to && i != from && c->alive[i] && info_has(c, i, "replication", "role:master"))
            order[n_order++] = i;
    for (int k = 0; k < n_order; k++)
        if (c->alive[order[k]] &&
            node_ok(c, order[k], "CLUSTER SETSLOT %s NODE %s", s, c->ids[to]) != 0)
            goto out;
    rc = 0;
out:
    if (src)
        redisFree(src);
    if (dst)
        redisFree(dst);
    return rc;
}
