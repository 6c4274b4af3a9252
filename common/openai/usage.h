/* Token usage reported by an OpenAI response body, for settling the limiter.
 *
 * Pure code: parses a borrowed body, allocates only inside jansson, keeps
 * nothing. Understands
 *   - chat completions, completions, embeddings: usage.prompt_tokens,
 *     usage.completion_tokens (absent for embeddings), usage.total_tokens,
 *     usage.prompt_tokens_details.cached_tokens,
 *     usage.completion_tokens_details.reasoning_tokens;
 *   - the Responses API: usage.input_tokens, usage.output_tokens,
 *     usage.total_tokens, usage.input_tokens_details.cached_tokens,
 *     usage.output_tokens_details.reasoning_tokens;
 *   - a Batch API output line: {"response":{"body":{... "usage": ...}}};
 *   - a server-sent-event stream ("data: {...}\n\n" events ending with
 *     "data: [DONE]"): the usage of the last event that carries a non-null
 *     "usage" (chat chunks with stream_options.include_usage) or
 *     "response.usage" (Responses API "response.completed").
 * A count that is not a non-negative integer (or exceeds 10^15) is ignored
 * (its bit stays unset). When total_tokens is missing but input and output
 * are present, total is their sum and LLMQ_USAGE_TOTAL_DERIVED is set. */
#ifndef LLMQ_USAGE_H
#define LLMQ_USAGE_H

#include <stddef.h>
#include <stdint.h>

#include "llmq/error.h"

enum llmq_usage_bit {
    LLMQ_USAGE_INPUT = 1u << 0,         /* prompt_tokens / input_tokens */
    LLMQ_USAGE_OUTPUT = 1u << 1,        /* completion_tokens / output_tokens */
    LLMQ_USAGE_TOTAL = 1u << 2,         /* total_tokens */
    LLMQ_USAGE_CACHED = 1u << 3,        /* cached input tokens */
    LLMQ_USAGE_REASONING = 1u << 4,     /* reasoning output tokens */
    LLMQ_USAGE_TOTAL_DERIVED = 1u << 5, /* total = input + output, not reported */
};

struct llmq_usage {
    unsigned present; /* enum llmq_usage_bit */
    int64_t input_tokens;
    int64_t output_tokens;
    int64_t total_tokens;
    int64_t cached_tokens;
    int64_t reasoning_tokens;
};

/* Parses a JSON response body body[0..len) (borrowed). Returns LLMQ_OK when a
 * usage object with at least one count was found, LLMQ_ENOTFOUND when the
 * body is valid JSON without usage, LLMQ_EINVAL when it is not JSON. *out is
 * always written (present == 0 unless LLMQ_OK). */
enum llmq_rc llmq_usage_parse_json(const char *body, size_t len, struct llmq_usage *out);

/* Parses an SSE stream text[0..len) (borrowed) as described above. Returns
 * LLMQ_OK when an event carried usage, else LLMQ_ENOTFOUND (a stream whose
 * events are malformed JSON just carries no usage). *out is always written. */
enum llmq_rc llmq_usage_parse_sse(const char *text, size_t len, struct llmq_usage *out);

/* Picks llmq_usage_parse_json or llmq_usage_parse_sse by the first non-blank
 * byte ('{' → JSON; "data:", "event:", "id:", "retry:" or ':' → SSE). */
enum llmq_rc llmq_usage_parse(const char *body, size_t len, struct llmq_usage *out);

#endif
