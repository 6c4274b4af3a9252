/* The Batch API (batches.c): POST /v1/batches, GET /v1/batches[/{id}],
 * POST /v1/batches/{id}/cancel, and finishing or rolling back batches a
 * gone gateway left half-created. Runs on the gateway's loop. */
#ifndef LLMQ_GW_BATCHES_H
#define LLMQ_GW_BATCHES_H

struct gw;
struct gw_request;

/* The route handlers (router.h): r's key is checked and its body whole;
 * r->m.id is the {id} of the path where the route has one. */
void gw_batches_create(struct gw_request *r); /* POST /v1/batches */
void gw_batches_list(struct gw_request *r);   /* GET /v1/batches */
void gw_batches_get(struct gw_request *r);    /* GET /v1/batches/{id} */
void gw_batches_cancel(struct gw_request *r); /* POST /v1/batches/{id}/cancel */

/* Finishes (status other than validating: the batch was already visible) or
 * rolls back (validating) batch id that gw now holds, unless gw is creating
 * it itself. The lease's on_orphan (lease.h). */
void gw_batches_recover(struct gw *gw, const char *id, const char *status);

/* 1 when a batch with this status (NULL: none) may be seen: a batch being
 * created (validating) is hidden from every read until it is whole. */
int gw_batch_visible(const char *status);

#endif
