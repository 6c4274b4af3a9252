/* The per-process state of each Redis Cluster; see cluster.h.
 *
 * A fetch copies the addresses to ask under the lock, asks them without it
 * (a node may take the whole connect timeout) and installs the new map under
 * it again; of two fetches racing, the later install wins, and either map is
 * one the cluster gave. */
#include "redis/cluster.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redis/node.h"

struct llmq_cluster {
    struct llmq_redis_url url; /* seeds and credentials; host/port unused */
    pthread_mutex_t lock;
    struct llmq_cluster_map *map; /* NULL: none fetched yet */
    int stale;                    /* fetch before the next resolve */
    long long fetched_ms;         /* monotonic time of the map's fetch */
    /* primaries the hook took (llmq_cluster_on_new_primary) in this process */
    struct llmq_cluster_node loaded[LLMQ_CLUSTER_NODES_MAX];
    int n_loaded;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct llmq_cluster *registry[LLMQ_CLUSTERS_MAX];
static int n_registry;

static struct llmq_cluster_counts counts;

static llmq_cluster_primary_fn *primary_hook; /* read and set atomically */

static long long monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int same_cluster(const struct llmq_redis_url *a, const struct llmq_redis_url *b)
{
    return a->seeds[0].port == b->seeds[0].port &&
           strcmp(a->seeds[0].host, b->seeds[0].host) == 0 && strcmp(a->user, b->user) == 0 &&
           strcmp(a->password, b->password) == 0;
}

struct llmq_cluster *llmq_cluster_of(const struct llmq_redis_url *u)
{
    if (u == NULL || u->n_seeds == 0)
        return NULL;
    struct llmq_cluster *found = NULL;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_registry && found == NULL; i++)
        if (same_cluster(&registry[i]->url, u))
            found = registry[i];
    if (found == NULL && n_registry < LLMQ_CLUSTERS_MAX) {
        found = calloc(1, sizeof(*found));
        if (found != NULL) {
            found->url = *u;
            pthread_mutex_init(&found->lock, NULL);
            registry[n_registry++] = found;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

const struct llmq_redis_url *llmq_cluster_url(const struct llmq_cluster *cl)
{
    return &cl->url;
}

redisContext *llmq_cluster_connect_node(struct llmq_cluster *cl, const char *host, int port,
                                        int timeout_ms, struct llmq_error *err)
{
    struct llmq_redis_url u = cl->url;
    snprintf(u.host, sizeof(u.host), "%s", host);
    u.port = port;
    redisContext *c = llmq_redis_node_connect(&u, timeout_ms, err);
    memset(&u, 0, sizeof(u)); /* the password */
    if (c != NULL)
        llmq_cluster_attach(c, cl);
    return c;
}

/* Asks host:port for CLUSTER SLOTS into map. Returns 0, or -1 with err. */
static int fetch_from(struct llmq_cluster *cl, const char *host, int port, int timeout_ms,
                      struct llmq_cluster_map *map, struct llmq_error *err)
{
    redisContext *c = llmq_cluster_connect_node(cl, host, port, timeout_ms, err);
    if (c == NULL)
        return -1;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    int covered = llmq_cluster_slots_parse(r, host, map);
    if (covered <= 0)
        llmq_error_set(err, LLMQ_EREDIS, "redis cluster %s:%d: CLUSTER SLOTS: %s", host, port,
                       r == NULL                      ? llmq_redis_context_error(c)
                       : r->type == REDIS_REPLY_ERROR ? r->str
                       : covered == 0                 ? "no slot is served"
                                                      : "unexpected reply");
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return covered > 0 ? 0 : -1;
}

void llmq_cluster_on_new_primary(llmq_cluster_primary_fn *fn)
{
    __atomic_store_n(&primary_hook, fn, __ATOMIC_RELEASE);
}

/* Hands each primary of map this process has not handed over yet to the
 * hook (the script runner's: the library). A node that cannot take it now
 * is tried again at the next fetch (and a call there loads the library on
 * "Function not found" anyway). */
static void hand_over_new_primaries(struct llmq_cluster *cl, const struct llmq_cluster_map *map,
                                    int timeout_ms)
{
    llmq_cluster_primary_fn *hook = __atomic_load_n(&primary_hook, __ATOMIC_ACQUIRE);
    for (int i = 0; hook != NULL && i < map->n_nodes; i++) {
        const struct llmq_cluster_node *n = &map->nodes[i];
        int known = 0;
        pthread_mutex_lock(&cl->lock);
        for (int k = 0; k < cl->n_loaded && !known; k++)
            known = cl->loaded[k].port == n->port && strcmp(cl->loaded[k].host, n->host) == 0;
        pthread_mutex_unlock(&cl->lock);
        if (known)
            continue;
        struct llmq_error e = {0};
        redisContext *c = llmq_cluster_connect_node(cl, n->host, n->port, timeout_ms, &e);
        int loaded = c != NULL && hook(c, &e) == LLMQ_OK;
        if (c != NULL)
            redisFree(c);
        if (!loaded)
            continue;
        __atomic_add_fetch(&counts.library_loads, 1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&cl->lock);
        if (cl->n_loaded < LLMQ_CLUSTER_NODES_MAX)
            cl->loaded[cl->n_loaded++] = *n;
        pthread_mutex_unlock(&cl->lock);
    }
}

/* Fetches a new map from the known primaries, then the seeds. */
static enum llmq_rc fetch(struct llmq_cluster *cl, int timeout_ms, struct llmq_error *err)
{
    struct llmq_cluster_node ask[LLMQ_CLUSTER_NODES_MAX + LLMQ_CLUSTER_SEEDS_MAX];
    int n_ask = 0;
    pthread_mutex_lock(&cl->lock);
    for (int i = 0; cl->map != NULL && i < cl->map->n_nodes; i++)
        ask[n_ask++] = cl->map->nodes[i];
    pthread_mutex_unlock(&cl->lock);
    for (int i = 0; i < cl->url.n_seeds; i++) {
        snprintf(ask[n_ask].host, sizeof(ask[n_ask].host), "%s", cl->url.seeds[i].host);
        ask[n_ask++].port = cl->url.seeds[i].port;
    }
    struct llmq_cluster_map *map = malloc(sizeof(*map));
    if (map == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "redis cluster: out of memory");
    struct llmq_error last = {0};
    int ok = 0;
    for (int i = 0; i < n_ask && !ok; i++)
        ok = fetch_from(cl, ask[i].host, ask[i].port, timeout_ms, map, &last) == 0;
    if (!ok) {
        free(map);
        return llmq_error_set(err, LLMQ_EREDIS,
                              "redis cluster: no node answered CLUSTER SLOTS "
                              "(last: %s)",
                              last.msg[0] ? last.msg : "none asked");
    }
    __atomic_add_fetch(&counts.map_fetches, 1, __ATOMIC_RELAXED);
    hand_over_new_primaries(cl, map, timeout_ms);
    pthread_mutex_lock(&cl->lock);
    free(cl->map);
    cl->map = map;
    cl->stale = 0;
    cl->fetched_ms = monotonic_ms();
    pthread_mutex_unlock(&cl->lock);
    return LLMQ_OK;
}

int llmq_cluster_owner(struct llmq_cluster *cl, int slot, char *host, size_t n, int *port)
{
    int rc = -1;
    pthread_mutex_lock(&cl->lock);
    if (cl->map != NULL && cl->map->n_nodes > 0) {
        int idx = slot >= 0 && slot < LLMQ_CLUSTER_SLOTS ? cl->map->owner[slot] : 0;
        if (idx >= 0) {
            snprintf(host, n, "%s", cl->map->nodes[idx].host);
            *port = cl->map->nodes[idx].port;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&cl->lock);
    return rc;
}

int llmq_cluster_primaries(struct llmq_cluster *cl, struct llmq_cluster_node *out, int max)
{
    int n = 0;
    pthread_mutex_lock(&cl->lock);
    for (int i = 0; cl->map != NULL && i < cl->map->n_nodes && n < max; i++)
        out[n++] = cl->map->nodes[i];
    pthread_mutex_unlock(&cl->lock);
    return n;
}

enum llmq_rc llmq_cluster_resolve(struct llmq_redis_url *u, int refresh, int timeout_ms,
                                  struct llmq_error *err)
{
    if (u->n_seeds == 0)
        return LLMQ_OK;
    struct llmq_cluster *cl = llmq_cluster_of(u);
    if (cl == NULL)
        return llmq_error_set(err, LLMQ_EREDIS,
                              "redis cluster: more than %d clusters in one process",
                              LLMQ_CLUSTERS_MAX);
    pthread_mutex_lock(&cl->lock);
    int need = cl->map == NULL || cl->stale || (refresh && monotonic_ms() - cl->fetched_ms >= 100);
    pthread_mutex_unlock(&cl->lock);
    if (need) {
        enum llmq_rc rc = fetch(cl, timeout_ms, err);
        if (rc != LLMQ_OK)
            return rc;
    }
    if (llmq_cluster_owner(cl, u->route_slot, u->host, sizeof(u->host), &u->port) != 0) {
        llmq_cluster_invalidate(cl);
        return llmq_error_set(err, LLMQ_EREDIS,
                              "redis cluster: no primary serves slot %d (CLUSTERDOWN)",
                              u->route_slot);
    }
    return LLMQ_OK;
}

void llmq_cluster_note_moved(struct llmq_cluster *cl, const struct llmq_cluster_redirect *redirect,
                             const char *from_host, char *host, size_t n, int *port)
{
    snprintf(host, n, "%s", redirect->host[0] ? redirect->host : from_host);
    *port = redirect->port;
    pthread_mutex_lock(&cl->lock);
    if (cl->map != NULL) {
        int idx = llmq_cluster_map_node(cl->map, host, *port);
        if (idx >= 0 && redirect->slot >= 0 && redirect->slot < LLMQ_CLUSTER_SLOTS)
            cl->map->owner[redirect->slot] = (int16_t)idx;
        else
            cl->stale = 1;
    }
    pthread_mutex_unlock(&cl->lock);
}

void llmq_cluster_invalidate(struct llmq_cluster *cl)
{
    if (cl == NULL)
        return;
    pthread_mutex_lock(&cl->lock);
    cl->stale = 1;
    pthread_mutex_unlock(&cl->lock);
}

/* The reader's privdata is free for its user in hiredis 0.14 (the default
 * reply functions ignore it) and lives as long as the context. */
void llmq_cluster_attach(redisContext *c, struct llmq_cluster *cl)
{
    if (c != NULL && c->reader != NULL)
        c->reader->privdata = cl;
}

struct llmq_cluster *llmq_cluster_of_context(const redisContext *c)
{
    if (c == NULL || c->reader == NULL)
        return NULL;
    struct llmq_cluster *cl = c->reader->privdata;
    /* Only a pointer from the registry is one of ours. */
    int known = 0;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_registry && !known; i++)
        known = registry[i] == cl;
    pthread_mutex_unlock(&registry_lock);
    return known ? cl : NULL;
}

int llmq_cluster_retry_delay_ms(int tries)
{
    int d = 10;
    for (int i = 1; i < tries && d < 250; i++)
        d *= 2;
    return d < 250 ? d : 250;
}

void llmq_cluster_counts(struct llmq_cluster_counts *out)
{
    out->moved = __atomic_load_n(&counts.moved, __ATOMIC_RELAXED);
    out->ask = __atomic_load_n(&counts.ask, __ATOMIC_RELAXED);
    out->retried = __atomic_load_n(&counts.retried, __ATOMIC_RELAXED);
    out->map_fetches = __atomic_load_n(&counts.map_fetches, __ATOMIC_RELAXED);
    out->library_loads = __atomic_load_n(&counts.library_loads, __ATOMIC_RELAXED);
}

void llmq_cluster_count_moved(void)
{
    __atomic_add_fetch(&counts.moved, 1, __ATOMIC_RELAXED);
}

void llmq_cluster_count_ask(void)
{
    __atomic_add_fetch(&counts.ask, 1, __ATOMIC_RELAXED);
}

void llmq_cluster_count_retry(void)
{
    __atomic_add_fetch(&counts.retried, 1, __ATOMIC_RELAXED);
}
