/* The worker's HTTP client: two curl multi handles (pools) on a caller's
 * libev loop.
 *
 * Pools: curl caps connections per host with one number for the whole multi
 * handle (CURLMOPT_MAX_HOST_CONNECTIONS), but an origin that multiplexes (h2
 * over TLS) needs a few connections and one that speaks HTTP/1.1 needs one
 * per call in flight. So each kind has its own multi: the per-request pool
 * (HTTP/1.1: up to max_connections per origin) and the multiplexed pool (h2
 * preferred over TLS: h2_host_connections per origin, max_streams each). A
 * transfer goes by what its origin (scheme, host, port) is known to speak:
 * cleartext http:// and LLMQ_HTTP_1_1 to the per-request pool, https:// to
 * the multiplexed one until an answer shows the origin negotiated HTTP/1.1;
 * from then on its transfers go to the per-request pool, and those still
 * waiting for a connection in the multiplexed one move there (a transfer
 * whose connection was ready — the pre-request callback ran — stays).
 * A transfer submitted while its origin's connections in its pool are all
 * taken is marked pool_full: if its grant goes stale, the client's own
 * sizing held it (the worker reports that as a bug, worker/call.c).
 *
 * Per pool, curl tells us which sockets to watch (multi_sock_cb → one ev_io
 * per socket, allocated on first sight and freed on CURL_POLL_REMOVE) and
 * when to call it back (multi_timer_cb → the pool's ev_timer). Our watchers call
 * curl_multi_socket_action, then after_action(): drain curl_multi_info_read,
 * move finished transfers from the active list to the done queue (removing
 * their easy handles — outside curl's callbacks), and deliver the done queue
 * to the users' callbacks. A callback therefore never runs inside curl, and
 * may submit new transfers.
 *
 * Invariants:
 *   - every submitted transfer is in exactly one of `active` (in the multi)
 *     or the done queue (out of the multi) until its callback starts;
 *     `inflight` counts both;
 *   - a socket watcher is never touched after curl_multi_socket_action: the
 *     watcher callbacks copy what they need first;
 *   - curl deadlines are armed as timeout_ms / 1000.0 seconds, and after every
 *     timeout action the timer is re-armed from curl_multi_timeout if curl did
 *     not re-arm it (curl does not report an unchanged deadline again);
 *   - free: cancel (remove + deliver CANCELLED) everything, then
 *     curl_multi_cleanup while the loop lives, then stop and free watchers. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "http/http.h"
#include "http/http_xfer.h"

#define DEFAULT_MAX_CONNECTIONS 256
#define DEFAULT_MAX_STREAMS 100
#define DEFAULT_CONNECT_TIMEOUT_MS 10000L
#define DEFAULT_TIMEOUT_MS 600000L
#define DEFAULT_MAX_BODY_BYTES ((size_t)16 << 20)
#define DEFAULT_BUFFER_BYTES 16384L
#define MIN_BUFFER_BYTES 1024L
#ifdef LLMQ_VERSION
#define DEFAULT_USER_AGENT "llmq/" LLMQ_VERSION
#else
#define DEFAULT_USER_AGENT "llmq"
#endif

#define CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#define ORIGIN_MAX 300 /* "scheme://host:port" kept per origin; longer ones are cut */

/* One socket curl asked us to watch. */
struct llmq_http_sock {
    ev_io io;
    struct llmq_http_pool *pool;
    curl_socket_t fd;
    struct llmq_http_sock *prev, *next;
};

enum { POOL_MUX = 0, POOL_PER_REQUEST = 1, POOL_COUNT = 2 };

/* One curl multi handle and its timer: the connections of one kind. */
struct llmq_http_pool {
    struct llmq_http *http;
    CURLM *multi;
    ev_timer timer;
    int host_connections; /* CURLMOPT_MAX_HOST_CONNECTIONS */
    int per_connection;   /* transfers one connection carries at once */
};

/* What the client knows of one origin: the pool its transfers go to. */
struct llmq_http_origin {
    struct llmq_http_origin *next;
    int per_request; /* it speaks HTTP/1.1 (cleartext, LLMQ_HTTP_1_1, or it answered 1.1) */
    int move;        /* just learned: move its waiting transfers (collect_finished) */
    size_t inflight; /* its transfers in a multi */
    char name[ORIGIN_MAX + 1];
};

struct llmq_http {
    struct ev_loop *loop;
    struct llmq_http_pool pools[POOL_COUNT];
    struct llmq_http_origin *origins;
    struct llmq_http_settings s;
    struct llmq_http_xfer *active;                /* in the multi */
    struct llmq_http_xfer *done_head, *done_tail; /* out of the multi, to deliver */
    struct llmq_http_sock *socks;
    ev_timer deliver_soon; /* delivers aborted transfers from the loop */
    size_t inflight;
    int delivering;   /* inside deliver(): a free is deferred */
    int free_pending; /* llmq_http_free was called from a callback */
    int closing;      /* free has started: submit refuses */
};

static const char *const outcome_names[] = {
    [LLMQ_HTTP_OK] = "ok",
    [LLMQ_HTTP_TIMEOUT] = "timeout",
    [LLMQ_HTTP_CONNECT_ERROR] = "connect_error",
    [LLMQ_HTTP_TLS_ERROR] = "tls_error",
    [LLMQ_HTTP_RESET] = "reset",
    [LLMQ_HTTP_TOO_BIG] = "too_big",
    [LLMQ_HTTP_PROTOCOL_ERROR] = "protocol_error",
    [LLMQ_HTTP_CANCELLED] = "cancelled",
    [LLMQ_HTTP_STALE] = "stale",
    [LLMQ_HTTP_OTHER] = "other",
};

const char *llmq_http_outcome_name(enum llmq_http_outcome outcome)
{
    if ((int)outcome < 0 || (size_t)outcome >= sizeof(outcome_names) / sizeof(outcome_names[0]))
        return "unknown";
    return outcome_names[outcome];
}

char *llmq_http_response_take_body(struct llmq_http_response *resp, size_t *len)
{
    static char empty[1];
    if (len != NULL)
        *len = 0;
    if (resp == NULL || resp->body_len == 0)
        return NULL;
    if (len != NULL)
        *len = resp->body_len;
    /* The body buffer is the transfer's own malloc'd buffer: hand it over.
     * deliver() notices resp->body changed and does not free it. */
    char *b = resp->body;
    resp->body = empty;
    resp->body_len = 0;
    return b;
}

static void do_free(struct llmq_http *http);

/* ---- lists ---- */

static void active_link(struct llmq_http *http, struct llmq_http_xfer *x)
{
    x->prev = NULL;
    x->next = http->active;
    if (http->active)
        http->active->prev = x;
    http->active = x;
}

static void active_unlink(struct llmq_http *http, struct llmq_http_xfer *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        http->active = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
}

static void done_push(struct llmq_http *http, struct llmq_http_xfer *x)
{
    x->next = NULL;
    x->prev = http->done_tail;
    if (http->done_tail)
        http->done_tail->next = x;
    else
        http->done_head = x;
    http->done_tail = x;
}

static struct llmq_http_xfer *done_pop(struct llmq_http *http)
{
    struct llmq_http_xfer *x = http->done_head;
    if (x == NULL)
        return NULL;
    http->done_head = x->next;
    if (http->done_head == NULL)
        http->done_tail = NULL;
    x->next = NULL;
    return x;
}

/* ---- origins and pools ---- */

/* The origin of url ("scheme://authority", lower-cased, cut at ORIGIN_MAX)
 * into out. */
static void origin_name(const char *url, char *out)
{
    const char *p = strstr(url, "://");
    size_t end = p != NULL ? (size_t)(p - url) + 3 + strcspn(p + 3, "/?#") : strlen(url);
    size_t n = end < ORIGIN_MAX ? end : ORIGIN_MAX;
    for (size_t i = 0; i < n; i++)
        out[i] = (url[i] >= 'A' && url[i] <= 'Z') ? (char)(url[i] - 'A' + 'a') : url[i];
    out[n] = '\0';
}

/* The origin of url, made on first sight (NULL when out of memory). A new
 * one goes to the per-request pool when it is cleartext or the client
 * speaks only HTTP/1.1. */
static struct llmq_http_origin *origin_of(struct llmq_http *http, const char *url)
{
    char name[ORIGIN_MAX + 1];
    origin_name(url, name);
    for (struct llmq_http_origin *o = http->origins; o != NULL; o = o->next)
        if (strcmp(o->name, name) == 0)
            return o;
    struct llmq_http_origin *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return NULL;
    memcpy(o->name, name, strlen(name) + 1);
    o->per_request = http->s.version == LLMQ_HTTP_1_1 || strncmp(name, "https://", 8) != 0;
    o->next = http->origins;
    http->origins = o;
    return o;
}

static struct llmq_http_pool *pool_for(struct llmq_http *http, const struct llmq_http_origin *o)
{
    return &http->pools[o->per_request ? POOL_PER_REQUEST : POOL_MUX];
}

/* Adds x to pool p for its origin, noting whether the origin's connections
 * there were all taken. Returns curl's code. */
static CURLMcode pool_add(struct llmq_http_pool *p, struct llmq_http_xfer *x)
{
    struct llmq_http_origin *o = x->origin;
    size_t room = (size_t)p->host_connections * (size_t)p->per_connection;
    x->pool = p;
    x->pool_connections = p->host_connections;
    x->pool_ahead = o->inflight;
    x->pool_full = o->inflight >= room;
    CURLMcode mc = curl_multi_add_handle(p->multi, x->easy);
    if (mc == CURLM_OK)
        o->inflight++;
    return mc;
}

/* Takes x out of its multi (it is done, aborted or cancelled). */
static void pool_remove(struct llmq_http_xfer *x)
{
    curl_multi_remove_handle(x->pool->multi, x->easy);
    x->origin->inflight--;
}

/* Origin o answered x with HTTP/1.1 from the multiplexed pool: from now on
 * its transfers use the per-request pool. */
static void origin_learn(struct llmq_http *http, struct llmq_http_origin *o)
{
    if (o->per_request)
        return;
    o->per_request = 1;
    o->move = 1;
    LLMQ_LOG(LLMQ_LOG_INFO,
             "http: %s negotiated HTTP/1.1, not HTTP/2: its calls use up to %d connections "
             "(one per call) instead of %d multiplexed",
             o->name, http->pools[POOL_PER_REQUEST].host_connections,
             http->pools[POOL_MUX].host_connections);
}

static void fail_now(struct llmq_http *http, struct llmq_http_xfer *x);

/* Moves the transfers of every origin just learned to speak HTTP/1.1 that
 * still wait for a connection in the multiplexed pool (their pre-request
 * callback has not run: nothing was sent) to the per-request pool. Called
 * outside curl's callbacks, after curl_multi_info_read is drained. */
static void move_learned(struct llmq_http *http)
{
    int any = 0;
    for (struct llmq_http_origin *o = http->origins; o != NULL; o = o->next)
        any |= o->move;
    if (!any)
        return;
    struct llmq_http_pool *mux = &http->pools[POOL_MUX], *pr = &http->pools[POOL_PER_REQUEST];
    struct llmq_http_xfer *x = http->active, *next;
    for (; x != NULL; x = next) {
        next = x->next;
        if (!x->origin->move || x->pool != mux || x->prereq_seen)
            continue;
        /* It waited for a connection sized for multiplexing: what held it
         * is the multiplexed pool as it was when it was submitted. */
        int held_connections = x->pool_connections;
        size_t held_ahead = x->pool_ahead;
        pool_remove(x);
        if (llmq_http_xfer_use_pool(x, &http->s, 1) != 0 || pool_add(pr, x) != CURLM_OK) {
            fail_now(http, x);
            continue;
        }
        x->pool_full = 1;
        x->pool_connections = held_connections;
        x->pool_ahead = held_ahead;
    }
    for (struct llmq_http_origin *o = http->origins; o != NULL; o = o->next)
        o->move = 0;
}

/* ---- completion ---- */

/* Ends x, already out of its multi, with a failure of ours (curl refused to
 * take it into a pool): it is delivered as an error from the loop. */
static void fail_now(struct llmq_http *http, struct llmq_http_xfer *x)
{
    x->result = CURLE_OUT_OF_MEMORY;
    active_unlink(http, x);
    done_push(http, x);
    ev_timer_start(http->loop, &http->deliver_soon);
}

/* Moves every transfer curl reports finished from active to the done queue,
 * learning which origins answered HTTP/1.1 from the multiplexed pool. */
static void collect_finished(struct llmq_http *http)
{
    for (int i = 0; i < POOL_COUNT; i++) {
        CURLM *multi = http->pools[i].multi;
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *easy = msg->easy_handle;
            CURLcode result = msg->data.result;
            struct llmq_http_xfer *x = NULL;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
            if (x == NULL) {
                curl_multi_remove_handle(multi, easy);
                continue;
            }
            pool_remove(x); /* msg is invalid from here */
            x->result = result;
            long v = 0;
            if (i == POOL_MUX && curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &v) == CURLE_OK &&
                (v == CURL_HTTP_VERSION_1_1 || v == CURL_HTTP_VERSION_1_0))
                origin_learn(http, x->origin);
            active_unlink(http, x);
            done_push(http, x);
        }
    }
    move_learned(http);
}

/* Runs the callback of one finished transfer and frees it. */
static void deliver_one(struct llmq_http *http, struct llmq_http_xfer *x)
{
    struct llmq_http_response resp;
    llmq_http_xfer_response(x, &resp, llmq_monotonic_ms());
    char *own_body = x->body;
    http->inflight--;
    x->cb(&resp, x->privdata);
    if (own_body != NULL && resp.body != own_body)
        x->body = NULL; /* taken by llmq_http_response_take_body */
    llmq_http_xfer_free(x);
}

/* Delivers the done queue. Returns 1 when http was freed (a callback called
 * llmq_http_free): the caller must not touch http then. */
static int deliver(struct llmq_http *http)
{
    struct llmq_http_xfer *x;
    http->delivering++;
    while (!http->free_pending && (x = done_pop(http)) != NULL)
        deliver_one(http, x);
    http->delivering--;
    if (http->free_pending && http->delivering == 0) {
        do_free(http);
        return 1;
    }
    return 0;
}

static void after_action(struct llmq_http *http)
{
    collect_finished(http);
    deliver(http);
}

/* ---- libev watchers → curl ---- */

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    struct llmq_http_sock *s = CONTAINER_OF(w, struct llmq_http_sock, io);
    struct llmq_http_pool *pool = s->pool;
    struct llmq_http *http = pool->http;
    curl_socket_t fd = s->fd;
    int action = 0;
    if (revents & EV_READ)
        action |= CURL_CSELECT_IN;
    if (revents & EV_WRITE)
        action |= CURL_CSELECT_OUT;
    if (revents & EV_ERROR)
        action |= CURL_CSELECT_ERR;
    int running;
    curl_multi_socket_action(pool->multi, fd, action, &running);
    /* s may be freed now (CURL_POLL_REMOVE): use only pool and http. */
    after_action(http);
}

static void deliver_soon_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_http *http = CONTAINER_OF(w, struct llmq_http, deliver_soon);
    deliver(http);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_http_pool *pool = CONTAINER_OF(w, struct llmq_http_pool, timer);
    struct llmq_http *http = pool->http;
    int running;
    curl_multi_socket_action(pool->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    long next_ms = -1;
    if (!ev_is_active(&pool->timer) && curl_multi_timeout(pool->multi, &next_ms) == CURLM_OK &&
        next_ms >= 0) {
        /* Fired before curl's deadline (ev_now lags the clock): curl will not
         * report the unchanged deadline again, so re-arm it ourselves. */
        ev_timer_set(&pool->timer, next_ms > 0 ? next_ms / 1000.0 : 0.001, 0.);
        ev_timer_start(http->loop, &pool->timer);
    }
    after_action(http);
}

/* ---- curl → libev ---- */

static int multi_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    struct llmq_http_pool *pool = userp;
    struct ev_loop *loop = pool->http->loop;
    ev_timer_stop(loop, &pool->timer);
    if (timeout_ms >= 0) {
        ev_timer_set(&pool->timer, timeout_ms / 1000.0, 0.);
        ev_timer_start(loop, &pool->timer);
    }
    return 0;
}

static void sock_release(struct llmq_http *http, struct llmq_http_sock *s)
{
    ev_io_stop(http->loop, &s->io);
    if (s->prev)
        s->prev->next = s->next;
    else
        http->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    free(s);
}

static int multi_sock_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)easy;
    struct llmq_http_pool *pool = userp;
    struct llmq_http *http = pool->http;
    struct llmq_http_sock *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            curl_multi_assign(pool->multi, fd, NULL);
            sock_release(http, s);
        }
        return 0;
    }
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return -1; /* curl fails the transfer */
        s->pool = pool;
        s->fd = fd;
        s->next = http->socks;
        if (http->socks)
            http->socks->prev = s;
        http->socks = s;
        ev_init(&s->io, io_cb);
        curl_multi_assign(pool->multi, fd, s);
    } else {
        ev_io_stop(http->loop, &s->io);
    }
    int events = 0;
    if (what & CURL_POLL_IN)
        events |= EV_READ;
    if (what & CURL_POLL_OUT)
        events |= EV_WRITE;
    ev_io_set(&s->io, fd, events);
    if (events != 0)
        ev_io_start(http->loop, &s->io);
    return 0;
}

/* ---- lifecycle ---- */

static char *dup_or_null(const char *s, int *failed)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *failed = 1;
    return d;
}

static int apply_settings(struct llmq_http_settings *s, const struct llmq_http_config *cfg)
{
    struct llmq_http_config zero;
    memset(&zero, 0, sizeof(zero));
    if (cfg == NULL)
        cfg = &zero;
    s->max_connections = cfg->max_connections > 0 ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS;
    s->max_streams = cfg->max_streams > 0 ? cfg->max_streams : DEFAULT_MAX_STREAMS;
    s->h2_host_connections = cfg->h2_host_connections > 0 ? cfg->h2_host_connections
                                                          : s->max_connections / s->max_streams + 2;
    s->connect_timeout_ms =
        cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
    s->version = cfg->version;
    s->max_body_bytes = cfg->max_body_bytes > 0 ? cfg->max_body_bytes : DEFAULT_MAX_BODY_BYTES;
    s->buffer_bytes = cfg->buffer_bytes > 0 ? cfg->buffer_bytes : DEFAULT_BUFFER_BYTES;
    if (s->buffer_bytes < MIN_BUFFER_BYTES)
        s->buffer_bytes = MIN_BUFFER_BYTES;
    if (s->buffer_bytes > CURL_MAX_READ_SIZE)
        s->buffer_bytes = CURL_MAX_READ_SIZE;
    int failed = 0;
    s->ca_file = dup_or_null(cfg->ca_file, &failed);
    s->user_agent = dup_or_null(cfg->user_agent ? cfg->user_agent : DEFAULT_USER_AGENT, &failed);
    return failed ? -1 : 0;
}

/* Makes pool i's multi handle: the multiplexed pool keeps
 * h2_host_connections per origin carrying max_streams each; the
 * per-request pool up to max_connections per origin, one call each. Both
 * keep at most max_connections in all. Returns 0, -1 when curl fails. */
static int pool_open(struct llmq_http *http, int i)
{
    struct llmq_http_pool *p = &http->pools[i];
    const struct llmq_http_settings *s = &http->s;
    int mux = i == POOL_MUX;
    p->http = http;
    p->host_connections = mux ? s->h2_host_connections : s->max_connections;
    p->per_connection = mux ? s->max_streams : 1;
    ev_init(&p->timer, timer_cb);
    p->multi = curl_multi_init();
    if (p->multi == NULL)
        return -1;
    CURLM *m = p->multi;
    CURLMcode rc = CURLM_OK;
    rc |= curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, multi_sock_cb);
    rc |= curl_multi_setopt(m, CURLMOPT_SOCKETDATA, p);
    rc |= curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, multi_timer_cb);
    rc |= curl_multi_setopt(m, CURLMOPT_TIMERDATA, p);
    rc |= curl_multi_setopt(m, CURLMOPT_PIPELINING,
                            mux ? (long)CURLPIPE_MULTIPLEX : (long)CURLPIPE_NOTHING);
    rc |= curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)s->max_connections);
    rc |= curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)p->host_connections);
    rc |= curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)s->max_connections);
    rc |= curl_multi_setopt(m, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)s->max_streams);
    return rc == CURLM_OK ? 0 : -1;
}

struct llmq_http *llmq_http_new(struct ev_loop *loop, const struct llmq_http_config *cfg,
                                struct llmq_error *err)
{
    if (loop == NULL) {
        llmq_error_set(err, LLMQ_EINVAL, "http: no event loop");
        return NULL;
    }
    struct llmq_http *http = calloc(1, sizeof(*http));
    if (http == NULL || apply_settings(&http->s, cfg) != 0) {
        if (http != NULL) {
            free(http->s.ca_file);
            free(http->s.user_agent);
            free(http);
        }
        llmq_error_set(err, LLMQ_ENOMEM, "http: out of memory");
        return NULL;
    }
    http->loop = loop;
    ev_timer_init(&http->deliver_soon, deliver_soon_cb, 0., 0.);
    if (pool_open(http, POOL_MUX) != 0 || pool_open(http, POOL_PER_REQUEST) != 0) {
        llmq_error_set(err, LLMQ_EHTTP, "http: cannot set up a curl multi handle");
        do_free(http);
        return NULL;
    }
    return http;
}

enum llmq_rc llmq_http_submit(struct llmq_http *http, const struct llmq_http_request *req,
                              llmq_http_done_cb *cb, void *privdata, struct llmq_error *err)
{
    if (http == NULL || cb == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "http: submit without client or callback");
    if (http->closing || http->free_pending)
        return llmq_error_set(err, LLMQ_ECLOSED, "http: client is closing");
    struct llmq_http_xfer *x;
    enum llmq_rc rc = llmq_http_xfer_new(&http->s, req, &x, err);
    if (rc != LLMQ_OK)
        return rc;
    x->http = http;
    x->cb = cb;
    x->privdata = privdata;
    x->origin = origin_of(http, req->url);
    if (x->origin == NULL) {
        llmq_http_xfer_free(x);
        return llmq_error_set(err, LLMQ_ENOMEM, "http: out of memory for an origin");
    }
    if (llmq_http_xfer_use_pool(x, &http->s, x->origin->per_request) != 0) {
        llmq_http_xfer_free(x);
        return llmq_error_set(err, LLMQ_EHTTP, "http: curl rejected the HTTP version");
    }
    CURLMcode mc = pool_add(pool_for(http, x->origin), x);
    if (mc != CURLM_OK) {
        llmq_http_xfer_free(x);
        return llmq_error_set(err, LLMQ_EHTTP, "http: curl_multi_add_handle: %s",
                              curl_multi_strerror(mc));
    }
    if (req->xfer_out != NULL)
        *req->xfer_out = x;
    active_link(http, x);
    http->inflight++;
    return LLMQ_OK;
}

void llmq_http_abort(struct llmq_http *http, struct llmq_http_xfer *x)
{
    if (http == NULL || x == NULL || http->closing)
        return;
    for (struct llmq_http_xfer *d = http->done_head; d != NULL; d = d->next)
        if (d == x)
            return; /* finished already: its callback is on its way */
    active_unlink(http, x);
    pool_remove(x);
    x->aborted = 1;
    done_push(http, x);
    ev_timer_start(http->loop, &http->deliver_soon);
}

size_t llmq_http_inflight(const struct llmq_http *http)
{
    return http ? http->inflight : 0;
}

/* Cancels and delivers everything, then tears curl and the watchers down. */
static void do_free(struct llmq_http *http)
{
    http->closing = 1;
    http->free_pending = 0;
    http->delivering++; /* a callback calling llmq_http_free now is a no-op */
    struct llmq_http_xfer *x;
    while ((x = http->active) != NULL) {
        active_unlink(http, x);
        pool_remove(x);
        x->cancelled = 1;
        done_push(http, x);
    }
    while ((x = done_pop(http)) != NULL)
        deliver_one(http, x);
    for (int i = 0; i < POOL_COUNT; i++) {
        struct llmq_http_pool *p = &http->pools[i];
        if (p->multi != NULL)
            curl_multi_cleanup(p->multi); /* closes connections; may call multi_sock_cb */
        p->multi = NULL;
    }
    while (http->socks != NULL)
        sock_release(http, http->socks);
    for (int i = 0; i < POOL_COUNT; i++)
        ev_timer_stop(http->loop, &http->pools[i].timer);
    ev_timer_stop(http->loop, &http->deliver_soon);
    while (http->origins != NULL) {
        struct llmq_http_origin *o = http->origins;
        http->origins = o->next;
        free(o);
    }
    free(http->s.ca_file);
    free(http->s.user_agent);
    free(http);
}

void llmq_http_free(struct llmq_http *http)
{
    if (http == NULL || http->closing)
        return;
    if (http->delivering > 0) {
        http->free_pending = 1; /* deliver() completes it after the callback */
        return;
    }
    do_free(http);
}
