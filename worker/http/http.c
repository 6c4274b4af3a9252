/* The worker's HTTP client: one curl multi handle on a caller's libev loop.
 *
 * curl tells us which sockets to watch (multi_sock_cb → one ev_io per socket,
 * allocated on first sight and freed on CURL_POLL_REMOVE) and when to call
 * it back (multi_timer_cb → the one ev_timer). Our watchers call
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

/* One socket curl asked us to watch. */
struct llmq_http_sock {
    ev_io io;
    struct llmq_http *http;
    curl_socket_t fd;
    struct llmq_http_sock *prev, *next;
};

struct llmq_http {
    struct ev_loop *loop;
    CURLM *multi;
    ev_timer timer;
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

/* ---- completion ---- */

/* Moves every transfer curl reports finished from active to the done queue. */
static void collect_finished(struct llmq_http *http)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(http->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode result = msg->data.result;
        struct llmq_http_xfer *x = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
        curl_multi_remove_handle(http->multi, easy); /* msg is invalid from here */
        if (x == NULL)
            continue;
        x->result = result;
        active_unlink(http, x);
        done_push(http, x);
    }
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
    struct llmq_http *http = s->http;
    curl_socket_t fd = s->fd;
    int action = 0;
    if (revents & EV_READ)
        action |= CURL_CSELECT_IN;
    if (revents & EV_WRITE)
        action |= CURL_CSELECT_OUT;
    if (revents & EV_ERROR)
        action |= CURL_CSELECT_ERR;
    int running;
    curl_multi_socket_action(http->multi, fd, action, &running);
    /* s may be freed now (CURL_POLL_REMOVE): use only http. */
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
    struct llmq_http *http = CONTAINER_OF(w, struct llmq_http, timer);
    int running;
    curl_multi_socket_action(http->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    long next_ms = -1;
    if (!ev_is_active(&http->timer) && curl_multi_timeout(http->multi, &next_ms) == CURLM_OK &&
        next_ms >= 0) {
        /* Fired before curl's deadline (ev_now lags the clock): curl will not
         * report the unchanged deadline again, so re-arm it ourselves. */
        ev_timer_set(&http->timer, next_ms > 0 ? next_ms / 1000.0 : 0.001, 0.);
        ev_timer_start(http->loop, &http->timer);
    }
    after_action(http);
}

/* ---- curl → libev ---- */

static int multi_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    struct llmq_http *http = userp;
    ev_timer_stop(http->loop, &http->timer);
    if (timeout_ms >= 0) {
        ev_timer_set(&http->timer, timeout_ms / 1000.0, 0.);
        ev_timer_start(http->loop, &http->timer);
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
    struct llmq_http *http = userp;
    struct llmq_http_sock *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            curl_multi_assign(http->multi, fd, NULL);
            sock_release(http, s);
        }
        return 0;
    }
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return -1; /* curl fails the transfer */
        s->http = http;
        s->fd = fd;
        s->next = http->socks;
        if (http->socks)
            http->socks->prev = s;
        http->socks = s;
        ev_init(&s->io, io_cb);
        curl_multi_assign(http->multi, fd, s);
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
    s->max_host_connections =
        cfg->max_host_connections > 0 ? cfg->max_host_connections : s->max_connections;
    s->max_streams = cfg->max_streams > 0 ? cfg->max_streams : DEFAULT_MAX_STREAMS;
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

static int set_multi_options(struct llmq_http *http)
{
    CURLM *m = http->multi;
    const struct llmq_http_settings *s = &http->s;
    CURLMcode rc = CURLM_OK;
    rc |= curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, multi_sock_cb);
    rc |= curl_multi_setopt(m, CURLMOPT_SOCKETDATA, http);
    rc |= curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, multi_timer_cb);
    rc |= curl_multi_setopt(m, CURLMOPT_TIMERDATA, http);
    rc |= curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    rc |= curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)s->max_connections);
    rc |= curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)s->max_host_connections);
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
    ev_init(&http->timer, timer_cb);
    ev_timer_init(&http->deliver_soon, deliver_soon_cb, 0., 0.);
    http->multi = curl_multi_init();
    if (http->multi == NULL || set_multi_options(http) != 0) {
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
    if (req->xfer_out != NULL)
        *req->xfer_out = x;
    CURLMcode mc = curl_multi_add_handle(http->multi, x->easy);
    if (mc != CURLM_OK) {
        llmq_http_xfer_free(x);
        return llmq_error_set(err, LLMQ_EHTTP, "http: curl_multi_add_handle: %s",
                              curl_multi_strerror(mc));
    }
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
    curl_multi_remove_handle(http->multi, x->easy);
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
        curl_multi_remove_handle(http->multi, x->easy);
        x->cancelled = 1;
        done_push(http, x);
    }
    while ((x = done_pop(http)) != NULL)
        deliver_one(http, x);
    if (http->multi != NULL)
        curl_multi_cleanup(http->multi); /* closes connections; may call multi_sock_cb */
    http->multi = NULL;
    while (http->socks != NULL)
        sock_release(http, http->socks);
    ev_timer_stop(http->loop, &http->timer);
    ev_timer_stop(http->loop, &http->deliver_soon);
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
