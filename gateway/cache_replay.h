/* A cached answer replayed as a stream (docs/cache.md "Streams"): a
 * streaming client whose request was answered from the response cache (a
 * hit, or a wait for an identical request in flight: no worker relays
 * frames for it) gets the stored whole answer as server-sent events in
 * OpenAI's framing:
 *   chat         chat.completion.chunk events: per choice one with the
 *                role and the whole content (and tool calls, refusal), then
 *                one with its finish_reason; a usage chunk (choices [])
 *                only when the request asked (stream_options.include_usage);
 *                "data: [DONE]";
 *   completions  text_completion chunks: per choice one with its text and
 *                finish_reason; the usage chunk only when asked; [DONE];
 *   responses    the Responses API's events: response.created, per output
 *                item output_item.added (and for a message, per text part
 *                content_part.added, output_text.delta with the whole text,
 *                output_text.done, content_part.done), output_item.done,
 *                then response.completed with the stored response (usage
 *                in it, as the API always sends).
 *
 * Pure functions (jansson), thread-safe; the line and the request body are
 * borrowed. */
#ifndef GW_CACHE_REPLAY_H
#define GW_CACHE_REPLAY_H

#include <stddef.h>

/* The events of the answer in result line line[0..len) of a request to url
 * (the static Batch url) with body request_body (JSON text, NUL-terminated;
 * NULL: no usage chunk), when that line is a cached one ("cached": true)
 * with a 2xx response whose body is an object: returns new text (free with
 * free), its length in *out_len. Returns NULL when the line is no such
 * line (the caller answers it as it would any result) or memory ran out. */
char *gw_cache_replay_sse(const char *url, const char *request_body, const char *line, size_t len,
                          size_t *out_len);

#endif
