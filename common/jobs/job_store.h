/* Jobs in Redis, producer side: pushing validated jobs (pipelined, through
 * lua/enqueue.lua), reading results, waiting for jobs to end. The key layout
 * is common/redis/keys.h. Synchronous hiredis: for the CLI and the producer API,
 * never the worker's event loop. */
#ifndef LLMQ_JOB_STORE_H
#define LLMQ_JOB_STORE_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#include "jobs/job.h"

/* Jobs per EVALSHA of enqueue.lua and calls per pipelined round: a call per
 * job would spend most of Redis' time on script entry; a round bounds the
 * memory of replies in flight. */
#define LLMQ_JOB_STORE_JOBS_PER_CALL 64
#define LLMQ_JOB_STORE_CALLS_PER_ROUND 64
/* Calls of one asynchronous push in flight at most (llmq_job_store_push_async). */
#define LLMQ_JOB_STORE_ASYNC_WINDOW 4

/* What enqueue did with one job. */
struct llmq_job_outcome {
    int created;    /* 1: new job; 0: the id existed, nothing written */
    char state[16]; /* "queued", or the existing job's state */
};

/* Makes c ready to push to the account of prefix (borrowed): creates the
 * consumer group "workers" on the three queue streams when missing (from id
 * 0, MKSTREAM) and loads the scripts' library when Redis does not have it
 * (llmq_script_ensure_loaded). Once per connection. */
enum llmq_rc llmq_job_store_prepare(redisContext *c, const char *prefix, struct llmq_error *err);

/* Pushes jobs[0..n) (borrowed) in pipelined rounds; out[i] (n entries) gets
 * each outcome. Returns LLMQ_OK, or LLMQ_EREDIS/LLMQ_ESCRIPT after which an
 * unknown part was written (ids make pushing again safe). */
enum llmq_rc llmq_job_store_push(redisContext *c, const char *prefix, const struct llmq_job *jobs,
                                 size_t n, struct llmq_job_outcome *out, struct llmq_error *err);

/* Before a push: gives each of jobs[0..n) whose model has a fallback model
 * (P epfb, one HGETALL on c; lua/lib/endpoints.lua) its cost as that model
 * (llmq_job_estimate_as with opt, the cost options the jobs were estimated
 * with; NULL: defaults), which the push stores with the job (job field fb)
 * and dispatch charges when the fallback serves it. A fallback set after the
 * push is charged the job's own cost. Returns LLMQ_OK; LLMQ_EREDIS; or as
 * llmq_cost_estimate. */
enum llmq_rc llmq_job_store_fallbacks(redisContext *c, const char *prefix, struct llmq_job *jobs,
                                      size_t n, const struct llmq_cost_options *opt,
                                      struct llmq_error *err);

/* Told once when an asynchronous push has ended: rc LLMQ_OK when every call
 * was answered (the outcomes are filled), else the first failure (err, borrowed
 * for the call; an unknown part may have been written: pushing again is safe). */
typedef void llmq_job_store_push_cb(enum llmq_rc rc, const struct llmq_error *err, void *ud);

/* How a push's jobs wait (llmq-gateway; lua/enqueue.lua's options). */
struct llmq_job_gate {
    int held;           /* 1: written with state held, queued nowhere, until
                         * lua/batch_stage.lua commits (or aborts) their batch */
    const char *lease;  /* NULL, or a gateway lease name (borrowed): dispatch
                         * cancels the jobs once P gw:lease:<name> is gone */
    const char *key_id; /* NULL, or the gateway key's id (16 hex digits of its
                         * SHA-256, borrowed): its spend budgets apply */
};

/* llmq_job_store_push with gate (NULL: none, borrowed for the call) applied
 * to every job, as llmq_job_store_push_async takes it: a synchronous
 * producer of jobs a gateway holds (tests standing in for a gateway). */
enum llmq_rc llmq_job_store_push_gated(redisContext *c, const char *prefix,
                                       const struct llmq_job_gate *gate,
                                       const struct llmq_job *jobs, size_t n,
                                       struct llmq_job_outcome *out, struct llmq_error *err);

/* The same push as llmq_job_store_push (same script, same arguments) on an
 * asynchronous connection (borrowed): for event loops (llmq-gateway). gate
 * (NULL: none, copied) applies to every job; prefix is copied. At most
 * LLMQ_JOB_STORE_ASYNC_WINDOW calls (of LLMQ_JOB_STORE_JOBS_PER_CALL jobs)
 * are in flight, the next sent as one is answered, on the connection's
 * current context when ac belongs to a llmq_redis_async (it may follow a
 * MOVED). jobs and out (n entries) must live until cb runs (jobs are read
 * only while this runs when n <= LLMQ_JOB_STORE_JOBS_PER_CALL *
 * LLMQ_JOB_STORE_ASYNC_WINDOW). Returns LLMQ_OK, after which cb runs exactly
 * once, from the loop, never before this returns; otherwise cb never runs. */
enum llmq_rc llmq_job_store_push_async(redisAsyncContext *ac, const char *prefix,
                                       const struct llmq_job_gate *gate,
                                       const struct llmq_job *jobs, size_t n,
                                       struct llmq_job_outcome *out, llmq_job_store_push_cb *cb,
                                       void *ud, struct llmq_error *err);

/* Reads the result of id: on LLMQ_OK *line is new (free with free) and *dead
 * (may be NULL) 1 when the job is dead. LLMQ_ENOTFOUND when there is none. */
enum llmq_rc llmq_job_store_result(redisContext *c, const char *prefix, const char *id, char **line,
                                   int *dead, struct llmq_error *err);

/* Callbacks of a wait; data borrowed for each call. */
struct llmq_job_waiter {
    void (*on_result)(const char *id, int dead, const char *line, void *ud);
    void (*on_tick)(size_t done, size_t total, void *ud); /* every tick_ms, may be NULL */
    void *ud;
    int tick_ms;      /* 0: 1000 */
    int max_block_ms; /* longest blocking read, under the socket timeout; 0: 2000 */
};

/* Waits until every job of ids[0..n) (borrowed; repeats count once) has a
 * result, reporting each once through w (results already there first).
 * timeout_ms < 0: no limit. *n_done (may be NULL): jobs reported. Returns
 * LLMQ_OK, LLMQ_ETIMEOUT, LLMQ_EREDIS or LLMQ_ENOMEM. */
enum llmq_rc llmq_job_store_wait(redisContext *c, const char *prefix, const char *const *ids,
                                 size_t n, long long timeout_ms, const struct llmq_job_waiter *w,
                                 size_t *n_done, struct llmq_error *err);

/* A counter of P stats (http_429, insufficient_quota, ...): 0 when unset,
 * not an integer, or Redis fails. */
long long llmq_job_store_stat(redisContext *c, const char *prefix, const char *field);

/* 1 when the account has response cache defaults or namespaces (P
 * cachecfg, `llmq cache set`), or Redis fails to say: the producer then
 * computes the key of jobs that ask nothing (llmq_job_defaults
 * cache_defaults), so Redis can apply a default; 0 when it has none. */
int llmq_job_store_cache_defaults(redisContext *c, const char *prefix);

/* An integer field of P settings, or def when unset or not an integer. */
long long llmq_job_store_setting(redisContext *c, const char *prefix, const char *field,
                                 long long def);

#endif
