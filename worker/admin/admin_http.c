/* The admin HTTP endpoint on libmicrohttpd, driven by the worker's libev loop
 * through common/httpd (httpd.h says how); see admin_http.h. Connections are
 * bounded in number and idle time, so a misbehaving scraper cannot hold
 * resources for long. */
#include "admin/admin_http.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd/httpd.h"

#define ADMIN_MAX_CONNECTIONS 32
#define ADMIN_IDLE_TIMEOUT_S 10
#define PROMETHEUS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct llmq_admin_http {
    struct llmq_httpd *httpd;
    struct llmq_admin_http_handlers handlers;
};

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

struct llmq_admin_http *llmq_admin_http_start(struct ev_loop *loop, const char *host, int port,
                                              const struct llmq_admin_http_handlers *handlers,
                                              struct llmq_error *err)
{
    struct llmq_admin_http *ah = calloc(1, sizeof(*ah));
    if (ah == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "admin http: out of memory");
        return NULL;
    }
    ah->handlers = *handlers;
    struct llmq_httpd_config hc = {
        .host = host,
        .port = port,
        .max_connections = ADMIN_MAX_CONNECTIONS,
        .idle_timeout_s = ADMIN_IDLE_TIMEOUT_S,
        .log_name = "admin http",
        .on_request = on_request,
        .request_cls = ah,
    };
    struct llmq_error e = {0};
    ah->httpd = llmq_httpd_start(loop, &hc, NULL, &e);
    if (ah->httpd == NULL) {
        llmq_error_set(err, e.rc, "admin http: %s", e.msg);
        free(ah);
        return NULL;
    }
    return ah;
}

void llmq_admin_http_free(struct llmq_admin_http *ah)
{
    if (ah == NULL)
        return;
    llmq_httpd_free(ah->httpd);
    free(ah);
}
