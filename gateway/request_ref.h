/* The reference count of a struct gw_request, for its two owners only: the
 * server (http.c: its one reference from the head to MHD's completion) and
 * the request's steps (request_step.c: one per step in flight). Nothing
 * else includes this header (http.h, "Lifetime"). Loop thread only. */
#ifndef LLMQ_GW_REQUEST_REF_H
#define LLMQ_GW_REQUEST_REF_H

struct gw_request;

void gw_request_hold(struct gw_request *r);
/* Drops a reference; the last one frees r and its state (r->state_free). */
void gw_request_release(struct gw_request *r);

#endif
