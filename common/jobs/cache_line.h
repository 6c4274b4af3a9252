/* A result line answered from the cache (docs/DESIGN.md §3.12): how the
 * scripts store it and how readers make the Batch output line of it.
 *
 * Lua cannot unpack a stored line (jobs/job_pack.h), so a job answered from
 * the cache (a hit, or a request that waited for an identical one in
 * flight) gets, as its result line, a reference to the answer's line:
 *
 *   byte 0      LLMQ_CACHE_LINE_TAG (0x02; neither JSON text nor a packed
 *               value starts with it)
 *   header      a JSON object on one line: {"job": "<job id>", "age_ms": N}
 *               (the job answered, the entry's age when it was answered)
 *   '\n'
 *   the rest    the stored line of the job whose answer it is (packed or
 *               JSON text), as it was stored
 *
 * Reading it gives that line with "custom_id" set to the job's own,
 * "cached": true and "cache_age_s" (whole seconds) added.
 *
 * Pure functions, thread-safe. The stored value is untrusted (Redis):
 * fuzzed by tests/fuzz/fuzz_cache_line.c. */
#ifndef LLMQ_CACHE_LINE_H
#define LLMQ_CACHE_LINE_H

#include <stddef.h>

#include "llmq/error.h"

#define LLMQ_CACHE_LINE_TAG 0x02

/* 1 when stored[0..len) is a cached line (its first byte is the tag). */
int llmq_cache_line_is(const char *stored, size_t len);

/* The text of result line stored[0..len) (borrowed): a cached line is
 * expanded as above, anything else unpacked (llmq_job_unpack). *out gets a
 * new NUL-terminated text (free with free) of *out_len bytes. max_bytes
 * bounds the text. Returns LLMQ_OK, LLMQ_ENOMEM, or LLMQ_EINVAL naming what
 * is wrong (a header that is no such object, a line inside that is damaged
 * or no JSON object, or one that is itself a cached line); on failure *out
 * is NULL. */
enum llmq_rc llmq_cache_line_read(const char *stored, size_t len, size_t max_bytes, char **out,
                                  size_t *out_len, struct llmq_error *err);

#endif
