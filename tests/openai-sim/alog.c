/* Access log and counters of openai-sim.
 *
 * One JSON object per line per request, written when the request ends (its
 * answer fully written, the connection reset, or the client gone):
 *   {"t_ms":<unix ms at admission>,"key":"<first 8 hex of SHA-256(API key)>
 *    or "-","model":"...","path":"...","status":<HTTP status, 0 for a reset>,
 *    "outcome":"ok|limit_requests|...","prompt_tokens":N,"completion_tokens":N,
 *    "charged_tokens":N,"client_request_id":"<X-Client-Request-Id or empty>",
 *    "request_id":"<x-request-id>"[,"stream":true,"include_usage":B],"conn":N,
 *    "inflight":N,"latency_ms":N}
 * (stream and include_usage only for stream: true requests, as asked; conn:
 * the number of the connection it came on, counted from 1 as accepted;
 * inflight: the requests being answered, itself included, when its answer
 * started). A
 * stream the client left counts the completion tokens sent before it left.
 * Lines are buffered and written at most 5 ms after they are made, when
 * 256 KiB are pending, and at exit (SIGTERM/SIGINT), so a reader after exit sees every line. The
 * API key itself is never written. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

static const char *const outcome_names[SIM_OUT_COUNT] = {
    "ok",           "limit_requests", "limit_tokens",
    "too_large",    "spurious_429",   "insufficient_quota",
    "fail_500",     "fail_503",       "reset",
    "bad_request",  "unauthorized",   "not_found",
    "too_big",      "client_closed",  "shutdown",
    "bad_200_html", "bad_200_shape",  "stream_error",
};

const char *sim_outcome_name(enum sim_outcome o)
{
    return (unsigned)o < SIM_OUT_COUNT ? outcome_names[o] : "unknown";
}

static void on_flush_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct sim_server *srv =
        (struct sim_server *)((char *)w - offsetof(struct sim_server, alog.flush_timer));
    sim_alog_flush(srv);
}

int sim_alog_open(struct sim_server *srv)
{
    srv->alog.fd = -1;
    if (srv->cfg.access_log == NULL)
        return 0;
    int fd = open(srv->cfg.access_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "openai-sim: --access-log %s: %s\n", srv->cfg.access_log, strerror(errno));
        return -1;
    }
    srv->alog.fd = fd;
    /* One-shot, armed by the first line after a flush: an idle server does not wake. */
    ev_timer_init(&srv->alog.flush_timer, on_flush_timer, 0.005, 0.0);
    return 0;
}

void sim_alog_flush(struct sim_server *srv)
{
    struct sim_alog *l = &srv->alog;
    size_t off = 0;
    while (l->fd >= 0 && off < l->buf.len) {
        ssize_t n = write(l->fd, l->buf.data + off, l->buf.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "openai-sim: access log write failed: %s\n", strerror(errno));
            break;
        }
        off += (size_t)n;
    }
    sim_buf_reset(&l->buf);
}

static void add_str(struct sim_buf *b, const char *name, const char *v)
{
    sim_buf_addf(b, ",\"%s\":\"", name);
    sim_buf_add_json_esc(b, v, strlen(v));
    sim_buf_adds(b, "\"");
}

void sim_alog_write(struct sim_server *srv, const struct sim_exchange *ex, int64_t latency_ms)
{
    srv->stats.by_outcome[ex->outcome]++;
    srv->stats.prompt_tokens += (uint64_t)ex->prompt_tokens;
    srv->stats.completion_tokens += (uint64_t)ex->completion_tokens;
    if (srv->alog.fd < 0)
        return;
    struct sim_buf *b = &srv->alog.buf;
    sim_buf_addf(b, "{\"t_ms\":%lld", (long long)ex->t_unix_ms);
    add_str(b, "key", ex->key8);
    add_str(b, "model", ex->model);
    add_str(b, "path", ex->path);
    sim_buf_addf(b,
                 ",\"status\":%d,\"outcome\":\"%s\",\"prompt_tokens\":%lld,"
                 "\"completion_tokens\":%lld,\"charged_tokens\":%lld",
                 ex->status, sim_outcome_name(ex->outcome), (long long)ex->prompt_tokens,
                 (long long)ex->completion_tokens, (long long)ex->charged_tokens);
    add_str(b, "client_request_id", ex->client_id);
    add_str(b, "request_id", ex->request_id);
    if (ex->stream)
        sim_buf_addf(b, ",\"stream\":true,\"include_usage\":%s",
                     ex->include_usage ? "true" : "false");
    sim_buf_addf(b, ",\"conn\":%llu,\"inflight\":%llu", (unsigned long long)ex->conn_id,
                 (unsigned long long)ex->inflight);
    sim_buf_addf(b, ",\"latency_ms\":%lld}\n", (long long)latency_ms);
    if (b->len >= 256 * 1024)
        sim_alog_flush(srv);
    else if (!ev_is_active(&srv->alog.flush_timer))
        ev_timer_start(srv->loop, &srv->alog.flush_timer);
}

void sim_alog_close(struct sim_server *srv)
{
    if (srv->alog.fd < 0)
        return;
    sim_alog_flush(srv);
    ev_timer_stop(srv->loop, &srv->alog.flush_timer);
    close(srv->alog.fd);
    srv->alog.fd = -1;
    sim_buf_free(&srv->alog.buf);
}

void sim_stats_print(const struct sim_server *srv)
{
    const struct sim_stats *s = &srv->stats;
    fprintf(stderr,
            "openai-sim stats: requests=%llu conns_accepted=%llu conns_now=%llu conns_max=%llu "
            "inflight_now=%llu inflight_max=%llu prompt_tokens=%llu completion_tokens=%llu",
            (unsigned long long)s->requests, (unsigned long long)s->conns_accepted,
            (unsigned long long)s->conns_now, (unsigned long long)s->conns_max,
            (unsigned long long)s->inflight_now, (unsigned long long)s->inflight_max,
            (unsigned long long)s->prompt_tokens, (unsigned long long)s->completion_tokens);
    for (int i = 0; i < SIM_OUT_COUNT; i++)
        if (s->by_outcome[i] != 0)
            fprintf(stderr, " %s=%llu", outcome_names[i], (unsigned long long)s->by_outcome[i]);
    fputc('\n', stderr);
}
