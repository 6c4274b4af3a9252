/* A job's result line: the Batch output line a job that ended leaves (its
 * ended record, `llmq results`; docs/concepts.md "Jobs in and results out"). One builder for every
 * answer, whole or streamed (a collected stream's line carries the answer
 * assembled from its events, a relayed one's what the client saw), so the
 * fields a line promises are written once: id, custom_id, response
 * {status_code, request_id, body}, error, and for a job a named endpoint
 * or a fallback model served, "endpoint", "model" and "asked_model".
 * Pure (no I/O); loop thread only like the job it reads. */
#ifndef LLMQ_WORKER_RESULT_LINE_H
#define LLMQ_WORKER_RESULT_LINE_H

#include <stddef.h>

struct llmq_errorbody;
struct llmq_http_response;
struct worker_job;

/* The line of job (borrowed) answered resp (borrowed: its status and
 * request id) with body[0..body_len) as the answer: JSON when it parses,
 * else the text; NULL: none (null). error: {code: err_code, message:
 * err_message} when err_code is not NULL (a 2xx that is no result, a
 * stream that broke off); else, for a status other than 2xx, the code and
 * message of eb (the error body's fields, borrowed; may be NULL); else
 * null. Returns new (free), or NULL without memory. */
char *llmq_worker_result_line(const struct worker_job *job, const struct llmq_http_response *resp,
                              const char *body, size_t body_len, const struct llmq_errorbody *eb,
                              const char *err_code, const char *err_message);

/* The line of job (borrowed) when it ended without a usable response
 * (response null, error {code, message}). Returns new, or NULL without
 * memory. */
char *llmq_worker_error_line(const struct worker_job *job, const char *code, const char *message);

#endif
