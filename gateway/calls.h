/* Synchronous calls (calls.c): POST /v1/chat/completions, /v1/embeddings,
 * /v1/responses, /v1/completions, each one job the caller waits for. Runs on
 * the gateway's loop. */
#ifndef LLMQ_GW_CALLS_H
#define LLMQ_GW_CALLS_H

struct gw_request;
struct gw_waiter;

/* The route handler (router.h): r's key is checked and its body whole. */
void gw_calls_handle(struct gw_request *r);

/* Shutdown, for every waiter (gw_waiters_each): the caller gets a 503 and its
 * job, if not sent, is cancelled. */
void gw_calls_shutdown_one(struct gw_waiter *w);

#endif
