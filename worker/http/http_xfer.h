/* One transfer of the worker's HTTP client (http_xfer.c: curl easy options,
 * headers, body, outcome) and the settings it is made with; http.c (client,
 * loop glue, delivery) runs them. Not for use outside worker/http/. */
#ifndef LLMQ_WORKER_HTTP_XFER_H
#define LLMQ_WORKER_HTTP_XFER_H

#include <curl/curl.h>

#include "http/http_request.h"
#include "llmq/error.h"

struct llmq_http_pool;
struct llmq_http_origin;

/* One transfer. Lives from submit until its callback has returned; linked in
 * exactly one of http->active (curl owns it in the multi) or the done queue
 * (removed from the multi, waiting for delivery). */
struct llmq_http_xfer {
    struct llmq_http *http;
    CURL *easy;
    struct curl_slist *headers; /* owned; holds the API key; wiped before free */
    llmq_http_done_cb *cb;
    void *privdata;
    struct llmq_http_xfer *prev, *next;
    char *body; /* response body, owned, NUL-terminated when non-NULL */
    size_t body_len, body_cap;
    size_t max_body;
    int too_big;
    int cancelled;
    int aborted;                /* llmq_http_abort or on_data ended it */
    llmq_http_data_cb *on_data; /* the request's; NULL: none */
    void *data_privdata;
    int body_discard;   /* the request's: body_len counts what on_data got, body stays NULL */
    int stale;          /* the pre-request callback found send_by_ms passed */
    int64_t send_by_ms; /* the request's; 0: none */
    int prereq_seen;    /* its connection was ready: the request went (or was to go) out */
    int64_t prereq_ms;  /* llmq_monotonic_ms() at the last pre-request callback; 0: none */
    struct llmq_http_pool *pool;     /* the multi it is in (http.c) */
    struct llmq_http_origin *origin; /* where it goes (http.c) */
    int pool_full;                   /* when submitted, its origin's connections of its pool were
                                        all taken: it waited for one */
    int pool_connections;            /* its pool's connections per origin, at submit */
    size_t pool_ahead;               /* transfers to its origin already in its pool, at submit */
    int64_t asked_ms;                /* the request's; 0: none */
    CURLcode result;
    int64_t start_ms;
    int64_t processing_ms; /* the final response's openai-processing-ms; -1: none */
    struct llmq_ratelimit_headers rl;
    char errbuf[CURL_ERROR_SIZE];
};

/* Settings after defaults are applied; strings owned by the client. */
struct llmq_http_settings {
    int max_connections;
    int h2_host_connections;
    int max_streams;
    long connect_timeout_ms;
    long timeout_ms;
    char *ca_file;
    enum llmq_http_version version;
    size_t max_body_bytes;
    long buffer_bytes;
    char *user_agent;
};

/* Stores in *out a new transfer for req with its easy handle fully
 * configured (not yet added to a multi). Returns LLMQ_OK, or LLMQ_EINVAL /
 * LLMQ_ENOMEM / LLMQ_EHTTP with err filled and *out NULL. Borrows s and req. */
enum llmq_rc llmq_http_xfer_new(const struct llmq_http_settings *s,
                                const struct llmq_http_request *req, struct llmq_http_xfer **out,
                                struct llmq_error *err);

/* Sets x up for the pool it goes to: per_request (HTTP/1.1, one request per
 * connection at a time) or multiplexed (h2 over TLS preferred, waiting for a
 * connection that may multiplex). Returns 0, -1 when curl refuses. x must not
 * be in a multi. */
int llmq_http_xfer_use_pool(struct llmq_http_xfer *x, const struct llmq_http_settings *s,
                            int per_request);

/* Fills resp (borrowing x's body and headers) from a finished transfer. */
void llmq_http_xfer_response(struct llmq_http_xfer *x, struct llmq_http_response *resp,
                             int64_t now_ms);

/* Cleans up the easy handle, wipes and frees the header list and frees x and
 * its body. NULL is a no-op. x must not be in a multi. */
void llmq_http_xfer_free(struct llmq_http_xfer *x);

#endif
