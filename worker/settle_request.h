/* The settle request: what ends one delivery of a job (lua/job_settle.lua),
 * as one type, one mode enum and one field table.
 *
 * A job's outcome (struct worker_settle, settle_outcome.h) plus the job's
 * identity (priority, stream entry, id, reservation handle, model) is sent
 * to Redis as the job_settle script's arguments and, when Redis cannot take
 * it before the worker stops, written to the spool (spool.h) as one JSON
 * object per line and read back by the next start. One table in
 * settle_request.c lists every field once — its name (the spool's JSON key
 * and the name job_settle.lua's ARGV header gives it), its type, where it
 * lives in struct worker_job, and its ARGV position — and drives all three:
 * llmq_worker_settle_argv, llmq_worker_settle_to_json and
 * llmq_worker_settle_from_json. A new field is one row there and one line
 * in the script's ARGV header (tests/unit/worker/test_settle_request.c
 * checks they agree).
 *
 * All functions are pure (no I/O, no clock): any thread, no callbacks. */
#ifndef LLMQ_WORKER_SETTLE_REQUEST_H
#define LLMQ_WORKER_SETTLE_REQUEST_H

#include <jansson.h>
#include <stdint.h>

#include "settle_outcome.h"

struct worker_job;

/* KEYS[1] (the account prefix) and ARGV[1..28] of job_settle.lua. */
#define LLMQ_WORKER_SETTLE_ARGC 29

struct worker_settle_argv {
    const char *argv[LLMQ_WORKER_SETTLE_ARGC];
    char numbers[LLMQ_WORKER_SETTLE_ARGC][24]; /* storage of the integer ones */
};

/* Fills out with job's settle arguments, starting with prefix (KEYS[1]);
 * key_id is this run's key fingerprint (ARGV of authpause). The strings are
 * borrowed from job, prefix, key_id and out: keep them while out is used.
 * Returns the argument count (LLMQ_WORKER_SETTLE_ARGC), or -1 when job's
 * mode is not decided. */
int llmq_worker_settle_argv(const struct worker_job *job, const char *prefix, const char *key_id,
                            struct worker_settle_argv *out);

/* The field name job_settle.lua's ARGV[index] carries (1-based), or NULL. */
const char *llmq_worker_settle_argv_name(int index);

/* The spool's JSON object for job (returns new; NULL without memory), with
 * mode written in place of the job's own (the spool writes an authpause as
 * a handback). Fields the spool does not keep (the key fingerprint) are
 * left out; a NULL line is left out. */
json_t *llmq_worker_settle_to_json(const struct worker_job *job, enum worker_settle_mode mode);

/* Fills job (zeroed by the caller; its strings become its own) from spool
 * object o (borrowed). Members that are missing take their defaults (-1 for
 * header values and actual tokens, "" for handle and model, 0 else).
 * Returns 0, or -1 when the mode, prio, eid or id is missing or does not
 * fit, or memory ran out (job's strings are then still owned by job: free
 * it). */
int llmq_worker_settle_from_json(struct worker_job *job, const json_t *o);

#endif
