/* An HTTP server on libmicrohttpd driven by a caller's libev loop: the glue
 * the gateway (gateway/http.c) and the worker's admin endpoint
 * (worker/admin/admin_http.c) share. It knows nothing of routes: the caller
 * gives MHD's own access handler and completion callback.
 *
 * How MHD runs: without MHD_USE_INTERNAL_POLLING_THREAD (MHD makes no thread)
 * and with MHD_USE_EPOLL, so all of MHD's sockets sit in one epoll fd that is
 * readable when any of them is ready. One ev_io watches that fd; after every
 * MHD_run (which never blocks) one ev_timer is re-armed to MHD_get_timeout
 * (0 when MHD has work pending without a socket event, as edge-triggered
 * epoll needs; else the nearest idle-connection timeout). A connection
 * resumed with llmq_httpd_resume is also run on the next loop iteration, so
 * its answer goes out at once.
 *
 * Threads: none. Every function must be called on the loop's thread, and
 * MHD's callbacks (access handler, completion, log) run there, from inside
 * this module's watchers.
 *
 * Callbacks: on_request and on_completed are MHD's (see microhttpd.h), with
 * their closure pointers; they may suspend a connection (the daemon is
 * started with MHD_ALLOW_SUSPEND_RESUME when the config asks for it) and must
 * not free the server.
 *
 * Slow clients: MHD's own timeout (idle_timeout_s) is an idle timeout, which
 * a client trickling a header line every few seconds never trips. With
 * head_timeout_ms a connection's request head must arrive whole within that
 * time of the connection's start (a kept-alive connection's next head within
 * idle_timeout_s of its previous answer, counted whole too); else the
 * connection is closed (its socket shut down: MHD sees the end and frees
 * it). With max_pending_heads, beyond that many connections waiting for a
 * head the oldest waiting one is closed, so sockets that never finish a head
 * cannot take every connection: the rest stay for requests that arrive
 * whole (probes, keyed calls). per_ip_limit caps connections per client
 * address (MHD_OPTION_PER_IP_CONNECTION_LIMIT).
 *
 * Ownership: the config is read during llmq_httpd_start only (strings
 * copied, closures and options borrowed: memory an option points to, such as
 * a TLS key, must live until llmq_httpd_free). The server owns the daemon and
 * its watchers. MHD's error messages go to the llmq log, prefixed with
 * log_name. */
#ifndef LLMQ_HTTPD_HTTPD_H
#define LLMQ_HTTPD_HTTPD_H

#include <microhttpd.h>

#include "llmq/error.h"

struct ev_loop;
struct llmq_httpd;

struct llmq_httpd_config {
    const char *host; /* a numeric IPv4 or IPv6 address */
    int port;         /* 1..65535, or 0 with allow_any_port: the kernel picks */
    int allow_any_port;
    int suspend_resume; /* 1: MHD_ALLOW_SUSPEND_RESUME */
    int tls;            /* 1: MHD_USE_TLS (certificate and key in options) */
    unsigned int max_connections;
    unsigned int idle_timeout_s;
    unsigned int head_timeout_ms;   /* 0: none (see the file comment) */
    unsigned int max_pending_heads; /* 0: no bound */
    unsigned int per_ip_limit;      /* connections per client address; 0: no bound */
    const char *log_name;           /* prefix of MHD's log lines, e.g. "admin http" */
    MHD_AccessHandlerCallback on_request;
    void *request_cls;
    MHD_RequestCompletedCallback on_completed; /* NULL: none */
    void *completed_cls;
    const struct MHD_OptionItem *options; /* more MHD options, MHD_OPTION_END-ended; NULL none */
};

/* Starts listening on cfg's address and serving on loop (borrowed; must
 * outlive the server). Writes the bound port to *bound when not NULL.
 * Returns the server, or NULL with err (LLMQ_EINVAL: bad address or port;
 * LLMQ_EIO: cannot listen, e.g. port in use or a bad TLS certificate;
 * LLMQ_ENOMEM). Messages start with "bad listen address" or "cannot listen
 * on HOST:PORT". */
struct llmq_httpd *llmq_httpd_start(struct ev_loop *loop, const struct llmq_httpd_config *cfg,
                                    int *bound, struct llmq_error *err);

/* Resumes a connection suspended with MHD_suspend_connection and runs MHD
 * on the next loop iteration so the connection is served at once. */
void llmq_httpd_resume(struct llmq_httpd *h, struct MHD_Connection *conn);

/* Closes conn (a connection of h's, borrowed) now: its socket is shut down,
 * MHD frees it on its next run (the completion callback runs). For a client
 * too slow to send its body. */
void llmq_httpd_close(struct MHD_Connection *conn);

/* Connections closed so far for a head that did not arrive in time, and
 * for too many heads pending (the oldest closed). */
void llmq_httpd_slow_counts(const struct llmq_httpd *h, unsigned long long *head_timeouts,
                            unsigned long long *pending_evicted);

/* Closes the listener and every connection (running on_completed for each)
 * and frees. Call while the loop lives. NULL is a no-op. */
void llmq_httpd_free(struct llmq_httpd *h);

#endif
