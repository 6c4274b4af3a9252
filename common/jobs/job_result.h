/* The result of a job, as C code reads it: the one place that knows where it
 * is kept (common/redis/keys.h). A finished job's Batch output line is in
 * its ended record P res:<id> (its state, times, attempts, queue names and
 * reason, then the line, packed or JSON text: jobs/job_pack.h;
 * lua/lib/job_ended.lua has the format), written once by llmq_job_finish
 * (lua/lib/jobs.lua); a done or cancelled job is that record alone. The previous layout kept the
 * bare line there and the state and fin_ms in the hash P job:<id>; the one before kept the line in
 * the hash's field "result". The hash's fields are read in the same round (one HMGET of result,
 * state and fin_ms and one GET per job, pipelined) and used when P res:<id> is no record
 * (docs/upgrading.md). Every reader gets the line as text (unpacked).
 *
 * Synchronous reads are for the CLI, the producer API and tests (never the
 * worker's loop); the asynchronous one is for event loops (llmq-gateway). */
#ifndef LLMQ_JOB_RESULT_H
#define LLMQ_JOB_RESULT_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#include "llmq/error.h"

/* The field of P job:<id> that held the result in the previous layout (also
 * spelled in the Lua script dead_retry.lua). */
#define LLMQ_JOB_RESULT_FIELD "result"

/* One job's result. line: new (llmq_job_result_clear frees it; text,
 * NUL-terminated), NULL when the job has none; len its length. dead: 1 when
 * the job's state is dead. fin_ms: when it ended (unix ms, the record's or
 * the hash's fin_ms), -1 when unknown. */
struct llmq_job_result {
    char *line;
    size_t len;
    int dead;
    long long fin_ms;
};

/* Frees r->line and resets r; r may be NULL. */
void llmq_job_result_clear(struct llmq_job_result *r);

/* Reads the results of ids[0..n) (borrowed) on c in one pipelined round;
 * out[i] (n entries, caller-owned) gets each. Returns LLMQ_OK; LLMQ_EINVAL
 * when an id cannot name a key (err names it; nothing was sent) or a stored
 * line is damaged; LLMQ_EREDIS when Redis fails or answers an error (e.g. a
 * job key that is no hash; every reply is still read, so c stays usable
 * unless the connection broke); LLMQ_ENOMEM. On failure every out[i] is
 * cleared. */
enum llmq_rc llmq_job_result_read(redisContext *c, const char *prefix, const char *const *ids,
                                  size_t n, struct llmq_job_result *out, struct llmq_error *err);

/* Told the outcome of an asynchronous read, once: rc LLMQ_OK with line (and
 * len, dead) when there is a result, line NULL when there is none; rc
 * LLMQ_EREDIS when Redis failed, answered an error or went away, or the
 * stored line is damaged or memory ran out. line (text) is borrowed for the
 * call. */
typedef void llmq_job_result_cb(enum llmq_rc rc, const char *line, size_t len, int dead, void *ud);

/* Reads the result of id (borrowed, copied) on ac (borrowed). Returns
 * LLMQ_OK, after which cb runs exactly once from a reply callback, never
 * before this returns; otherwise (id cannot name a key, out of memory, the
 * command cannot be sent) cb never runs and err says why. */
enum llmq_rc llmq_job_result_read_async(redisAsyncContext *ac, const char *prefix, const char *id,
                                        llmq_job_result_cb *cb, void *ud, struct llmq_error *err);

#endif
