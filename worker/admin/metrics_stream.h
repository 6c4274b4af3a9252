/* Streamed calls on the worker's /metrics (stream_call.c counts them):
 * streams relayed now, how they ended, the events (chunks) and relay
 * messages sent to the gateways, time to the first event and the stream's
 * duration, per account.
 *
 *   llmq_worker_streams_in_progress{account}    gauge: relayed streams running
 *   llmq_worker_streams_total{account,end}      counter: end = completed (the
 *       answer ended well), error (broke off: the API's error, a cut),
 *       aborted (the client or its gateway left: upstream aborted),
 *       collected (nobody relays it: a Batch line with stream: true)
 *   llmq_worker_stream_events_total{account}    counter: events relayed
 *   llmq_worker_stream_messages_total{account}  counter: relay messages (one
 *       PUBLISH carries the events of every stream to one gateway)
 *   llmq_worker_stream_ttft_seconds{account}    histogram: request sent to
 *       its first event from the API
 *   llmq_worker_stream_duration_seconds{account} histogram: first event to
 *       the end of the attempt
 *
 * The hooks take the families (llmq_worker_metrics_of_streams, in
 * metrics_worker.h) and are no-ops for NULL, without metrics, like
 * metrics_worker.h's; they do not import metrics_worker.h, which owns them. Threads: the worker's
 * loop. */
#ifndef LLMQ_WORKER_METRICS_STREAM_H
#define LLMQ_WORKER_METRICS_STREAM_H

#include "admin/metrics.h"

struct worker_stream_metrics;

/* Registers the stream families in reg (borrowed; it must outlive the
 * result). Returns new, or NULL without memory. */
struct worker_stream_metrics *llmq_worker_stream_metrics_new(struct llmq_metrics *reg);

/* Frees s; NULL is a no-op. */
void llmq_worker_stream_metrics_free(struct worker_stream_metrics *s);

/* A relayed stream's first event came ttft_s after its request was sent
 * (the stream is in progress from here). */
void llmq_worker_metrics_stream_first(struct worker_stream_metrics *s, const char *account,
                                      double ttft_s);

/* n more events were relayed. */
void llmq_worker_metrics_stream_events(struct worker_stream_metrics *s, const char *account,
                                       long n);

/* One relay message was sent. */
void llmq_worker_metrics_stream_message(struct worker_stream_metrics *s, const char *account);

/* A stream's attempt ended as end (see above); duration_s >= 0 when its first
 * event had come (it leaves the in-progress gauge), else -1. */
void llmq_worker_metrics_stream_end(struct worker_stream_metrics *s, const char *account,
                                    const char *end, double duration_s);

#endif
