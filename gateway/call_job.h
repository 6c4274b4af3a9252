/* The job of one call a caller waits for, synchronous (calls.c) or streamed
 * (stream.c): made from the request, pushed under this gateway's lease,
 * cancelled, and answered from its result line. One place for what both kinds
 * of call do the same way; each keeps its own waiting and timers.
 *
 * Contract: loop thread only. The functions that answer r do so once
 * (gw_respond*); the caller then ends its call as after any answer. r is
 * borrowed; the push is a step of it (request_step.h). */
#ifndef LLMQ_GW_CALL_JOB_H
#define LLMQ_GW_CALL_JOB_H

#include <stddef.h>

#include "jobs/job.h"
#include "jobs/job_store.h"
#include "redis/script.h"

struct gw;
struct gw_call;
struct gw_request;

/* Makes *job from the call's parsed body (call->body, borrowed: the one
 * parse, gw_call_decode) with the request's own terms (its key's priority,
 * the body's user, a deadline of --max-wait-ms), then the key's policy
 * (key_policy.h). Returns 0, or -1 after answering r (400, 413, 403...). */
int gw_call_job_make(struct gw_request *r, const struct gw_call *call, struct llmq_job *job);

/* Pushes job under this gateway's lease (lease.h: killed, the gateway leaves
 * no job that is sent for nobody) and r's key id (its spend budgets,
 * lua/lib/budget.lua); cb as llmq_job_store_push_async, which it is (a step
 * of r: request_step.h).
 * job and out must live until cb. */
enum llmq_rc gw_call_job_push(struct gw_request *r, const struct llmq_job *job,
                              struct llmq_job_outcome *out, llmq_job_store_push_cb *cb, void *ud,
                              struct llmq_error *err);

/* What a push's callback got: 0 when the job is queued (counted), -1 after
 * answering r (400 model_not_priced when a USD budget applies to a model with
 * no price, else 503: Redis failed or the id was taken). */
int gw_call_job_pushed(struct gw_request *r, enum llmq_rc rc, const struct llmq_error *err,
                       const struct llmq_job_outcome *out);

/* Runs lua/job_cancel.lua for job id; cb NULL: fire and forget. r: the
 * request cb touches (a step of it, request_step.h), or NULL. Returns
 * LLMQ_OK when sent (cb will run), else an rc (no Redis). */
enum llmq_rc gw_call_job_cancel(struct gw *gw, const char *id, llmq_script_cb *cb, void *ud,
                                struct gw_request *r);

/* What job_cancel's reply says. */
enum gw_cancel_outcome {
    GW_CANCEL_UNSENT, /* cancelled before it was sent: never will be */
    GW_CANCEL_SENT,   /* already sent: its answer will come */
    GW_CANCEL_ENDED,  /* it ended meanwhile: read its result */
    GW_CANCEL_FAILED, /* no usable reply (Redis failed) */
};
enum gw_cancel_outcome gw_call_job_cancel_outcome(const redisReply *rep);

/* Answers r from the result line of job job_id: the API's own answer, or the
 * error of a job that ended without one (expired, budget, never fits...). */
void gw_call_respond_result(struct gw_request *r, const char *job_id, const char *line, size_t len);

/* The 429 (with retry-after) of a call that waited --max-wait-ms unsent. */
void gw_call_respond_waited_too_long(struct gw_request *r);

#endif
