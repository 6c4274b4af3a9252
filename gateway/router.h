/* The gateway's routes: one table from a decoded route (decode.h
 * gw_route_decode) to what runs it and whether it needs a key. The HTTP
 * server (http.h) calls the two hooks below; a new endpoint is a route in
 * decode.c and a row in router.c's table, with its handler in its own
 * module and header.
 *
 * Order of a request: its headers arrive -> gw_router_admit: a route that
 * needs a key has it checked (auth.h) before a byte of the body is read, so
 * a caller without a valid key is refused without the server taking its
 * upload -> the body is read whole -> gw_router_handle: the route's
 * handler. Runs on the gateway's loop. */
#ifndef LLMQ_GW_ROUTER_H
#define LLMQ_GW_ROUTER_H

#include "decode.h"

struct gw_request;

typedef void gw_handler_fn(struct gw_request *r);

struct gw_route_entry {
    enum gw_route route;
    gw_handler_fn *handle; /* answers r, at once or later */
};

/* The table's row of route (never NULL: unknown routes get the 404 row). */
const struct gw_route_entry *gw_router_entry(enum gw_route route);

/* The HTTP server's hooks (gw_http_start). */
void gw_router_admit(struct gw_request *r);  /* headers read: check the key */
void gw_router_handle(struct gw_request *r); /* body whole: run the route */

#endif
