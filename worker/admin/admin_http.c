/* The admin HTTP endpoint on libmicrohttpd, driven by the worker's libev loop;
 * see admin_http.h.
 *
 * How MHD runs here: the daemon is started without MHD_USE_INTERNAL_POLLING_
 * THREAD (so MHD makes no thread) and with MHD_USE_EPOLL, so all its sockets
 * sit in one epoll fd that becomes readable when any of them is ready. One
 * ev_io watches that fd; after every MHD_run (never blocking) we re-arm one
 * ev_timer to MHD_get_timeout, which is 0 when MHD has work pending without a
 * socket event (edge-triggered epoll) and covers idle-connection timeouts.
 * Connections are bounded in number and idle time, so a misbehaving scraper
 * cannot hold resources for long. */
#include "admin/admin_http.h"

#include <arpa/inet.h>
#include <ev.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define ADMIN_MAX_CONNECTIONS 32
#define ADMIN_IDLE_TIMEOUT_S 10
#define PROMETHEUS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct llmq_admin_http {
    struct ev_loop *loop;
    struct MHD_Daemon *daemon;
    struct llmq_admin_http_handlers handlers;
    ev_io io;       /* MHD's epoll fd */
    ev_timer timer; /* MHD's next timeout */
};

/* Runs MHD's pending work and re-arms the timer for its next timeout. */
static void admin_run(struct llmq_admin_http *ah)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    MHD_run(ah->daemon);
    ev_timer_stop(ah->loop, &ah->timer);
    if (MHD_get_timeout(ah->daemon, &ms) == MHD_YES) {
        ev_timer_set(&ah->timer, ms / 1000.0, 0.0);
        ev_timer_start(ah->loop, &ah->timer);
    }
}

static void on_io(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    (void)revents;
    admin_run(io->data);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    admin_run(t->data);
}

/* MHD's error messages go to our log, so JSON logs stay one object a line. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    msg[strcspn(msg, "\r\n")] = '\0';
    LLMQ_LOG(LLMQ_LOG_WARN, "admin http: %s", msg);
}

/* Queues a response; body is taken when must_free, else static. */
static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status, char *body,
                             size_t len, int must_free, const char *content_type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        if (must_free)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned int status,
                                  const char *text)
{
    return reply(conn, status, (char *)text, strlen(text), 0, "text/plain; charset=utf-8");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)con_cls;
    struct llmq_admin_http *ah = cls;
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* ignore a body; the reply below was already chosen */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if (strcmp(url, "/healthz") == 0)
        return reply_text(conn, MHD_HTTP_OK, "ok\n");
    if (strcmp(url, "/readyz") == 0) {
        char reason[256] = "";
        if (ah->handlers.ready(ah->handlers.privdata, reason, sizeof(reason) - 1))
            return reply_text(conn, MHD_HTTP_OK, "ready\n");
        char *body = malloc(sizeof(reason) + 1);
        if (body == NULL)
            return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "not ready\n");
        int n = snprintf(body, sizeof(reason) + 1, "%s\n", reason[0] ? reason : "not ready");
        return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, body, (size_t)n, 1,
                     "text/plain; charset=utf-8");
    }
    if (strcmp(url, "/metrics") == 0) {
        size_t len = 0;
        char *text = ah->handlers.metrics(ah->handlers.privdata, &len);
        if (text == NULL)
            return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
        return reply(conn, MHD_HTTP_OK, text, len, 1, PROMETHEUS_CONTENT_TYPE);
    }
    return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics, /healthz, /readyz\n");
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

struct llmq_admin_http *llmq_admin_http_start(struct ev_loop *loop, const char *host, int port,
                                              const struct llmq_admin_http_handlers *handlers,
                                              struct llmq_error *err)
{
    struct sockaddr_storage ss;
    if (port < 1 || port > 65535 || parse_addr(host, port, &ss) == 0) {
        llmq_error_set(err, LLMQ_EINVAL, "admin http: bad listen address %s:%d", host, port);
        return NULL;
    }
    struct llmq_admin_http *ah = calloc(1, sizeof(*ah));
    if (ah == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "admin http: out of memory");
        return NULL;
    }
    ah->loop = loop;
    ah->handlers = *handlers;
    unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    ah->daemon = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, ah, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned int)ADMIN_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)ADMIN_IDLE_TIMEOUT_S, MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        ah->daemon ? MHD_get_daemon_info(ah->daemon, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (info == NULL) {
        llmq_error_set(err, LLMQ_EIO, "admin http: cannot listen on %s:%d (port in use?)", host,
                       port);
        llmq_admin_http_free(ah);
        return NULL;
    }
    ev_io_init(&ah->io, on_io, info->epoll_fd, EV_READ);
    ah->io.data = ah;
    ev_io_start(loop, &ah->io);
    ev_timer_init(&ah->timer, on_timer, 0.0, 0.0);
    ah->timer.data = ah;
    admin_run(ah);
    return ah;
}

void llmq_admin_http_free(struct llmq_admin_http *ah)
{
    if (ah == NULL)
        return;
    if (ah->daemon != NULL) {
        ev_io_stop(ah->loop, &ah->io);
        ev_timer_stop(ah->loop, &ah->timer);
        MHD_stop_daemon(ah->daemon);
    }
    free(ah);
}
