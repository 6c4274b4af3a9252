/* What the dashboard reads on demand and what its admins do, each through
 * the script the CLI uses for the same thing, so a click and a command are
 * one operation:
 *   GET  api/dead?model=&reason=   dead letters (lua/dead_list.lua)
 *   POST api/dead/retry, api/dead/purge  {"ids": [...]} or {"all": true,
 *        "model": M, "reason": R}: the dead jobs named, or every one
 *        matching (up to GW_DASH_DEAD_MAX), through lua/dead_retry.lua /
 *        dead_purge.lua (`llmq dead retry|purge`)
 *   POST api/endpoint  {"name", "op": "enable"|"disable", "why"}
 *        (lua/endpoint_admin.lua, `llmq endpoints enable|disable`)
 *   GET  api/job?id=   one job's life (lua/job_fields.lua, the body unpacked,
 *        its calls one by one); id: a job id, or a custom_id that is no
 *        name, taken as `llmq enqueue` makes its id (jobs/job_id.h); when
 *        no job has that id, the custom_id of a job of one of the newest
 *        1000 gateway Batches (of the viewer's tenant; lua/job_find.lua):
 *        the job when one has it, {"matches": [job id, ...]} when several
 *   GET  api/batches   the gateway's batches with their progress (list.h,
 *        newest first; a tenant's viewer its tenant's)
 *   GET  api/budgets   spend budgets with their spend this period and the jobs
 *        parked on them (lua/budget_list.lua, `llmq budgets`; a tenant's
 *        viewer: its tenant's and its users')
 *   GET  api/pbatches  provider batches (lua/pbatch_list.lua, `llmq offload
 *        list`; none for a tenant's viewer)
 * A tenant's viewer (or admin) reads and acts on its tenant's jobs only and
 * cannot touch endpoints (they are the account's). Every POST has had its
 * session, role (admin) and CSRF token checked by dashboard.c.
 * Runs on the gateway's loop. */
#ifndef LLMQ_GW_DASH_ACTIONS_H
#define LLMQ_GW_DASH_ACTIONS_H

#include "dashboard/session.h"

#define GW_DASH_DEAD_MAX 1000

struct gw_request;

void gw_dash_dead_list(struct gw_request *r, const struct gw_dash_viewer *v);
/* retry: 1 retry, 0 purge */
void gw_dash_dead_act(struct gw_request *r, const struct gw_dash_viewer *v, int retry);
void gw_dash_endpoint_act(struct gw_request *r, const struct gw_dash_viewer *v);
void gw_dash_job_get(struct gw_request *r, const struct gw_dash_viewer *v);
void gw_dash_batches(struct gw_request *r, const struct gw_dash_viewer *v);
void gw_dash_pbatches(struct gw_request *r, const struct gw_dash_viewer *v);
void gw_dash_budgets(struct gw_request *r, const struct gw_dash_viewer *v);

#endif
