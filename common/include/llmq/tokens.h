/* Token counting with OpenAI's tokenizers: an exact, tiktoken-compatible
 * byte-level BPE for o200k_base and cl100k_base.
 *
 * Vocabularies are `.tiktoken` files, searched in $LLMQ_DATA_DIR, then the
 * installed share/llmq, then the source tree's data/; each is checked by
 * SHA-256, loaded on first use, and shared by all threads of the process for
 * its lifetime. Special-token text such as "<|endoftext|>" is ordinary text.
 * Input that is not valid UTF-8 is repaired first (one U+FFFD per maximal
 * ill-formed subpart, the Encoding Standard's rule). */
#ifndef LLMQ_TOKENS_H
#define LLMQ_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "llmq/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum llmq_encoding { LLMQ_ENCODING_O200K_BASE = 0, LLMQ_ENCODING_CL100K_BASE, LLMQ_ENCODING_COUNT };

/* The encoding of a model we do not know: OpenAI's current models all use it. */
#define LLMQ_ENCODING_DEFAULT LLMQ_ENCODING_O200K_BASE

/* Returns the static name of e ("o200k_base", ...), or "unknown". */
const char *llmq_tokens_encoding_name(enum llmq_encoding e);

/* Parses an encoding name (borrowed). Returns LLMQ_OK or LLMQ_EINVAL. */
enum llmq_rc llmq_tokens_encoding_parse(const char *name, enum llmq_encoding *out);

/* Encoding of a model name (borrowed; NULL gives the default): gpt-4o*,
 * gpt-4.1*, gpt-4.5*, gpt-5*, o1*, o3*, o4*, chatgpt-4o*, gpt-oss* →
 * o200k_base; gpt-4*, gpt-3.5*, gpt-35*, text-embedding-* → cl100k_base; also
 * with a "ft:" prefix; anything else → LLMQ_ENCODING_DEFAULT. */
enum llmq_encoding llmq_tokens_encoding_for_model(const char *model);

/* Loads e's vocabulary if no thread has yet (thread-safe, once per process).
 * Returns LLMQ_OK, or the load error (LLMQ_ENOTFOUND when no file is found,
 * LLMQ_EINVAL on a checksum mismatch); a failed load is not retried. */
enum llmq_rc llmq_tokens_load(enum llmq_encoding e, struct llmq_error *err);

/* Counts the tokens of text (len bytes, borrowed) into *out_tokens. Loads the
 * vocabulary on first use. Returns LLMQ_OK, a load error, or LLMQ_ENOMEM. */
enum llmq_rc llmq_tokens_count(enum llmq_encoding e, const char *text, size_t len,
                               size_t *out_tokens, struct llmq_error *err);

/* Encodes text (len bytes, borrowed) into a new array of token ids (*out_ids,
 * free() it; NULL when *out_n is 0). Returns as llmq_tokens_count. */
enum llmq_rc llmq_tokens_encode(enum llmq_encoding e, const char *text, size_t len,
                                uint32_t **out_ids, size_t *out_n, struct llmq_error *err);

/* Bytes of token id (borrowed from the loaded vocabulary, valid for the
 * process's life) into *len; NULL when e is not loaded or id is out of range. */
const unsigned char *llmq_tokens_token_bytes(enum llmq_encoding e, uint32_t id, size_t *len);

/* Bytes the loaded vocabulary of e occupies in memory (0 when not loaded). */
size_t llmq_tokens_memory_bytes(enum llmq_encoding e);

#ifdef __cplusplus
}
#endif
#endif
