/* The asynchronous steps of a request: every operation that will touch a
 * struct gw_request (or its r->state) from a later callback is sent through
 * one of these functions. Each keeps r until its callback has returned, then
 * lets it go; this is the only place besides the server (http.c) that counts
 * references to a request (http.h, "Lifetime"). A step sent from inside
 * another step's callback keeps r across the chain, so a multi-step
 * operation (a list page, an upload's store, a batch's creation) needs no
 * reference of its own.
 *
 * Each function sends like the call it wraps and returns what that returns;
 * on failure its callback never runs and nothing is kept. Its callback gets
 * ud, exactly once, as the wrapped call promises. r NULL: a step of no request
 * (the wrapped call alone; a batch recovered for a gone gateway). Threads:
 * the gateway's loop only. */
#ifndef LLMQ_GW_REQUEST_STEP_H
#define LLMQ_GW_REQUEST_STEP_H

#include <hiredis/async.h>
#include <stdarg.h>

#include "jobs/job_result.h"
#include "jobs/job_store.h"
#include "redis/script.h"

struct gw_offload;
struct gw_offload_task;
struct gw_request;

/* redisAsyncCommand on ac (a plain command: MULTI/EXEC blocks stay on
 * ac). Returns REDIS_OK or REDIS_ERR. */
int gw_step_command(struct gw_request *r, redisAsyncContext *ac, redisCallbackFn *cb, void *ud,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* redisAsyncCommandArgv. Returns REDIS_OK or REDIS_ERR. */
int gw_step_command_argv(struct gw_request *r, redisAsyncContext *ac, redisCallbackFn *cb, void *ud,
                         int argc, const char **argv, const size_t *lens);

/* A Redis command for r on the gateway's connection, a cluster's
 * redirection followed (a key or file look-up does not fail for a failover
 * or a slot on the move): cb runs once with privdata r. When Redis is not
 * ready or the command cannot be sent, answers r 503 and cb never runs.
 * Returns 0 or -1. */
int gw_request_command(struct gw_request *r, redisCallbackFn *cb, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* llmq_script_run_async. */
enum llmq_rc gw_step_script(struct gw_request *r, redisAsyncContext *ac, enum llmq_script_id id,
                            int nkeys, int argc, const char **argv, const size_t *lens,
                            llmq_script_cb *cb, void *ud);

/* llmq_job_store_push_async. */
enum llmq_rc gw_step_push(struct gw_request *r, redisAsyncContext *ac, const char *prefix,
                          const struct llmq_job_gate *gate, const struct llmq_job *jobs, size_t n,
                          struct llmq_job_outcome *out, llmq_job_store_push_cb *cb, void *ud,
                          struct llmq_error *err);

/* llmq_job_result_read_async. */
enum llmq_rc gw_step_result_read(struct gw_request *r, redisAsyncContext *ac, const char *prefix,
                                 const char *id, llmq_job_result_cb *cb, void *ud,
                                 struct llmq_error *err);

/* gw_offload_submit of t (offload.h): r is kept until t->done has returned.
 * Returns 0, or -1 without memory (t not submitted). */
int gw_step_offload(struct gw_request *r, struct gw_offload *o, struct gw_offload_task *t);

/* A wait with no callback of its own in flight (a call waiting for its
 * job's end, call_wait.h): r is kept from gw_step_wait_begin to
 * gw_step_wait_end, called once each. */
void gw_step_wait_begin(struct gw_request *r);
void gw_step_wait_end(struct gw_request *r);

#endif
