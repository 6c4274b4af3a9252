/* Offload on the worker's /metrics (docs/DESIGN.md §3.10): per account and
 * model the jobs staged and in provider batches now, the unfinished
 * provider batches by state, the provider's enqueued tokens against its
 * queue limit, and the counters of what offload did (jobs staged, put in a
 * provider batch, done, failed; batches ended; USD saved against the live
 * price). Shared state read from Redis by a poll (lua/offload_stats.lua,
 * jobs/offload_stats.h) next to the queue depths: every worker of an
 * account reports the same values. The counters follow Redis' (P stats):
 * each poll adds what they grew by since the last.
 *
 * One struct per worker; the poll's callbacks point into it, so it is freed
 * only after the accounts' Redis connections (as metrics_worker.h says). */
#ifndef LLMQ_WORKER_METRICS_OFFLOAD_H
#define LLMQ_WORKER_METRICS_OFFLOAD_H

#include <hiredis/async.h>

#include "admin/metrics.h"

struct worker_offload_metrics;

/* Registers the offload families in reg (borrowed; it must outlive the
 * result). Returns new, or NULL without memory. */
struct worker_offload_metrics *llmq_worker_offload_metrics_new(struct llmq_metrics *reg);

/* Sends account's read on ac (borrowed), prefix its key prefix (copied);
 * a read still unanswered for that account (index slot < 16) is not sent
 * again. The reply sets the series from the loop. */
void llmq_worker_offload_metrics_poll(struct worker_offload_metrics *s, int slot,
                                      redisAsyncContext *ac, const char *prefix,
                                      const char *account);

/* Frees s; NULL is a no-op. */
void llmq_worker_offload_metrics_free(struct worker_offload_metrics *s);

#endif
