/* What a running gateway is made of, put together in one place: the two
 * Redis connections, the lease, the waiters, the offload thread and the HTTP
 * servers with the router's hooks (router.h). main.c and the tests that run
 * a gateway in their own process call these two.
 *
 * Threads: the loop's thread only (the offload thread is started and joined
 * here). */
#ifndef LLMQ_GW_SERVICE_H
#define LLMQ_GW_SERVICE_H

#include "gateway.h"
#include "llmq/error.h"

/* Starts everything of gw (gw_init done) on gw->loop: serving on
 * --listen once this returns (the bound port in *port when not NULL), and on
 * --metrics-listen when set. Returns 0; or, with err naming what failed
 * (everything started is stopped again), 2 when the configuration cannot be
 * served (an address that cannot be bound, an unreadable TLS file) and 1
 * otherwise. */
int gw_service_start(struct gw *gw, int *port, struct llmq_error *err);

/* Stops gw: waiting callers get a 503 (their jobs, if unsent, are
 * cancelled), uploads still being checked a 503, answers already queued
 * reach their sockets, then the servers, the connections and the lease stop.
 * After it, gw holds nothing but what gw_init filled. */
void gw_service_stop(struct gw *gw);

#endif
