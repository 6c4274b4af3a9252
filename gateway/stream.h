/* Streamed calls (stream: true on /v1/chat/completions, /v1/completions,
 * /v1/responses): the call waits in the queue as a synchronous one does
 * (calls.c), then the answer's events reach the client as the worker relays
 * them, in the API's own framing (text/event-stream).
 *
 * Relay: the worker publishes the events on the job's pub/sub channel
 * `P sse:<job id>` (worker/stream_call.h has the messages and why pub/sub).
 * This gateway keeps one more Redis connection in subscribe mode for all of
 * its streams, and subscribes to a call's channel before it enqueues the
 * job (the enqueue waits for the subscription's confirmation, so the
 * worker's first message cannot come before it). Leaving the channel (the
 * client hung up, the stream ended) is what the worker's next publish sees:
 * it aborts the upstream call.
 *
 * What the client gets:
 *   - before any event: the answer of a synchronous call (an API error with its
 *     status, a 429 after --max-wait-ms in the queue, a 503 without Redis);
 *     a 429 from the API is retried by the worker meanwhile;
 *   - then 200 text/event-stream and the events as they come, each written
 *     as it arrives (no buffering beyond the worker's few milliseconds);
 *   - a stream that breaks off — the API's error, the worker gone silent
 *     for GW_STREAM_WATCHDOG_MS (it sends a heartbeat every second), the
 *     relay connection lost, a message missing, this gateway stopping —
 *     ends with an error event in the API's shape, never a silent cut.
 *
 * Memory per stream: its request, a job copy and the bytes relayed but not
 * yet written to the client socket.
 *
 * Threads: the gateway's loop only. Lifetime: the stream's state is the
 * request's (r->state), freed with its last reference. */
#ifndef LLMQ_GW_STREAM_H
#define LLMQ_GW_STREAM_H

#include <stdio.h>

#include "gateway.h"

#define GW_STREAM_WATCHDOG_MS 5000

struct gw_request;
struct gw_streams;

/* Sets up the relay connection of gw (on gw->loop, to gw->url). Returns
 * NULL with err without memory. */
struct gw_streams *gw_streams_new(struct gw *gw, struct llmq_error *err);

/* Ends every stream (an error event; a waiting one gets a 503 and its job,
 * if unsent, is cancelled): at shutdown, before the server stops. */
void gw_streams_shutdown(struct gw_streams *ss);

/* Closes the relay connection and frees ss (NULL-safe). */
void gw_streams_free(struct gw_streams *ss);

/* 1 while the relay connection is up and subscribed (readyz); else 0 with
 * *why the connection's last error ("" none; borrowed). */
int gw_streams_ready(const struct gw_streams *ss, const char **why);

/* Appends the streaming metrics (Prometheus text) to f. */
void gw_streams_metrics(const struct gw_streams *ss, FILE *f);

/* The handler of a call whose body says "stream": true (calls.c decided:
 * the body was decoded by gw_call_decode). */
void gw_stream_handle(struct gw_request *r);

#endif
