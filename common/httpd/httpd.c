/* libmicrohttpd on a libev loop; see httpd.h for how MHD is run. */
#include "httpd/httpd.h"

#include <arpa/inet.h>
#include <ev.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct llmq_httpd {
    struct ev_loop *loop;
    struct MHD_Daemon *daemon;
    ev_io io;       /* MHD's epoll fd */
    ev_timer timer; /* MHD's next timeout */
    ev_timer kick;  /* 0 s: run MHD after a resume */
    char log_name[32];
};

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
        flags, (uint16_t)cfg->port, NULL, NULL, cfg->on_request, cfg->request_cls,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        cfg->idle_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, cfg->on_completed, cfg->completed_cls,
        MHD_OPTION_ARRAY, cfg->options ? cfg->options : none, MHD_OPTION_END);
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
