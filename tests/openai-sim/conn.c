/* Connections of openai-sim: accept, read, parse heads, release responses.
 *
 * A connection serves one request at a time (HTTP/1.1 keep-alive; pipelined
 * requests wait in the read buffer). Lifecycle: READING (busy = 0) -> the api
 * fills c->ex and starts it (busy = 1) -> its release steps go out on c->timer
 * -> once the last byte is written the exchange ends (settled and logged) and
 * the next buffered request is parsed. Every path that may free the
 * connection returns -1 so no caller touches it afterwards; nothing else
 * holds a pointer to a connection but the server's list. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sim.h"

#define SIM_MAX_HEAD_BYTES (64 * 1024)
#define SIM_READ_CHUNK (16 * 1024)
#define SIM_RESET_GAP_S 0.02

static int conn_process(struct sim_conn *c);

static void conn_update_events(struct sim_conn *c)
{
    int want = 0;
    if (!c->peer_eof && !(c->busy && c->in.len > SIM_MAX_HEAD_BYTES))
        want |= EV_READ; /* a busy connection buffers at most one more head */
    if (c->busy && c->ex.released > 0 && c->ex.sent < c->ex.marks[c->ex.released - 1])
        want |= EV_WRITE;
    if (want == (int)(c->io.events & (EV_READ | EV_WRITE)) && ev_is_active(&c->io))
        return;
    ev_io_stop(c->srv->loop, &c->io);
    ev_io_set(&c->io, c->fd, want);
    if (want != 0)
        ev_io_start(c->srv->loop, &c->io);
}

/* With --idle-timeout-ms, (re)arms c->timer to close c once it has been idle
 * that long; the timer serves the exchange while one is in progress. */
static void conn_arm_idle(struct sim_conn *c)
{
    int64_t idle_ms = c->srv->cfg.idle_timeout_ms;
    if (idle_ms <= 0 || c->busy || c->held)
        return;
    ev_timer_stop(c->srv->loop, &c->timer);
    ev_timer_set(&c->timer, (double)idle_ms / 1000.0, 0.0);
    ev_timer_start(c->srv->loop, &c->timer);
}

/* Ends the exchange: settles its charge and writes its access-log line. */
static void exchange_end(struct sim_conn *c)
{
    struct sim_server *srv = c->srv;
    struct sim_exchange *ex = &c->ex;
    sim_api_settle(srv, ex);
    sim_alog_write(srv, ex, llmq_monotonic_ms() - ex->t_mono_ms);
    c->busy = 0;
    srv->stats.inflight_now--;
    ev_timer_stop(srv->loop, &c->timer);
}

/* Closes and frees c. With reset set the peer receives an RST instead of a FIN.
 * An exchange still in progress is logged as client_closed (or shutdown). */
static void conn_free(struct sim_conn *c, int reset)
{
    struct sim_server *srv = c->srv;
    if (c->busy) {
        if (!c->ex.reset) {
            c->ex.outcome = srv->stopping ? SIM_OUT_SHUTDOWN : SIM_OUT_CLIENT_CLOSED;
            c->ex.status = srv->stopping ? 0 : 499;
            if (c->ex.stream) /* counted what it was sent, as the API bills a stream cut */
                c->ex.completion_tokens =
                    c->ex.released > 0 ? c->ex.mark_tokens[c->ex.released - 1] : 0;
        }
        exchange_end(c);
    }
    ev_io_stop(srv->loop, &c->io);
    ev_timer_stop(srv->loop, &c->timer);
    if (reset) {
        struct linger lg = {1, 0};
        (void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(c->fd);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    srv->stats.conns_now--;
    sim_buf_free(&c->in);
    sim_buf_free(&c->ex.out);
    free(c->ex.marks);
    free(c->ex.mark_tokens);
    free(c);
}

/* Writes what has been released. Returns 0, or -1 when c was freed. */
static int conn_flush(struct sim_conn *c)
{
    struct sim_exchange *ex = &c->ex;
    size_t limit = ex->released > 0 ? ex->marks[ex->released - 1] : 0;
    while (ex->sent < limit) {
        ssize_t n = send(c->fd, ex->out.data + ex->sent, limit - ex->sent, MSG_NOSIGNAL);
        if (n > 0) {
            ex->sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        conn_free(c, 0);
        return -1;
    }
    if (ex->sent == ex->out.len && ex->released == ex->n_marks) {
        if (ex->reset) {
            conn_free(c, 1); /* logged as a reset */
            return -1;
        }
        exchange_end(c);
        if (ex->close_after || c->peer_eof) {
            conn_free(c, 0);
            return -1;
        }
        conn_arm_idle(c);
        /* Inside conn_process its loop goes on; elsewhere parse what waits. */
        return c->in_process ? 0 : conn_process(c);
    }
    conn_update_events(c);
    return 0;
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct sim_conn *c = (struct sim_conn *)((char *)w - offsetof(struct sim_conn, timer));
    if (c->held) {
        c->held = 0; /* --late: the request arrives now */
        c->late_done = 1;
        (void)conn_process(c);
        return;
    }
    if (!c->busy) {
        conn_free(c, 0); /* idle past --idle-timeout-ms */
        return;
    }
    c->ex.released++;
    if (c->ex.released < c->ex.n_marks) {
        /* A reset waits a moment after its partial head so the client reads it first. */
        ev_timer_set(&c->timer, c->ex.reset ? SIM_RESET_GAP_S : c->ex.step_s, 0.0);
        ev_timer_start(c->srv->loop, &c->timer);
    }
    (void)conn_flush(c);
}

int sim_conn_start_exchange(struct sim_conn *c, int64_t delay_ms)
{
    struct sim_exchange *ex = &c->ex;
    struct sim_server *srv = c->srv;
    ev_timer_stop(srv->loop, &c->timer); /* it may be the idle timer */
    c->busy = 1;
    ex->released = 0;
    ex->sent = 0;
    if (++srv->stats.inflight_now > srv->stats.inflight_max)
        srv->stats.inflight_max = srv->stats.inflight_now;
    ex->conn_id = c->id;
    ex->inflight = srv->stats.inflight_now;
    if (delay_ms <= 0 && !ex->reset) {
        ex->released = ex->n_marks;
        return conn_flush(c);
    }
    if (ex->first_s > 0.0 || (c->srv->cfg.stream_gap_ms > 0 && ex->stream)) {
        /* paced stream: the first event after the latency, then one per gap */
        ex->step_s = (double)c->srv->cfg.stream_gap_ms / 1000.0;
        ev_timer_set(&c->timer, ex->first_s, 0.0);
        ev_timer_start(srv->loop, &c->timer);
        conn_update_events(c);
        return 0;
    }
    ex->step_s = (double)delay_ms / 1000.0 / (double)ex->n_marks;
    ev_timer_set(&c->timer, ex->reset ? (double)delay_ms / 1000.0 : ex->step_s, 0.0);
    ev_timer_start(srv->loop, &c->timer);
    conn_update_events(c);
    return 0;
}

/* Reads what the socket has. Returns 0, or -1 when c was freed. */
static int conn_read(struct sim_conn *c)
{
    for (int rounds = 0; rounds < 8; rounds++) {
        if (sim_buf_reserve(&c->in, SIM_READ_CHUNK) != 0) {
            conn_free(c, 0);
            return -1;
        }
        ssize_t n = recv(c->fd, c->in.data + c->in.len, SIM_READ_CHUNK, 0);
        if (n > 0) {
            c->in.len += (size_t)n;
            conn_arm_idle(c);
            if ((size_t)n < SIM_READ_CHUNK)
                return 0;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n == 0 && c->busy && !c->ex.stream) {
            c->peer_eof = 1; /* half-close: still answer, then close */
            return 0;
        }
        /* a stream's client that hangs up is gone, even before the first
         * chunk (the API stops generating): logged client_closed, counted
         * what it was sent */
        conn_free(c, 0);
        return -1;
    }
    return 0;
}

/* Parses and handles buffered requests until one is in progress or more
 * bytes are needed. Returns 0, or -1 when c was freed. */
static int conn_process(struct sim_conn *c)
{
    struct sim_server *srv = c->srv;
    c->in_process = 1;
    while (!c->busy && !c->held) {
        if (!c->head_done) {
            int status = 0;
            const char *why = NULL;
            enum sim_http_rc rc =
                sim_http_parse_head(c->in.data, c->in.len, SIM_MAX_HEAD_BYTES,
                                    srv->cfg.max_body_bytes, &c->req, &status, &why);
            if (rc == SIM_HTTP_NEED_MORE)
                break;
            if (rc == SIM_HTTP_ERROR) {
                c->in.len = 0; /* the rest of the stream cannot be trusted */
                sim_api_http_error(c, status, why);
                c->in_process = 0;
                return sim_conn_start_exchange(c, 0);
            }
            c->head_done = 1;
            c->sent_continue = 0;
        }
        size_t total =
            c->req.head_len + (size_t)(c->req.content_length > 0 ? c->req.content_length : 0);
        if (c->in.len < total) {
            if (c->req.expect_continue && !c->sent_continue) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                c->sent_continue = 1; /* a short write here only costs the client a wait */
                (void)send(c->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL);
            }
            break;
        }
        if (!c->late_done && srv->cfg.late_pct > 0.0 && sim_draw_pct(srv) < srv->cfg.late_pct) {
            /* --late: held on c->timer, then admitted as if it came now. */
            c->held = 1;
            ev_timer_stop(srv->loop, &c->timer); /* it may be the idle timer */
            ev_timer_set(&c->timer, (double)srv->cfg.late_ms / 1000.0, 0.0);
            ev_timer_start(srv->loop, &c->timer);
            break;
        }
        c->late_done = 0;
        c->head_done = 0;
        int64_t delay_ms = sim_api_handle(c);
        sim_buf_consume(&c->in, total);
        if (sim_conn_start_exchange(c, delay_ms) != 0)
            return -1;
    }
    c->in_process = 0;
    if (c->in.len == 0 && c->in.cap > 64 * 1024)
        sim_buf_free(&c->in); /* a big body came through: give its memory back */
    conn_update_events(c);
    return 0;
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    struct sim_conn *c = (struct sim_conn *)((char *)w - offsetof(struct sim_conn, io));
    if (revents & EV_WRITE) {
        if (conn_flush(c) != 0)
            return;
    }
    if (revents & EV_READ) {
        if (conn_read(c) != 0)
            return;
        (void)conn_process(c);
    }
}

static void conn_new(struct sim_server *srv, int fd)
{
    struct sim_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->srv = srv;
    c->fd = fd;
    ev_io_init(&c->io, on_io, fd, EV_READ);
    ev_timer_init(&c->timer, on_timer, 0.0, 0.0);
    conn_arm_idle(c);
    ev_io_start(srv->loop, &c->io);
    c->next = srv->conns;
    if (srv->conns != NULL)
        srv->conns->prev = c;
    srv->conns = c;
    c->id = ++srv->stats.conns_accepted;
    if (++srv->stats.conns_now > srv->stats.conns_max)
        srv->stats.conns_max = srv->stats.conns_now;
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    struct sim_server *srv =
        (struct sim_server *)((char *)w - offsetof(struct sim_server, accept_pause));
    ev_io_start(loop, &srv->accept_w);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    struct sim_server *srv =
        (struct sim_server *)((char *)w - offsetof(struct sim_server, accept_w));
    for (int i = 0; i < 256; i++) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_new(srv, fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* Out of descriptors: stop accepting for a moment instead of spinning. */
            ev_io_stop(loop, &srv->accept_w);
            ev_timer_set(&srv->accept_pause, 0.1, 0.0);
            ev_timer_start(loop, &srv->accept_pause);
        }
        return;
    }
}

int sim_conn_listen(struct sim_server *srv)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv->cfg.port)};
    if (inet_pton(AF_INET, srv->cfg.host, &a.sin_addr) != 1) {
        fprintf(stderr, "openai-sim: --host %s: not an IPv4 address\n", srv->cfg.host);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(fd, srv->cfg.accept_paused ? 0 : 4096) != 0) {
        fprintf(stderr, "openai-sim: listen on %s:%d: %s\n", srv->cfg.host, srv->cfg.port,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    socklen_t len = sizeof(a);
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    srv->cfg.port = ntohs(a.sin_port);
    srv->listen_fd = fd;
    ev_io_init(&srv->accept_w, on_accept, fd, EV_READ);
    ev_timer_init(&srv->accept_pause, on_accept_pause, 0.1, 0.0);
    if (!srv->cfg.accept_paused)
        ev_io_start(srv->loop, &srv->accept_w);
    return 0;
}

void sim_conn_accept_start(struct sim_server *srv)
{
    if (srv->listen_fd < 0 || ev_is_active(&srv->accept_w))
        return;
    (void)listen(srv->listen_fd, 4096); /* the full backlog from now on */
    ev_io_start(srv->loop, &srv->accept_w);
}

void sim_conn_close_all(struct sim_server *srv)
{
    srv->stopping = 1;
    while (srv->conns != NULL)
        conn_free(srv->conns, 0);
    if (srv->listen_fd >= 0) {
        ev_io_stop(srv->loop, &srv->accept_w);
        ev_timer_stop(srv->loop, &srv->accept_pause);
        close(srv->listen_fd);
        srv->listen_fd = -1;
    }
}
