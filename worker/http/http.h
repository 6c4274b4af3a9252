/* The worker's HTTP client: libcurl multi driven by a caller's libev loop.
 *
 * One struct llmq_http owns one curl multi handle; curl's sockets are ev_io
 * watchers and curl's single timeout is one ev_timer on the caller's loop
 * (curl_multi_socket_action, no threads of ours, no polling). Thousands of
 * transfers can be in flight; each costs one curl easy handle, a header
 * list, a small record and its response body as it arrives.
 *
 * Callbacks: a submitted request's done callback runs exactly once —
 *   - never before llmq_http_submit returns (completions are delivered from
 *     the loop, after curl_multi_socket_action has returned, never from
 *     inside a curl callback), so the callback may submit new requests;
 *   - with outcome LLMQ_HTTP_CANCELLED for every transfer still pending when
 *     llmq_http_free runs (from inside llmq_http_free).
 * If llmq_http_submit fails it returns an error and the callback never runs.
 *
 * Secrets: the API key is copied only into the transfer's curl header list,
 * which is wiped and freed when the transfer ends; it is never logged, and
 * CURLOPT_VERBOSE is never set.
 *
 * Threading: none. Every function must be called on the loop's thread. */
#ifndef LLMQ_WORKER_HTTP_H
#define LLMQ_WORKER_HTTP_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "llmq/error.h"
#include "openai/ratelimit_headers.h"

struct llmq_http;
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

struct llmq_http_config {
    int max_connections;      /* CURLMOPT_MAX_TOTAL_CONNECTIONS and the connection cache
                                 size; transfers beyond it wait in curl's queue (their
                                 timeout runs while queued). 0: 256 */
    int max_host_connections; /* CURLMOPT_MAX_HOST_CONNECTIONS; 0: max_connections.
                                 For https + h2 set it near inflight / 100 + 2: curl
                                 7.88 (Debian 12) opens one new connection per transfer
                                 that overflows a full connection while the next one's
                                 capacity is unknown (fixed in curl 8.0, PR #10456);
                                 measured: 1000 requests, 0 → 256 connections, 12 → 12.
                                 For cleartext HTTP/1.1 it must cover every transfer. */
    int max_streams;          /* h2 streams per connection; 0: 100 */
    long connect_timeout_ms;  /* 0: 10000 */
    long timeout_ms;          /* whole transfer, default for requests; 0: 600000 */
    const char *ca_file;      /* PEM bundle to verify servers with (copied); NULL: system
                                 store. Verification of peer and host is always on. */
    enum llmq_http_version version;
    size_t max_body_bytes;  /* response body limit; over it → LLMQ_HTTP_TOO_BIG. 0: 16 MiB */
    long buffer_bytes;      /* curl receive buffer per transfer; 0: 16384 (min 1024) */
    const char *user_agent; /* copied; NULL: "llmq/<version>" (or "llmq") */
};

enum llmq_http_auth {
    LLMQ_HTTP_AUTH_BEARER = 0, /* "Authorization: Bearer <key>" (OpenAI) */
    LLMQ_HTTP_AUTH_API_KEY,    /* "api-key: <key>" (Azure OpenAI) */
    LLMQ_HTTP_AUTH_NONE,
};

struct llmq_http_request {
    const char *url;  /* full URL, http:// or https:// (copied by curl) */
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
    int64_t send_by_ms;         /* llmq_monotonic_ms() after which the request must not go out:
                                   checked when the connection is ready, just before the
                                   request is sent (curl's pre-request callback); past it the
                                   transfer ends LLMQ_HTTP_STALE with nothing sent. 0: none */
    llmq_http_data_cb *on_data; /* NULL: none; see llmq_http_data_cb */
    void *data_privdata;
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
    int curl_code;     /* CURLcode, 0 on success */
    const char *error; /* curl's message, "" when outcome is LLMQ_HTTP_OK; never NULL */
    long status;       /* HTTP status of the final response; 0 if none arrived */
    long http_version; /* CURL_HTTP_VERSION_* used (CURLINFO_HTTP_VERSION), 0 unknown */
    int request_sent;  /* 1 when some request bytes went out (the call may have been
                          billed); 0 means it surely never reached the server */
    int aborted;       /* ended by llmq_http_abort or a data callback */
    char *body;        /* response body, NUL-terminated (never NULL: "" when empty) */
    size_t body_len;
    struct llmq_ratelimit_headers headers; /* rate-limit headers of the final response */
    int64_t elapsed_ms;                    /* submit to completion, monotonic */
};

/* Called exactly once per successfully submitted request; resp is borrowed
 * for the call, privdata is the submitter's. May call llmq_http_submit; may
 * call llmq_http_free (the free is then completed after the callback). */
typedef void llmq_http_done_cb(struct llmq_http_response *resp, void *privdata);

/* Returns a new client on loop (borrowed; must outlive the client) with
 * settings from cfg (borrowed; NULL: all defaults), or NULL with err filled
 * (LLMQ_ENOMEM, LLMQ_EHTTP). curl_global_init must have been called. */
struct llmq_http *llmq_http_new(struct ev_loop *loop, const struct llmq_http_config *cfg,
                                struct llmq_error *err);

/* Starts req (borrowed; see body_borrowed) and arranges for cb(resp,
 * privdata) to run once when it ends. Returns LLMQ_OK; LLMQ_EINVAL for a
 * missing URL/key or a header value containing CR or LF; LLMQ_ENOMEM;
 * LLMQ_EHTTP when curl refuses the transfer; LLMQ_ECLOSED while the client
 * is being freed. On error cb never runs. */
enum llmq_rc llmq_http_submit(struct llmq_http *http, const struct llmq_http_request *req,
                              llmq_http_done_cb *cb, void *privdata, struct llmq_error *err);

/* Ends transfer x (from req.xfer_out) now, from outside curl's callbacks:
 * curl lets go of it (its connection is closed: the server sees the client
 * leave) and its done callback runs from the loop soon after, never inside
 * this call, with outcome LLMQ_HTTP_CANCELLED and error "aborted". */
void llmq_http_abort(struct llmq_http *http, struct llmq_http_xfer *x);

/* Number of submitted transfers whose callback has not started yet. */
size_t llmq_http_inflight(const struct llmq_http *http);

/* Takes the response body out of resp: returns it (the transfer's own
 * buffer, malloc'd and NUL-terminated; the caller frees it), stores its
 * length in *len (may be NULL) and leaves resp->body "" and resp->body_len 0.
 * Returns NULL (and *len 0) when the body is empty. Saves copying a large
 * body the caller keeps (e.g. to store as the job's result). */
char *llmq_http_response_take_body(struct llmq_http_response *resp, size_t *len);

/* Static name of an outcome ("ok", "timeout", "reset", ...). */
const char *llmq_http_outcome_name(enum llmq_http_outcome outcome);

/* Cancels every transfer (each pending callback runs once, with
 * LLMQ_HTTP_CANCELLED, before this returns), closes curl's connections while
 * the loop still exists, stops all watchers and frees http. NULL is a no-op.
 * Called from a done callback, the free completes after that callback
 * returns. The loop is not destroyed. */
void llmq_http_free(struct llmq_http *http);

#endif
