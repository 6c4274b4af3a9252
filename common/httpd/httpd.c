/* libmicrohttpd on a libev loop; see httpd.h for how MHD is run. */
#include "httpd/httpd.h"

#include <arpa/inet.h>
#include <ev.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/log.h"

/* A connection (MHD's socket context): while it waits for a request head it
 * is in its server's pending list, oldest first, with a deadline. */
struct conn_slot {
    struct llmq_httpd *h;
    int fd;
    int pending, closing;
    ev_timer deadline;
    struct conn_slot *prev, *next;
};

struct llmq_httpd {
    struct ev_loop *loop;
    struct MHD_Daemon *daemon;
    ev_io io;       /* MHD's epoll fd */
    ev_timer timer; /* MHD's next timeout */
    ev_timer kick;  /* 0 s: run MHD after a resume */
    char log_name[32];
    unsigned int head_timeout_ms, idle_timeout_s, max_pending;
    struct conn_slot *pending, *pending_tail; /* waiting for a head, oldest first */
    unsigned int n_pending;
    unsigned long long head_timeouts, pending_evicted;
    MHD_AccessHandlerCallback on_request; /* the caller's */
    void *request_cls;
    MHD_RequestCompletedCallback on_completed;
    void *completed_cls;
};

/* ---- slow clients: the head deadline and the pending bound ---- */

static void pending_remove(struct conn_slot *c)
{
    struct llmq_httpd *h = c->h;
    ev_timer_stop(h->loop, &c->deadline);
    if (!c->pending)
        return;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        h->pending = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        h->pending_tail = c->prev;
    c->prev = c->next = NULL;
    c->pending = 0;
    h->n_pending--;
}

/* Shuts c's socket down: MHD reads its end and closes the connection. */
static void slot_close(struct conn_slot *c)
{
    pending_remove(c);
    if (!c->closing && c->fd >= 0)
        (void)shutdown(c->fd, SHUT_RDWR);
    c->closing = 1;
}

static void on_deadline(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct conn_slot *c = t->data;
    c->h->head_timeouts++;
    slot_close(c);
}

/* c waits for a request head from now, for at most timeout_s (0: no
 * deadline); beyond max_pending the oldest waiting connection is closed. */
static void pending_add(struct conn_slot *c, double timeout_s)
{
    struct llmq_httpd *h = c->h;
    if (c->pending || c->closing)
        return;
    c->pending = 1;
    c->prev = h->pending_tail;
    c->next = NULL;
    if (h->pending_tail != NULL)
        h->pending_tail->next = c;
    else
        h->pending = c;
    h->pending_tail = c;
    h->n_pending++;
    if (timeout_s > 0) {
        ev_timer_set(&c->deadline, timeout_s, 0.);
        ev_timer_start(h->loop, &c->deadline);
    }
    if (h->max_pending > 0 && h->n_pending > h->max_pending) {
        h->pending_evicted++;
        slot_close(h->pending);
    }
}

static struct conn_slot *slot_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct llmq_httpd *h = cls;
    struct conn_slot *c = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        if ((c = calloc(1, sizeof(*c))) == NULL)
            return; /* no deadline for this one */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->h = h;
        c->fd = ci != NULL ? ci->connect_fd : -1;
        ev_init(&c->deadline, on_deadline);
        c->deadline.data = c;
        *socket_context = c;
        pending_add(c, h->head_timeout_ms / 1000.0);
    } else if (c != NULL) {
        pending_remove(c);
        free(c);
        *socket_context = NULL;
    }
}

/* MHD's access handler: the head is whole; then the caller's. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct llmq_httpd *h = cls;
    struct conn_slot *c = *con_cls == NULL ? slot_of(conn) : NULL;
    if (c != NULL)
        pending_remove(c);
    return h->on_request(h->request_cls, conn, url, method, version, upload_data, upload_data_size,
                         con_cls);
}

/* A request ended: the caller's callback; a kept-alive connection then
 * waits for its next head (MHD closes the others right after). */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct llmq_httpd *h = cls;
    if (h->on_completed != NULL)
        h->on_completed(h->completed_cls, conn, con_cls, toe);
    struct conn_slot *c = slot_of(conn);
    if (c != NULL && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && h->head_timeout_ms > 0)
        pending_add(c, (double)h->idle_timeout_s);
}

void llmq_httpd_close(struct MHD_Connection *conn)
{
    struct conn_slot *c = slot_of(conn);
    if (c != NULL) {
        slot_close(c);
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL)
        (void)shutdown(ci->connect_fd, SHUT_RDWR);
}

void llmq_httpd_slow_counts(const struct llmq_httpd *h, unsigned long long *head_timeouts,
                            unsigned long long *pending_evicted)
{
    *head_timeouts = h != NULL ? h->head_timeouts : 0;
    *pending_evicted = h != NULL ? h->pending_evicted : 0;
}

/* Runs MHD's pending work and re-arms the timer for its next timeout. */
static void httpd_run(struct llmq_httpd *h)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    MHD_run(h->daemon);
    ev_timer_stop(h->loop, &h->timer);
    if (MHD_get_timeout(h->daemon, &ms) == MHD_YES) {
        ev_timer_set(&h->timer, ms / 1000.0, 0.0);
        ev_timer_start(h->loop, &h->timer);
    }
}

static void on_io(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    (void)revents;
    httpd_run(io->data);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    httpd_run(t->data);
}

/* MHD's error messages go to our log, so JSON logs stay one object a line. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    const struct llmq_httpd *h = cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    msg[strcspn(msg, "\r\n")] = '\0';
    LLMQ_LOG(LLMQ_LOG_WARN, "%s: %s", h->log_name, msg);
}

/* Parses host into *ss; returns its length, or 0 when it is no numeric address. */
static socklen_t parse_addr(const char *host, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        return sizeof(*v4);
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        return sizeof(*v6);
    }
    return 0;
}

struct llmq_httpd *llmq_httpd_start(struct ev_loop *loop, const struct llmq_httpd_config *cfg,
                                    int *bound, struct llmq_error *err)
{
    struct sockaddr_storage ss;
    int min_port = cfg->allow_any_port ? 0 : 1;
    if (cfg->port < min_port || cfg->port > 65535 || parse_addr(cfg->host, cfg->port, &ss) == 0) {
        llmq_error_set(err, LLMQ_EINVAL,
                       "bad listen address %s:%d (a numeric IPv4 or IPv6 address and a port "
                       "%d..65535)",
                       cfg->host, cfg->port, min_port);
        return NULL;
    }
    struct llmq_httpd *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
        return NULL;
    }
    h->loop = loop;
    h->head_timeout_ms = cfg->head_timeout_ms;
    h->idle_timeout_s = cfg->idle_timeout_s;
    h->max_pending = cfg->max_pending_heads;
    h->on_request = cfg->on_request;
    h->request_cls = cfg->request_cls;
    h->on_completed = cfg->on_completed;
    h->completed_cls = cfg->completed_cls;
    snprintf(h->log_name, sizeof(h->log_name), "%s", cfg->log_name ? cfg->log_name : "http");
    unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (cfg->suspend_resume)
        flags |= MHD_ALLOW_SUSPEND_RESUME;
    if (cfg->tls)
        flags |= MHD_USE_TLS;
    static const struct MHD_OptionItem none[] = {{MHD_OPTION_END, 0, NULL}};
    h->daemon = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
        cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, cfg->idle_timeout_s,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->per_ip_limit, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_ARRAY,
        cfg->options ? cfg->options : none, MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        h->daemon ? MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (info == NULL) {
        llmq_error_set(err, LLMQ_EIO, "cannot listen on %s:%d (port in use%s?)", cfg->host,
                       cfg->port, cfg->tls ? ", or a bad certificate or key" : "");
        llmq_httpd_free(h);
        return NULL;
    }
    if (bound != NULL) {
        const union MHD_DaemonInfo *pi = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
        *bound = pi ? (int)pi->port : cfg->port;
    }
    ev_io_init(&h->io, on_io, info->epoll_fd, EV_READ);
    h->io.data = h;
    ev_io_start(loop, &h->io);
    ev_timer_init(&h->timer, on_timer, 0.0, 0.0);
    h->timer.data = h;
    ev_timer_init(&h->kick, on_timer, 0.0, 0.0);
    h->kick.data = h;
    httpd_run(h);
    return h;
}

void llmq_httpd_resume(struct llmq_httpd *h, struct MHD_Connection *conn)
{
    MHD_resume_connection(conn);
    ev_timer_start(h->loop, &h->kick);
}

void llmq_httpd_free(struct llmq_httpd *h)
{
    if (h == NULL)
        return;
    if (h->daemon != NULL) {
        ev_io_stop(h->loop, &h->io);
        ev_timer_stop(h->loop, &h->timer);
        ev_timer_stop(h->loop, &h->kick);
        MHD_stop_daemon(h->daemon);
    }
    free(h);
}
