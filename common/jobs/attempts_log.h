/* A job's calls one by one, as its record keeps them (lua/lib/attempts.lua
 * attempts_log, read through lua/job_fields.lua field att), turned into
 * JSON for the readers that show them: the dashboard's job view
 * (gateway/dashboard/actions.c) and `llmq results --calls`. One parser, so
 * both show the same figures. Pure: no I/O, thread-safe. */
#ifndef LLMQ_ATTEMPTS_LOG_H
#define LLMQ_ATTEMPTS_LOG_H

#include <jansson.h>
#include <stddef.h>

/* The calls of log[0..len) ("<n>|call|call...", each call "mode status
 * start_ms took_ms in out endpoint model") as new [{mode, status, start_ms,
 * took_ms, in_tokens, out_tokens, endpoint ("": the implicit one), model},
 * ...] (the kept ones, oldest first); *calls_total (may be NULL) gets n,
 * every call recorded. A call that does not parse is left out. Returns
 * NULL when out of memory. */
json_t *llmq_attempts_log_json(const char *log, size_t len, long long *calls_total);

#endif
