/* The worker's small admin HTTP endpoint: /metrics, /healthz, /readyz.
 *
 * libmicrohttpd parses HTTP, run on the caller's libev loop with no thread
 * of its own by common/httpd (httpd.h).
 * Pages are produced synchronously by the caller's handlers from state in
 * memory, so a request never waits on Redis or the API.
 *
 * Routes (GET or HEAD; anything else is 405, unknown paths 404):
 *   /metrics  200, the text the metrics handler returns (Prometheus format)
 *   /healthz  200 "ok": the process and its loop are alive
 *   /readyz   200 "ready", or 503 and the ready handler's one-line reason
 *
 * Threading: none. Every function must be called on the loop's thread. */
#ifndef LLMQ_WORKER_ADMIN_HTTP_H
#define LLMQ_WORKER_ADMIN_HTTP_H

#include <stddef.h>

#include "llmq/error.h"

struct ev_loop;
struct llmq_admin_http;

struct llmq_admin_http_handlers {
    /* Returns the /metrics page as new malloc'd text (length in *len), or
     * NULL when it cannot (answered 500). */
    char *(*metrics)(void *privdata, size_t *len);
    /* Returns 1 when ready; else 0 with a one-line reason written into
     * reason (size n, NUL-terminated). */
    int (*ready)(void *privdata, char *reason, size_t n);
    void *privdata;
};

/* Listens on host (a numeric IPv4 or IPv6 address, copied) and port (1..65535)
 * and serves on loop (borrowed; must outlive the endpoint) with handlers
 * (copied; privdata borrowed). Returns the endpoint, or NULL with err
 * (LLMQ_EINVAL: bad address; LLMQ_EIO: cannot listen, e.g. port in use;
 * LLMQ_ENOMEM). */
struct llmq_admin_http *llmq_admin_http_start(struct ev_loop *loop, const char *host, int port,
                                              const struct llmq_admin_http_handlers *handlers,
                                              struct llmq_error *err);

/* Closes the listener and every connection and frees. Call while the loop
 * lives (before ev_loop_destroy). NULL is a no-op. */
void llmq_admin_http_free(struct llmq_admin_http *ah);

#endif
