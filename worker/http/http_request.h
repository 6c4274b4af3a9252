/* One HTTP request of the worker's client and what it ends with: the
 * request, the response its done callback receives, the outcomes, and the
 * callbacks' types (http.h is the client that runs them; http_xfer.h one
 * transfer). Values only: no client state here, so the client and the
 * transfer both build on it without importing each other. Everything runs
 * on the loop's thread (http.h). */
#ifndef LLMQ_WORKER_HTTP_REQUEST_H
#define LLMQ_WORKER_HTTP_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "openai/ratelimit_headers.h"

struct llmq_http_xfer;

/* A response's body as it arrives (a streamed call, stream_call.h): runs from
 * inside curl's write callback with each piece data[0..len) (borrowed for the
 * call) and the response's status; the piece is also kept in the body as
 * usual. It must not call any llmq_http function. Returns 0 to go on, or
 * nonzero to end the transfer now (the done callback then runs with
 * LLMQ_HTTP_CANCELLED). */
typedef int llmq_http_data_cb(const char *data, size_t len, long status, void *privdata);

enum llmq_http_version {
    LLMQ_HTTP_PREFER_H2 = 0, /* h2 over TLS (multiplexed), HTTP/1.1 keep-alive over cleartext */
    LLMQ_HTTP_1_1,           /* HTTP/1.1 only */
};

enum llmq_http_auth {
    LLMQ_HTTP_AUTH_BEARER = 0, /* "Authorization: Bearer <key>" (OpenAI) */
    LLMQ_HTTP_AUTH_API_KEY,    /* "api-key: <key>" (Azure OpenAI) */
    LLMQ_HTTP_AUTH_NONE,
};

struct llmq_http_request {
    const char *url;  /* full URL, http:// or https:// (copied by curl) */
    int get;          /* 1: a GET (body unused; the provider batches' reads, worker/pbatch/) */
    const char *body; /* request body, sent as POST */
    size_t body_len;
    int body_borrowed;        /* 0: body is copied at submit; 1: body is borrowed
                                 and must stay valid and unchanged until the done
                                 callback has started */
    const char *content_type; /* NULL: "application/json" */
    enum llmq_http_auth auth;
    const char *api_key;              /* copied into the header list only; may be NULL for
                                         LLMQ_HTTP_AUTH_NONE */
    const char *client_request_id;    /* sent as X-Client-Request-Id (the job id); may be NULL */
    const char *const *extra_headers; /* NULL-terminated "Name: value" lines (copied); may
                                         be NULL */
    long timeout_ms;                  /* whole transfer; 0: the config's timeout_ms */
    size_t max_body_bytes;            /* response body limit; 0: the config's (a provider
                                         batch's result file may be larger, worker/pbatch/) */
    int64_t send_by_ms;         /* llmq_monotonic_ms() after which the request must not go out:
                                   checked when the connection is ready, just before the
                                   request is sent (curl's pre-request callback); past it the
                                   transfer ends LLMQ_HTTP_STALE with nothing sent. 0: none */
    int64_t asked_ms;           /* llmq_monotonic_ms() the request's grant was asked for (before
                                   its admission): what llmq_http_response.late_ms counts
                                   from. 0: none (late_ms -1) */
    llmq_http_data_cb *on_data; /* NULL: none; see llmq_http_data_cb */
    void *data_privdata;
    int body_discard;                 /* 1 (with on_data): the body is handed to on_data only, not
                                         kept (the response's body is ""), so a large one costs no
                                         memory (a provider batch's result file, worker/pbatch/);
                                         max_body_bytes still bounds its length */
    struct llmq_http_xfer **xfer_out; /* not NULL: receives the transfer for
                                         llmq_http_abort; valid until its done
                                         callback starts */
};

enum llmq_http_outcome {
    LLMQ_HTTP_OK = 0,         /* a complete HTTP response arrived (any status) */
    LLMQ_HTTP_TIMEOUT,        /* connect or transfer timeout */
    LLMQ_HTTP_CONNECT_ERROR,  /* name resolution, connection refused, unreachable */
    LLMQ_HTTP_TLS_ERROR,      /* handshake or certificate verification failed */
    LLMQ_HTTP_RESET,          /* connection reset or closed before the response ended */
    LLMQ_HTTP_TOO_BIG,        /* response body over max_body_bytes; body is cut */
    LLMQ_HTTP_PROTOCOL_ERROR, /* malformed HTTP from the server */
    LLMQ_HTTP_CANCELLED,      /* llmq_http_free ran before the transfer ended, or it was
                                 aborted (llmq_http_abort, a data callback) */
    LLMQ_HTTP_STALE,          /* not sent: the connection was ready after send_by_ms */
    LLMQ_HTTP_OTHER,          /* anything else (see curl_code and error) */
};

/* What the done callback receives. Borrowed for the duration of the callback:
 * copy what you keep, or take the body with llmq_http_response_take_body. */
struct llmq_http_response {
    enum llmq_http_outcome outcome;
    int curl_code;        /* CURLcode, 0 on success */
    const char *error;    /* curl's message, "" when outcome is LLMQ_HTTP_OK; never NULL */
    long status;          /* HTTP status of the final response; 0 if none arrived */
    long http_version;    /* CURL_HTTP_VERSION_* used (CURLINFO_HTTP_VERSION), 0 unknown */
    int request_sent;     /* 1 when some request bytes went out (the call may have been
                             billed); 0 means it surely never reached the server */
    int aborted;          /* ended by llmq_http_abort or a data callback */
    int pool_full;        /* when it was submitted, every connection the client keeps to
                             its origin was taken (pool_ahead transfers for pool_connections
                             connections), or it waited in the multiplexed pool for an
                             origin that turned out to speak HTTP/1.1: it waited in the
                             client's queue for a connection */
    int pool_connections; /* connections the client keeps to its origin */
    size_t pool_ahead;    /* transfers to its origin in flight when it was submitted */
    char *body;           /* response body, NUL-terminated (never NULL: "" when empty) */
    size_t body_len;
    struct llmq_ratelimit_headers headers; /* rate-limit headers of the final response */
    int64_t elapsed_ms;                    /* submit to completion, monotonic */
    /* How late the request may have reached the API after its admission:
     * from asked_ms to the pre-request callback letting it go (curl's
     * PRETRANSFER), plus from then to the first byte of the answer
     * (STARTTRANSFER) less the time the API says it worked on it
     * (openai-processing-ms, at least 0 left): the dispatch trip, the
     * worker's loop, connecting, the send on a loaded host, the network
     * both ways, the API's queue before it counted the request. An upper
     * bound of the admission-to-arrival delay the arrival guard must cover
     * (lua/lib/limiter_window.lua). -1: not measured (no asked_ms, no such
     * header, or no complete response). */
    int64_t late_ms;
};

/* Called exactly once per successfully submitted request; resp is borrowed
 * for the call, privdata is the submitter's. May call llmq_http_submit; may
 * call llmq_http_free (the free is then completed after the callback). */
typedef void llmq_http_done_cb(struct llmq_http_response *resp, void *privdata);

#endif
