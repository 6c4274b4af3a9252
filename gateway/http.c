/* The gateway's HTTP server: libmicrohttpd on the gateway's libev loop
 * through common/httpd (httpd.h says how MHD is run there, and how a
 * request head is time-limited: --header-timeout-ms, at most half of
 * --max-connections waiting for one), and one request's life (see
 * http.h). A request's body must be whole within --body-timeout-ms of its
 * head, else its connection is closed (a client trickling its body). MHD_ALLOW_SUSPEND_RESUME lets
 * a request wait for Redis without holding the loop; llmq_httpd_resume wakes it.
 *
 * A suspended connection is not polled by MHD, so a client hanging up would
 * go unnoticed until the answer: while suspended, its socket is watched for
 * reading; end-of-file or an error means the client left (r->on_gone runs,
 * then the request is resumed and closed). Bytes instead (a pipelined
 * request) stop the watch: MHD reads them after the answer. */
#include "http.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "jobs/batch.h"
#include "auth/gw_key.h"
#include "jobs/job.h"
#include "base/log.h"
#include "httpd/httpd.h"
#include "request_ref.h"

#define POST_BUFFER_BYTES 65536
#define IDLE_TIMEOUT_S 120

struct gw_http {
    struct gw *gw;
    struct llmq_httpd *httpd;
    const struct gw_http_hooks *hooks;
    int metrics_only;
    char *tls_cert, *tls_key; /* PEM text MHD reads until the server stops */
};

void gw_request_hold(struct gw_request *r)
{
    r->refs++;
}

void gw_request_release(struct gw_request *r)
{
    if (--r->refs > 0)
        return;
    if (r->state_free != NULL)
        r->state_free(r->state);
    free(r->body);
    free(r->resp);
    free(r->headers);
    free(r);
}

static void stop_body_deadline(struct gw_request *r)
{
    ev_timer_stop(r->gw->loop, &r->body_deadline);
}

static void on_body_deadline(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct gw_request *r = t->data;
    if (r->started || r->answered || r->conn == NULL)
        return;
    if (r->suspended) { /* waiting for its key's check (Redis): not the client's doing */
        ev_timer_set(t, 1.0, 0.);
        ev_timer_start(loop, t);
        return;
    }
    r->gw->stats.body_timeouts++;
    LLMQ_LOG(LLMQ_LOG_INFO, "gateway http: %s %s: the body did not arrive within %lld ms: closed",
             r->method, r->path, r->gw->cfg->body_timeout_ms);
    llmq_httpd_close(r->conn);
}

static void stop_watch(struct gw_request *r)
{
    if (ev_is_active(&r->watch))
        ev_io_stop(r->gw->loop, &r->watch);
}

static void resume(struct gw_request *r)
{
    stop_watch(r);
    if (!r->suspended || r->conn == NULL)
        return;
    r->suspended = 0;
    llmq_httpd_resume(r->http->httpd, r->conn);
}

void gw_request_admit(struct gw_request *r)
{
    if (r->admitted || r->answered)
        return;
    r->admitted = 1;
    if (!r->admitting && r->suspended) {
        /* MHD calls again as it did when the headers were read (no body
         * yet), then reads the body */
        r->admit_repeat = 1;
        resume(r);
    }
}

static void on_client_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gw_request *r = w->data;
    char c;
    ssize_t n = recv(w->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) {
        stop_watch(r); /* more bytes: a pipelined request, read after the answer */
        return;
    }
    r->gone = 1;
    if (r->on_gone != NULL) {
        void (*cb)(struct gw_request *) = r->on_gone;
        r->on_gone = NULL;
        cb(r);
    }
    resume(r);
}

void gw_respond(struct gw_request *r, unsigned int status, char *body, size_t len)
{
    if (r->answered || r->gone || r->conn == NULL) {
        free(body);
        return;
    }
    r->answered = 1;
    r->on_gone = NULL;
    r->status = status;
    r->resp = body;
    r->resp_len = len;
    resume(r);
}

void gw_respond_json(struct gw_request *r, unsigned int status, json_t *v)
{
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (text == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    gw_respond(r, status, text, strlen(text));
}

void gw_respond_error(struct gw_request *r, const struct gw_error *e)
{
    size_t len = 0;
    char *body = gw_error_body(e, &len);
    if (body == NULL) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        body = strdup(oom);
        len = body ? strlen(body) : 0;
    }
    gw_respond(r, e->status, body, len);
}

void gw_respond_errorf(struct gw_request *r, unsigned int status, const char *type,
                       const char *param, const char *code, const char *fmt, ...)
{
    struct gw_error e = {.status = status, .type = type, .param = param, .code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
    va_end(ap);
    gw_respond_error(r, &e);
}

void gw_respond_no_redis(struct gw_request *r)
{
    snprintf(r->retry_after, sizeof(r->retry_after), "1");
    gw_respond_errorf(r, 503, "server_error", NULL, "service_unavailable",
                      "llmq-gateway cannot reach Redis right now; retry shortly");
}

/* Collects a body chunk, up to body_max; beyond, remembers it was too big. */
static void body_append(struct gw_request *r, const char *data, size_t n)
{
    if (r->body_too_big || n == 0)
        return;
    if (r->body_len + n > r->body_max) {
        r->body_too_big = 1;
        return;
    }
    if (r->body_len + n + 1 > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + n + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (b == NULL) {
            r->body_too_big = 1;
            return;
        }
        r->body = b;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
}

static enum MHD_Result on_post_part(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *filename, const char *content_type,
                                    const char *transfer_encoding, const char *data, uint64_t off,
                                    size_t size)
{
    (void)kind;
    (void)content_type;
    (void)transfer_encoding;
    (void)off;
    struct gw_request *r = cls;
    if (key == NULL)
        return MHD_YES;
    if (strcmp(key, "file") == 0) {
        r->upload.has_file = 1;
        if (filename != NULL && r->upload.filename[0] == '\0' && !r->upload.filename_too_long) {
            /* never cut: a cut name could end inside a character */
            if (strlen(filename) < sizeof(r->upload.filename))
                memcpy(r->upload.filename, filename, strlen(filename) + 1);
            else
                r->upload.filename_too_long = 1;
        }
        body_append(r, data, size);
    } else if (strcmp(key, "purpose") == 0) {
        size_t have = strlen(r->upload.purpose);
        if (have + size < sizeof(r->upload.purpose)) {
            memcpy(r->upload.purpose + have, data, size);
            r->upload.purpose[have + size] = '\0';
        }
    }
    return MHD_YES;
}

/* Keeps the last raw bytes of an upload (see multipart_complete). */
static void upload_tail(struct gw_upload *u, const char *data, size_t n)
{
    size_t cap = sizeof(u->tail);
    if (n >= cap) {
        memcpy(u->tail, data + n - cap, cap);
        u->tail_len = cap;
        return;
    }
    if (u->tail_len + n > cap) {
        size_t drop = u->tail_len + n - cap;
        memmove(u->tail, u->tail + drop, u->tail_len - drop);
        u->tail_len -= drop;
    }
    memcpy(u->tail + u->tail_len, data, n);
    u->tail_len += n;
}

/* A multipart body is whole when, less trailing CR/LF, it ends with the
 * closing delimiter "--BOUNDARY--": MHD's post processor does not say
 * whether it saw one, so a cut-off upload would otherwise pass as a shorter
 * file. This also makes up for MHD 0.9.75 refusing an epilogue (bytes after
 * the closing delimiter, which RFC 2046 allows: the openai npm package sends
 * "\r\n\r\n"): such a refusal comes after everything was parsed. */
static int multipart_complete(const struct gw_upload *u)
{
    size_t n = u->tail_len;
    while (n > 0 && (u->tail[n - 1] == '\r' || u->tail[n - 1] == '\n'))
        n--;
    char close[96];
    int cl = snprintf(close, sizeof(close), "--%s--", u->boundary);
    return cl > 4 && (size_t)cl <= n && memcmp(u->tail + n - (size_t)cl, close, (size_t)cl) == 0;
}

static void query_value(struct MHD_Connection *c, const char *name, char *buf, size_t n, int *has)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    *has = v != NULL;
    if (v != NULL)
        snprintf(buf, n, "%s", v);
    if (v != NULL && strlen(v) >= n)
        buf[0] = '\x01'; /* too long: invalid for every decoder */
}

static struct gw_request *request_new(struct gw_http *h, struct MHD_Connection *conn,
                                      const char *url, const char *method)
{
    struct gw_request *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->gw = h->gw;
    r->http = h;
    r->conn = conn;
    snprintf(r->path, sizeof(r->path), "%s", url);
    r->refs = 1;
    snprintf(r->method, sizeof(r->method), "%s", method);
    gw_route_decode(method, url, &r->m);
    if (h->metrics_only && (gw_route_needs_key(r->m.route) || r->m.route == GW_ROUTE_DASHBOARD))
        r->m.route = GW_ROUTE_NOT_FOUND;
    query_value(conn, "after", r->after, sizeof(r->after), &r->has_after);
    query_value(conn, "limit", r->limit, sizeof(r->limit), &r->has_limit);
    query_value(conn, "purpose", r->purpose, sizeof(r->purpose), &r->has_purpose);
    const char *auth =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *key = NULL;
    size_t key_len = 0;
    if (gw_bearer_decode(auth, &key, &key_len))
        llmq_gw_key_hash(key, key_len, r->auth_hash);
    else
        r->auth_malformed = auth != NULL;
    r->body_max = (size_t)h->gw->cfg->max_body_bytes;
    if (r->m.route == GW_ROUTE_FILE_CREATE) {
        r->body_max = (size_t)h->gw->cfg->max_file_bytes;
        const char *ct =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        const char *b = ct ? strstr(ct, "boundary=") : NULL;
        if (ct != NULL && strncasecmp(ct, "multipart/form-data", 19) == 0 && b != NULL) {
            b += 9;
            size_t bl = b[0] == '"' ? strcspn(b + 1, "\"") : strcspn(b, "; \t");
            snprintf(r->upload.boundary, sizeof(r->upload.boundary), "%.*s", (int)bl,
                     b[0] == '"' ? b + 1 : b);
            r->upload.is_multipart = 1;
            r->pp = MHD_create_post_processor(conn, POST_BUFFER_BYTES, on_post_part, r);
        }
    }
    ev_timer_init(&r->body_deadline, on_body_deadline, h->gw->cfg->body_timeout_ms / 1000.0, 0.);
    r->body_deadline.data = r;
    ev_timer_start(h->gw->loop, &r->body_deadline);
    llmq_job_id_generate(r->request_id, sizeof(r->request_id));
    memcpy(r->request_id, "req", 3); /* "req-<ms hex>-<random>" */
    r->gw->stats.requests++;
    return r;
}

/* Adds lines, "Name: value\n" each (NULL: none), to resp. */
static void add_headers(struct MHD_Response *resp, char *lines)
{
    for (char *l = lines; l != NULL && *l != '\0';) {
        char *end = strchr(l, '\n'), *colon = strchr(l, ':');
        if (end == NULL || colon == NULL || colon > end)
            return;
        *end = *colon = '\0';
        MHD_add_response_header(resp, l, colon + 1 + strspn(colon + 1, " "));
        *end = '\n';
        *colon = ':';
        l = end + 1;
    }
}

static enum MHD_Result queue_answer(struct gw_request *r)
{
    struct MHD_Response *resp =
        r->stream_read != NULL
            ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, r->stream_read,
                                                r->stream_cls, NULL)
            : MHD_create_response_from_buffer(r->resp_len, r->resp ? r->resp : (char *)"",
                                              r->resp ? MHD_RESPMEM_MUST_FREE
                                                      : MHD_RESPMEM_PERSISTENT);
    if (resp == NULL)
        return MHD_NO;
    r->resp = NULL; /* the response owns it now */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->content_type ? r->content_type : "application/json");
    MHD_add_response_header(resp, "x-request-id", r->request_id);
    if (r->retry_after[0] != '\0')
        MHD_add_response_header(resp, "retry-after", r->retry_after);
    add_headers(resp, r->headers);
    struct gw_stats *s = &r->gw->stats;
    if (r->status < 300)
        s->responses_2xx++;
    else if (r->status < 500)
        s->responses_4xx++;
    else
        s->responses_5xx++;
    enum MHD_Result rc = MHD_queue_response(r->conn, r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static void watch_client(struct gw_request *r);

/* Runs the request whose body is complete: a body that is cut off or too
 * big is refused here, for the routes that read one (those with a key). */
static void start(struct gw_request *r)
{
    stop_body_deadline(r);
    if (gw_route_needs_key(r->m.route)) {
        if (r->upload.is_multipart && !multipart_complete(&r->upload)) {
            gw_respond_errorf(r, 400, "invalid_request_error", "file", "invalid_multipart",
                              "The multipart/form-data body is malformed.");
            return;
        }
        if (r->body_too_big) {
            int file = r->m.route == GW_ROUTE_FILE_CREATE;
            gw_respond_errorf(r, 413, "invalid_request_error", file ? "file" : NULL,
                              "request_too_large",
                              file ? "The file is larger than the limit of %zu bytes."
                                   : "The request body is larger than the limit of %zu bytes.",
                              r->body_max);
            return;
        }
    }
    r->http->hooks->handle(r);
}

/* Waits for a callback (Redis, a waiter, the key check): MHD stops polling
 * the connection until resume(). */
static void suspend(struct gw_request *r)
{
    MHD_suspend_connection(r->conn);
    r->suspended = 1;
    watch_client(r);
}

static void watch_client(struct gw_request *r);

void gw_request_pause(struct gw_request *r)
{
    if (r->suspended || r->conn == NULL)
        return;
    MHD_suspend_connection(r->conn);
    r->suspended = 1;
    watch_client(r);
}

void gw_request_wake(struct gw_request *r)
{
    resume(r);
}

static void watch_client(struct gw_request *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL)
        return;
    ev_io_init(&r->watch, on_client_readable, ci->connect_fd, EV_READ);
    r->watch.data = r;
    ev_io_start(r->gw->loop, &r->watch);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct gw_http *h = cls;
    struct gw_request *r = *con_cls;
    if (r == NULL) {
        r = request_new(h, conn, url, method);
        if (r == NULL)
            return MHD_NO;
        *con_cls = r;
        /* before the body: a refused request's body is never read */
        r->admitting = 1;
        h->hooks->admit(r);
        r->admitting = 0;
        if (r->answered)
            return queue_answer(r);
        if (!r->admitted && !r->gone)
            suspend(r); /* until the key is checked */
        return r->gone ? MHD_NO : MHD_YES;
    }
    if (r->answered)
        return queue_answer(r);
    if (r->gone)
        return MHD_NO;
    if (r->admit_repeat && *upload_data_size == 0) {
        r->admit_repeat = 0; /* the headers' call again, after admission: the body comes next */
        return MHD_YES;
    }
    r->admit_repeat = 0;
    if (*upload_data_size > 0) {
        if (r->pp != NULL) {
            upload_tail(&r->upload, upload_data, *upload_data_size);
            if (!r->upload.pp_failed &&
                MHD_post_process(r->pp, upload_data, *upload_data_size) != MHD_YES)
                r->upload.pp_failed = 1;
        } else {
            body_append(r, upload_data, *upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!r->started) {
        r->started = 1;
        start(r);
        if (r->answered)
            return queue_answer(r);
    }
    if (r->gone)
        return MHD_NO;
    /* wait for Redis: suspended until gw_respond resumes it */
    suspend(r);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    struct gw_request *r = *con_cls;
    if (r == NULL)
        return;
    *con_cls = NULL;
    stop_watch(r);
    stop_body_deadline(r);
    if (r->pp != NULL)
        MHD_destroy_post_processor(r->pp);
    r->pp = NULL;
    /* a streamed answer cut before its end counts as the client leaving */
    if (!r->gone && (!r->answered || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)) {
        r->gone = 1;
        if (r->on_gone != NULL) {
            void (*cb)(struct gw_request *) = r->on_gone;
            r->on_gone = NULL;
            cb(r);
        }
    }
    r->conn = NULL;
    gw_request_release(r);
}

struct gw_http *gw_http_start(struct gw *gw, const char *host, int port, int metrics_only,
                              const struct gw_http_hooks *hooks, int *bound, struct llmq_error *err)
{
    struct gw_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
        return NULL;
    }
    h->gw = gw;
    h->hooks = hooks;
    h->metrics_only = metrics_only;
    const struct gw_config *cfg = gw->cfg;
    int tls = !metrics_only && cfg->tls_cert[0] != '\0';
    if (tls) {
        size_t len;
        if (llmq_batch_read_file(cfg->tls_cert, &h->tls_cert, &len, err) != LLMQ_OK ||
            llmq_batch_read_file(cfg->tls_key, &h->tls_key, &len, err) != LLMQ_OK) {
            gw_http_free(h);
            return NULL;
        }
    }
    struct MHD_OptionItem tls_opts[] = {
        {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, h->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key},
        {MHD_OPTION_END, 0, NULL},
    };
    struct llmq_httpd_config hc = {
        .host = host,
        .port = port,
        .allow_any_port = 1,
        .suspend_resume = 1,
        .tls = tls,
        .max_connections = (unsigned int)(metrics_only ? 64 : cfg->max_connections),
        .idle_timeout_s = IDLE_TIMEOUT_S,
        .head_timeout_ms = (unsigned int)cfg->header_timeout_ms,
        .max_pending_heads = (unsigned int)(metrics_only ? 32 : cfg->max_connections / 2),
        .per_ip_limit = (unsigned int)(metrics_only ? 0 : cfg->max_connections_per_ip),
        .log_name = "gateway http",
        .on_request = on_request,
        .request_cls = h,
        .on_completed = on_completed,
        .completed_cls = h,
        .options = tls_opts,
    };
    h->httpd = llmq_httpd_start(gw->loop, &hc, bound, err);
    if (h->httpd == NULL) {
        gw_http_free(h);
        return NULL;
    }
    return h;
}

void gw_http_slow_counts(const struct gw_http *h, unsigned long long *head_timeouts,
                         unsigned long long *pending_evicted)
{
    llmq_httpd_slow_counts(h != NULL ? h->httpd : NULL, head_timeouts, pending_evicted);
}

void gw_http_free(struct gw_http *h)
{
    if (h == NULL)
        return;
    llmq_httpd_free(h->httpd);
    if (h->tls_key != NULL)
        explicit_bzero(h->tls_key, strlen(h->tls_key));
    free(h->tls_cert);
    free(h->tls_key);
    free(h);
}
