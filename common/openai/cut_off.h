/* Whether an OpenAI response body is an answer the model cut off at its
 * token limit: a chat or completions choice with `finish_reason` "length",
 * or a Responses API response with `status` "incomplete". The response
 * cache (docs/cache.md) does not store such answers.
 *
 * Pure code: parses a borrowed body, keeps nothing; any thread. */
#ifndef LLMQ_OPENAI_CUT_OFF_H
#define LLMQ_OPENAI_CUT_OFF_H

#include <stddef.h>

/* 1 when body[0..len) (borrowed; a JSON response body) was cut off as
 * above; 0 otherwise, also when it is not JSON. */
int llmq_openai_cut_off(const char *body, size_t len);

#endif
