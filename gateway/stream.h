/* Streamed calls (stream: true on /v1/chat/completions, /v1/completions,
 * /v1/responses): the call waits in the queue as a synchronous one does
 * (calls.c), then the answer's events reach the client as the worker relays
 * them, in the API's own framing (text/event-stream).
 *
 * Relay: this gateway subscribes once, on a Redis connection of its own,
 * to its channel `P sse:<gateway id>` (its jobs' field lease names it), and
 * the workers publish there the frames of every stream they relay to it
 * (jobs/stream_relay.h, worker/stream_call.h); each frame is routed to its
 * stream by job id. A call is registered before its job is enqueued, so no
 * frame can come first. When the client hangs up (or a frame comes for a
 * job that has no stream here any more) the worker is told on its channel
 * `P ssw:<worker>` and aborts the upstream call. /readyz is 503 while the
 * relay is not subscribed, and streamed calls get 503s then.
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
 *     ends with an error event in the API's shape, never a silent cut
 *     (before its first event: a 502);
 *   - a stalled Redis is no silent worker: while Redis looks stalled or
 *     away from here too (the command connection or the subscription
 *     down, a PING sent every second while streams run unanswered for
 *     GW_STREAM_PROBE_SLOW_MS), and for GW_STREAM_STALL_GRACE_MS after, a
 *     silent stream waits on, up to LLMQ_RELAY_HOLD_MS plus the watchdog
 *     (so does one whose worker still holds its channel P ssw:<worker>,
 *     PUBSUB NUMSUB: a live worker on a busy host; a killed one lost it):
 *     its worker holds the frames Redis did not take and sends them again
 *     (worker/stream_relay.h); repeats are dropped by sequence number. The
 *     subscription's own command timeout is at least LLMQ_RELAY_HOLD_MS, so
 *     a stall does not drop it (what is published meanwhile would be lost).
 *
 * Memory per stream: its request, a job copy and the bytes relayed but not
 * yet written to the client socket.
 *
 * Threads: the gateway's loop only. Lifetime: the stream's state is the
 * request's (r->state, beginning with its struct gw_call_wait: call_wait.h),
 * freed with the request. */
#ifndef LLMQ_GW_STREAM_H
#define LLMQ_GW_STREAM_H

#include <stdio.h>

#include "gateway.h"

#define GW_STREAM_WATCHDOG_MS 5000
/* A stream whose job ended done before its relayed frames came waits for
 * them while the relay still delivers messages, up to this long after the
 * end (then its stored result answers as one body). */
#define GW_STREAM_DONE_WAIT_S 30.0
#define GW_STREAM_PROBE_SLOW_MS 1000
#define GW_STREAM_STALL_GRACE_MS 10000

struct gw_request;
struct gw_streams;

/* Sets up the relay subscription of gw (on gw->loop, to gw->url). Returns
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

/* Starts the streamed call of r, whose body calls.c decoded as call
 * (borrowed; "stream": true). */
struct gw_call;
void gw_stream_start(struct gw_request *r, const struct gw_call *call);

#endif
