/* A Batch custom_id and the job id it becomes.
 *
 * OpenAI accepts any string as a custom_id; llmq's job ids are names (no
 * whitespace, control characters, '/', '|', '{' or '}': llmq_name_valid),
 * because they sit in keys and in the scheduler's '|'-separated node paths.
 * A custom_id becomes its job id by writing each byte a name cannot hold as
 * "%XX" (two upper-case hex digits), and a '%' that is followed by two hex
 * digits as "%25"; every other byte is kept. So a custom_id that is a valid
 * name without a "%XX" in it is its own job id (ids of older versions stay
 * what they were), the mapping is one-to-one, and a job id turns back into
 * its custom_id by decoding every "%XX" (lua/lib/worker.lua does the same
 * for the lines it writes). Pure functions: no allocation, thread-safe. */
#ifndef LLMQ_JOB_ID_H
#define LLMQ_JOB_ID_H

#include <stddef.h>

#include "llmq/error.h"

/* Writes the job id of custom_id s (len bytes, UTF-8 from JSON) into out
 * (n bytes, NUL-terminated). Returns LLMQ_OK, or LLMQ_EINVAL (err names the
 * custom_id and why) when s is empty, holds a NUL byte, or its id would be
 * longer than LLMQ_JOB_ID_MAX bytes or does not fit n. */
enum llmq_rc llmq_job_id_from_custom(const char *s, size_t len, char *out, size_t n,
                                     struct llmq_error *err);

/* Writes the custom_id of job id id into out (n bytes; the custom_id is never
 * longer than its id, so n = strlen(id) + 1 always fits; a longer custom_id
 * is cut at n - 1). Returns out. */
char *llmq_job_id_to_custom(const char *id, char *out, size_t n);

#endif
