/* The account's model fallbacks as the gateway knows them (P epfb,
 * lua/lib/endpoints.lua), so that a synchronous call's job, and a job of an
 * uploaded Batch file, carries its cost as its model's fallback, as a job
 * of llmq enqueue does (llmq_job_store_fallbacks). Read with one HGETALL
 * when the command connection becomes ready and every
 * GW_FALLBACKS_REFRESH_MS after: a fallback set meanwhile is charged the
 * job's own cost (docs/endpoints.md); a file's jobs carry the fallbacks
 * known when it was uploaded.
 * Runs on the gateway's loop, except gw_fallbacks_map_apply: a map taken
 * with gw_fallbacks_map is never changed (a read replaces it whole), so any
 * thread may read it and drop its reference. */
#ifndef LLMQ_GW_FALLBACKS_H
#define LLMQ_GW_FALLBACKS_H

#include <jansson.h>

#include "gateway.h"
#include "jobs/job.h"

#define GW_FALLBACKS_REFRESH_MS 5000

struct gw_fallbacks;

/* Starts keeping gw's fallbacks (none known until the first read). NULL
 * when out of memory. */
struct gw_fallbacks *gw_fallbacks_new(struct gw *gw);
/* Stops; free it after the command connection (its last reply names it).
 * NULL is a no-op. */
void gw_fallbacks_free(struct gw_fallbacks *f);

/* The command connection became ready: read now. */
void gw_fallbacks_refresh(struct gw_fallbacks *f);

/* Gives job (borrowed) its cost as its model's fallback when the model has
 * one (llmq_job_estimate_as, default cost options, as the job was
 * estimated). f may be NULL (nothing known). Returns LLMQ_OK, or as
 * llmq_job_estimate_as (job unchanged). */
enum llmq_rc gw_fallbacks_apply(const struct gw_fallbacks *f, struct llmq_job *job,
                                struct llmq_error *err);

/* A new reference to the fallbacks known now (model -> fallback model;
 * json_decref it, from any thread), or NULL when none are known. */
json_t *gw_fallbacks_map(const struct gw_fallbacks *f);

/* gw_fallbacks_apply with a map from gw_fallbacks_map (NULL: none). Pure:
 * any thread. */
enum llmq_rc gw_fallbacks_map_apply(const json_t *map, struct llmq_job *job,
                                    struct llmq_error *err);

#endif
