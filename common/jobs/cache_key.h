/* The cache key of a request: what makes two requests "the same" for the
 * response cache (docs/DESIGN.md §3.12, lua/lib/cache.lua).
 *
 * The key is the SHA-256, as 64 lower-case hex digits, of the Batch url, a
 * '\n', and the request body in canonical form:
 *   - object members sorted by name, at every depth, JSON without spaces;
 *   - numbers normalised: an integral value (1, 1.0, 1e0, -0) is written as
 *     an integer when it is within +-2^53, any other number as the shortest
 *     text that reads back to the same double;
 *   - strings as JSON text of their code points (escapes resolved);
 *   - the top-level members that do not change the answer left out:
 *     stream, stream_options, user, metadata, and llmq's own llmq.
 * The model is part of the body and so of the key. The key is not scoped:
 * the tenant is put in front of it in Redis by the script that uses it,
 * from the job's own tenant (never from the request).
 *
 * Pure functions (jansson and OpenSSL's SHA-256), thread-safe. The body is
 * untrusted: tests/fuzz/fuzz_cache_key.c. */
#ifndef LLMQ_CACHE_KEY_H
#define LLMQ_CACHE_KEY_H

#include <jansson.h>
#include <stddef.h>

#include "llmq/error.h"

/* Hex digits of a key, without the NUL. */
#define LLMQ_CACHE_KEY_HEX 64

/* Writes the key of url (borrowed, NUL-terminated) and body (borrowed; a
 * JSON object, not changed) into out (LLMQ_CACHE_KEY_HEX + 1 bytes, NUL-
 * terminated). Returns LLMQ_OK, LLMQ_EINVAL when body is no object (err
 * says so) or LLMQ_ENOMEM. */
enum llmq_rc llmq_cache_key(const char *url, const json_t *body, char *out, struct llmq_error *err);

/* The canonical text of body (the part of the key after url and '\n'):
 * returns new text (free with free), or NULL with err set (LLMQ_EINVAL,
 * LLMQ_ENOMEM). For tests and `llmq cache key`. */
char *llmq_cache_key_canonical(const json_t *body, struct llmq_error *err);

#endif
