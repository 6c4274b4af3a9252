/* A streamed call (a job whose body says stream: true): the answer's events
 * are relayed to the gateway holding the client while they come, the call
 * is settled on the usage the API reported, and a client that leaves ends
 * the upstream call.
 *
 * Relay: Redis pub/sub, one channel per gateway (stream_relay.h). A job a
 * gateway's caller waits for names that gateway (job field lease, from the
 * dispatch reply); its events go to `P sse:<gateway id>`, which that
 * gateway subscribes once for all its streams, in frames of a message that
 * carries every stream this worker relays to it (jobs/stream_relay.h). A
 * job without a lease (a Batch line with stream: true, `llmq enqueue`)
 * runs as a collected call and only leaves its assembled result. The
 * worker learns that a client left from a cancel the gateway publishes on
 * the worker's channel `P ssw:<consumer>`, and that the gateway is gone
 * from a PUBLISH that reached nobody; either way the upstream transfer is
 * aborted (llmq_http_abort). Nothing is stored in Redis per chunk (no
 * stream key to trim or expire), no channel is subscribed per call, and
 * the work is one PUBLISH per gateway per tick. Why not a stream key with
 * XADD/XREAD BLOCK: the gateway would need a blocking read per call or one
 * shared stream per gateway that every worker writes and that must be
 * trimmed, and the worker would still need a way to learn that the client
 * left; a lost pub/sub message can only follow a lost connection, which
 * ends the stream anyway (the gateway checks the sequence numbers).
 *
 * Frames of a stream (kind, then the stream's sequence number, from 0 per
 * attempt; the payload):
 *   s  the request was sent (empty payload): a worker holds the job
 *   h  heartbeat, every LLMQ_STREAM_HEARTBEAT_MS without another frame
 *   d  events of the answer, exactly as the client must see them (SSE
 *      framing kept; the usage chunk and "usage":null removed when the
 *      client did not ask for usage)
 *   e  the answer ended well; the payload is its last events (may be empty;
 *      with no d before it, the call ended without a stream — an API error,
 *      a dead letter — and the client's answer is the job's result)
 *   x  the stream ended with an error after it started; the payload is the
 *      error event to send (empty when the API's own error event was the
 *      last d)
 *   r  the attempt ended before any event (a 429, a 5xx, a stale grant):
 *      the job is back in the queue and the client waits on
 * Coalescing: frames wait for the relay's next tick of --stream-coalesce-ms
 * (default 20) on the loop clock, shared by every relay of the worker (at
 * once after a quiet spell), so a gateway costs Redis at most one PUBLISH
 * per tick however many streams and tokens it carries; a stream's first
 * events wait at most one tick too. Why 20 ms: Redis's cost of a PUBLISH
 * is its wake-up (its own and the two readers'), some 150 µs on a shared
 * host against 10 µs of the command, whatever the bytes, so the tick is
 * what streams cost Redis; 20 ms keeps a streamed call within 3× a whole
 * one and the gaps the client sees within 20 ms of the API's
 * (tests/bench/bench_stream.sh, docs/BENCHMARKS.md). A draining worker sends an attempt's
 * last frames at once (its last settle may follow).
 *
 * Usage: the upstream request of a chat or completions stream always asks
 * for it (stream_options.include_usage: true); the Responses API's
 * response.completed carries it. The job is settled on that usage; a client
 * that left is settled on the usage if it came, else on the prompt estimate
 * plus one token per content event relayed.
 *
 * Ownership: struct worker_stream belongs to its job (job->stream) from
 * llmq_worker_stream_begin to llmq_worker_stream_end, a member of its relay
 * meanwhile. Everything runs on the worker's loop thread. */
#ifndef LLMQ_WORKER_STREAM_CALL_H
#define LLMQ_WORKER_STREAM_CALL_H

#include "classify.h"
#include "http/http.h"
#include "worker.h"

#define LLMQ_STREAM_HEARTBEAT_MS 1000

struct worker_stream;

/* For a job whose body asks for a stream (else does nothing and returns 0):
 * makes job->stream, rewrites job->body so the upstream request asks for
 * usage, and sets req's data callback and transfer handle. Returns 0, or -1
 * without memory (job->stream stays NULL: the call runs collected). */
int llmq_worker_stream_begin(struct llmq_worker *w, struct worker_job *job,
                             struct llmq_http_request *req);

/* The request was submitted: announces it to the gateway (frame s). */
void llmq_worker_stream_sent(struct worker_job *job);

/* The call of job (which has a stream) ended with resp, classified c (both
 * borrowed): decides job->settle — itself when the stream reached the
 * client (or the client left), else as any call (call_decide.h), a
 * collected stream with the answer assembled from its events as its result
 * — then sends the last frames and frees job->stream. Returns 1 when the
 * stream decided, 0 when c did. */
int llmq_worker_stream_finish(struct llmq_worker *w, struct worker_job *job,
                              const struct llmq_http_response *resp,
                              const struct llmq_call_class *c);

/* After the settle is decided: sends the last frames (resp NULL: nothing
 * was sent) and frees job->stream (NULL-safe: a job without a stream is
 * left alone). */
void llmq_worker_stream_end(struct worker_job *job, const struct llmq_http_response *resp);

#endif
