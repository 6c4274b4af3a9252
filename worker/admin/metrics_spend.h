/* Spend on the worker's /metrics: every budget's limit, spend this period,
 * what is left and the jobs waiting on it, today's spend per model and
 * tenant (jobs, tokens, USD), and what the response cache saved (its
 * requests by hit, miss and coalesced; answers and bytes stored; tokens
 * saved), all shared state read from Redis by a poll (lua/budget_list.lua,
 * P spend:<day> and P caches, keys.h) next to the queue depths: every worker
 * of an account reports the same values.
 *
 * One struct per worker; the poll's callbacks point into it, so it is freed
 * only after the accounts' Redis connections (as metrics_worker.h says). */
#ifndef LLMQ_WORKER_METRICS_SPEND_H
#define LLMQ_WORKER_METRICS_SPEND_H

#include <hiredis/async.h>

#include "admin/metrics.h"

struct worker_spend_metrics;

/* Registers the spend families in reg (borrowed; it must outlive the
 * result). Returns new, or NULL without memory. */
struct worker_spend_metrics *llmq_worker_spend_metrics_new(struct llmq_metrics *reg);

/* Sends account's reads on ac (borrowed), prefix its key prefix (copied);
 * a read still unanswered for that account (index slot < 16) is not sent
 * again. Replies set the gauges from the loop. */
void llmq_worker_spend_metrics_poll(struct worker_spend_metrics *s, int slot, redisAsyncContext *ac,
                                    const char *prefix, const char *account);

/* Frees s; NULL is a no-op. */
void llmq_worker_spend_metrics_free(struct worker_spend_metrics *s);

#endif
