/* What a gateway key lets its caller run: the one decision every path that
 * creates a job from a key makes before anything is enqueued. Today's paths:
 * synchronous calls (calls.c) and every line of a batch (batches.c, before
 * the batch is written); a new one (streaming, another endpoint) calls
 * gw_key_policy_decide with what it is about to run, job or not.
 *
 * A key (P gw:key:<sha256>, `llmq keys create`, read by auth.c) restricts:
 *   models    a comma list; the job's model must be one of them exactly
 *             ("gpt-4o" allows neither "gpt-4o-mini" nor "gpt-4"); "" all.
 *             The only restriction that refuses: a request for another model
 *             is an error and nothing runs. It holds for the model that
 *             serves the job too: a fallback (`llmq endpoints fallback`) the
 *             list does not hold never serves the key's jobs, which wait for
 *             their own model instead (gw_key_policy_fallback).
 *   tenant    pinned: the job is the key's tenant whatever the request (a
 *             batch line's own "llmq" tenant) says; "" leaves the request's.
 *   user      pinned the same way: the key's user replaces the request's
 *             "user" field (and a batch line's "llmq" user); "" leaves it.
 *   priority  a ceiling: a job asking for more (a batch line's "llmq"
 *             priority) runs at the key's.
 *   endpoints pinned: the job runs only on those endpoints of its model
 *             (`llmq endpoints`), whatever a batch line's own pin says.
 * Tenant, user and priority are not refused but applied: they say whose
 * budget a job spends and how urgent it may be, not whether it may exist,
 * so a client that sends "user" for its own tracking keeps working and is
 * charged to the key's user.
 *
 * Not a path: uploading a file (POST /v1/files, purpose=batch) runs nothing,
 * and files are shared by every key of a tenant, so a key with one model may
 * upload a file that another key of the tenant is allowed to run. The check
 * is at batch creation, with the creating key.
 *
 * Pure: no I/O; nothing kept past a call. */
#ifndef LLMQ_GW_KEY_POLICY_H
#define LLMQ_GW_KEY_POLICY_H

#include "errors.h"
#include "jobs/job.h"
#include "llmq/llmq.h"

/* What a gateway key allows (auth.c fills it per request). Strings are ""
 * when unset. */
struct gw_key {
    char hash[65];
    char tenant[LLMQ_JOB_ID_MAX + 1];
    char user[LLMQ_JOB_ID_MAX + 1];
    enum llmq_priority priority;
    char models[2048];                          /* comma-separated, "" all */
    char endpoints[LLMQ_JOB_ENDPOINTS_MAX + 1]; /* the pin of its jobs, comma-separated, "" any */
    /* the response cache of its calls without x-llmq-cache (llmq keys
     * create --cache): "use", "refresh", "off", or "" none; and their TTL
     * without x-llmq-cache-ttl (s; 0 the default) */
    char cache[8];
    long long cache_ttl_s;
};

/* What a request asks to run; on GW_KEY_ALLOWS, what it may run as.
 * Strings borrowed (NULL: none); the decision points them into the key. */
struct gw_job_terms {
    const char *model;
    const char *tenant;
    const char *user;
    enum llmq_priority priority;
};

enum gw_key_verdict {
    GW_KEY_ALLOWS = 0,
    GW_KEY_REFUSES,   /* *e: the caller's error (404 model_not_found, param "model") */
    GW_KEY_NO_MEMORY, /* *e: a 500 */
};

/* Decides whether key k may run t: GW_KEY_ALLOWS with t's tenant, user and
 * priority replaced by what k pins, or GW_KEY_REFUSES with *e. */
enum gw_key_verdict gw_key_policy_decide(const struct gw_key *k, struct gw_job_terms *t,
                                         struct gw_error *e);

/* Applies k's model list to the model that may serve j as its fallback
 * (call it after the fallback was set, gw_fallbacks_apply): with a list, j
 * may be served by no other model than its own and its fallback_model, which
 * is dropped when the list does not hold it (j->fallback_only = 1; dispatch
 * then never serves j as another fallback, lua/lib/sched_decide.lua);
 * without a list j is unchanged. owned: 1 when j owns its fallback_model
 * (freed when dropped), 0 when it borrows it (a batch's jobs, batch_input.h). */
void gw_key_policy_fallback(const struct gw_key *k, struct llmq_job *j, int owned);

/* The same decision for a job already built from a request or a batch line:
 * on GW_KEY_ALLOWS j's tenant, user and priority are what k pins (new
 * copies); otherwise j is unchanged and *e says why. */
enum gw_key_verdict gw_key_policy_apply(const struct gw_key *k, struct llmq_job *j,
                                        struct gw_error *e);

#endif
