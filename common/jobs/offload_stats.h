/* What offload holds per model and what it has done (lua/offload_stats.lua;
 * docs/DESIGN.md §3.10), as JSON, for `llmq status`, `llmq top` and the
 * worker's /metrics: one decoder of the script's reply for all three.
 *
 * Each element of the array is an object:
 *   {"model", "mode", "staged", "offloaded", "enqueued_tokens",
 *    "queue_limit_tokens" (null when none is set), "batches": {state: n, ...}
 *    (unfinished provider batches by state), "staged_ever", "offloaded_ever",
 *    "done_ever", "failed_ever", "saved_usd" (list price less batch price of
 *    the usage settled), "batches_ended"}. */
#ifndef LLMQ_JOBS_OFFLOAD_STATS_H
#define LLMQ_JOBS_OFFLOAD_STATS_H

#include <hiredis/hiredis.h>
#include <jansson.h>

#include "llmq/error.h"

/* Decodes r (borrowed), the reply of lua/offload_stats.lua, into a new
 * array of the objects above; entries of the wrong shape are skipped.
 * Returns NULL when r is no array (an error reply, a lost connection). */
json_t *llmq_offload_stats_json(const redisReply *r);

/* Runs lua/offload_stats.lua on c (synchronous; borrowed) for the account
 * of prefix (borrowed) and decodes it. Returns a new array, or NULL with
 * err set. */
json_t *llmq_offload_stats_read(redisContext *c, const char *prefix, struct llmq_error *err);

#endif
