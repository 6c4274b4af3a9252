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
 * Connections: kept per origin (scheme, host, port) by what it speaks — one
 * per call in flight for HTTP/1.1, a few multiplexed ones for h2 over TLS,
 * learned from the answers (http.c). A transfer that had to wait because
 * its origin's connections were all taken says so (pool_full).
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

#include "http/http_request.h"
#include "llmq/error.h"

struct llmq_http;

struct llmq_http_config {
    int max_connections;     /* connections per origin that speaks HTTP/1.1 (one call each:
                                cleartext http://, LLMQ_HTTP_1_1, or an https:// origin that
                                negotiated HTTP/1.1), and the most kept in all, per pool
                                (http.c); transfers beyond it wait in curl's queue (their
                                timeout runs while queued). 0: 256 */
    int h2_host_connections; /* connections per origin that multiplexes (h2 over TLS).
                                0: max_connections / max_streams + 2. Keep it near
                                inflight / max_streams + 2: curl 7.88 (Debian 12) opens
                                one new connection per transfer that overflows a full
                                connection while the next one's capacity is unknown
                                (fixed in curl 8.0, PR #10456); measured: 1000 requests,
                                256 allowed → 256 connections, 12 → 12. */
    int max_streams;         /* h2 streams per connection; 0: 100 */
    long connect_timeout_ms; /* 0: 10000 */
    long timeout_ms;         /* whole transfer, default for requests; 0: 600000 */
    const char *ca_file;     /* PEM bundle to verify servers with (copied); NULL: system
                                store. Verification of peer and host is always on. */
    enum llmq_http_version version;
    size_t max_body_bytes;  /* response body limit; over it → LLMQ_HTTP_TOO_BIG. 0: 16 MiB */
    long buffer_bytes;      /* curl receive buffer per transfer; 0: 16384 (min 1024) */
    const char *user_agent; /* copied; NULL: "llmq/<version>" (or "llmq") */
};

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
