/* The events of a streamed API answer, one at a time: where each ends, what
 * it is, and the whole answer they add up to.
 *
 * Pure code (no I/O, no clock): a streamed call (stream_call.h) feeds each
 * complete server-sent event to llmq_stream_asm_event as it arrives, and at
 * the end takes the assembled answer — the object the same call would have
 * returned without stream: true (chat.completion, text_completion, or the
 * Responses API's response from its response.completed event), with the
 * usage — for the job's result line. Hostile or malformed events are
 * skipped, never a crash (fuzzed as stream_assemble).
 *
 * Ownership: a struct llmq_stream_asm is owned by its creator (new/free);
 * event text is borrowed for the call; results are new. */
#ifndef LLMQ_WORKER_STREAM_ASSEMBLE_H
#define LLMQ_WORKER_STREAM_ASSEMBLE_H

#include <stddef.h>
#include <stdint.h>

#include "openai/usage.h"

/* Which API's events (by the job's url path). */
enum llmq_stream_api {
    LLMQ_STREAM_CHAT = 0,    /* /v1/chat/completions: data chunks, data: [DONE] */
    LLMQ_STREAM_COMPLETIONS, /* /v1/completions: the same framing */
    LLMQ_STREAM_RESPONSES,   /* /v1/responses: named events, response.completed */
};

/* What one event is. */
enum llmq_stream_event_kind {
    LLMQ_STREAM_EV_OTHER = 0, /* anything else (comments, unknown events) */
    LLMQ_STREAM_EV_CONTENT,   /* a chunk or delta of the answer */
    LLMQ_STREAM_EV_USAGE,     /* chat/completions: the usage chunk (choices []) */
    LLMQ_STREAM_EV_DONE,      /* data: [DONE] */
    LLMQ_STREAM_EV_FINAL,     /* responses: response.completed / .incomplete / .failed */
    LLMQ_STREAM_EV_ERROR,     /* an error event (data {"error":...} or event: error) */
};

struct llmq_stream_asm;

/* Returns a new assembler for api's events, or NULL without memory. */
struct llmq_stream_asm *llmq_stream_asm_new(enum llmq_stream_api api);
void llmq_stream_asm_free(struct llmq_stream_asm *a);

/* The API of a job's url path ("/v1/chat/completions", ...); -1 when the
 * path is not one that streams. */
int llmq_stream_api_of(const char *url_path);

/* Length of the first complete event in text[0..len) (through the blank
 * line that ends it: "\n\n" or "\r\n\r\n"), or 0 when no event is complete
 * yet. */
size_t llmq_sse_event_len(const char *text, size_t len);

/* Takes in one complete event ev[0..len) (borrowed): adds its content to the
 * answer and returns what it was. */
enum llmq_stream_event_kind llmq_stream_asm_event(struct llmq_stream_asm *a, const char *ev,
                                                  size_t len);

/* Content events seen (chat and completions chunks with content, responses
 * deltas): about one token each, the estimate of a stream cut short. */
int64_t llmq_stream_asm_deltas(const struct llmq_stream_asm *a);

/* 1 and *out filled when an event carried usage. */
int llmq_stream_asm_usage(const struct llmq_stream_asm *a, struct llmq_usage *out);

/* The error of an error event (code, message; "" when none was seen).
 * Borrowed, valid until the next call on a. */
const char *llmq_stream_asm_error_code(const struct llmq_stream_asm *a);
const char *llmq_stream_asm_error_message(const struct llmq_stream_asm *a);

/* The last sequence_number of a responses event (-1 none). */
int64_t llmq_stream_asm_last_seq(const struct llmq_stream_asm *a);

/* The whole answer so far as a new JSON text (NUL-terminated; *len its
 * length), or NULL without memory. A stream cut short gives what came. */
char *llmq_stream_asm_result(const struct llmq_stream_asm *a, size_t *len);

#endif
