/* The dashboard's view of an account for one moment, as JSON, made from one
 * reply of lua/top_snapshot.lua (the script `llmq top` reads too, whose
 * queue depths and endpoints are those of `llmq status` and `llmq endpoints
 * list`: lua/lib/views.lua), and what a tenant-scoped viewer may see of it.
 * Pure: no I/O; every function returns a new reference or NULL (no memory,
 * or a reply of another shape). */
#ifndef LLMQ_GW_DASH_SNAPSHOT_H
#define LLMQ_GW_DASH_SNAPSHOT_H

#include <hiredis/hiredis.h>
#include <jansson.h>

/* The snapshot of reply r (borrowed):
 *   {now_ms, stats: {done, dead, cancelled, http_429, insufficient_quota,
 *                    http_429_spurious (of the 429s, those whose headers
 *                    said the API's window had room), own_429_wait,
 *                    own_429_budget (429s llmq-gateway answered itself, not
 *                    the API: a call that waited --max-wait-ms, a call over
 *                    a spend budget; not among http_429)},
 *    in_flight, rows: [{model, tenant, queued, blocked, oldest_enq_ms}],
 *    buckets: [{name, requests_used, tokens_used, requests_limit,
 *               tokens_limit, period_ms}],
 *    minute: [{model, tenant, jobs, tokens}],
 *    queues: {<prio>: {queued, in_flight, oldest_enq_ms}}, delayed,
 *    dead_letters, workers: [{name, seen_ms_ago, in_flight, version (absent when
 *    the worker has not said), endpoints: [served; "" the implicit one]}],
 *    endpoints: {...}, users: [{tenant, user, queued, parked, jobs}] (each
 *    named user's jobs waiting, held by a limit or budget, and done in the
 *    last minute, of every model)} */
json_t *gw_dash_snapshot_from_reply(const redisReply *r);

/* What a viewer scoped to tenant sees of snap (borrowed): its rows, its
 * buckets ("<model>/t/<tenant>"), its minute and its users, nothing
 * account-wide. */
json_t *gw_dash_snapshot_for_tenant(const json_t *snap, const char *tenant);

/* The point of snap kept for the charts (15 minutes of them): {t, done,
 * http_429, insufficient_quota, http_429_spurious, own_429_wait,
 * own_429_budget, queued: {<prio>: n}, b: {<bucket>:
 * [requests_used, requests_limit, tokens_used, tokens_limit]}}: the
 * buckets of the rows and of every endpoint's models. */
json_t *gw_dash_snapshot_point(const json_t *snap);

/* The same point as a viewer scoped to tenant sees it (its buckets only). */
json_t *gw_dash_point_for_tenant(const json_t *point, const char *tenant);

#endif
