/* Calls (calls.c): POST /v1/chat/completions, /v1/embeddings,
 * /v1/responses, /v1/completions, each one job the caller waits for:
 * synchronous here, streamed ("stream": true) in stream.h. Runs on the
 * gateway's loop. */
#ifndef LLMQ_GW_CALLS_H
#define LLMQ_GW_CALLS_H

struct gw_request;

/* The route handler of GW_ROUTE_CALL (router.h): r's key is checked and its
 * body whole. Decodes the body once (decode.h gw_call_decode, counted in
 * gw->stats.call_bodies_decoded) and starts the synchronous or the streamed
 * call with what it decoded. */
void gw_calls_handle(struct gw_request *r);

#endif
