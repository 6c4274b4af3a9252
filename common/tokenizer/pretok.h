/* The pre-tokenizer: splits text into the pieces tiktoken's split patterns
 * find, before BPE runs on each piece.
 *
 * A hand-written scanner, one function per encoding, that reproduces the
 * leftmost-first, backtracking semantics of the patterns exactly (including the
 * case-insensitive contractions with U+017F, and `\s+(?!\S)`), with character
 * classes from Unicode 16 (common/tokenizer/unicode_tables.c). */
#ifndef LLMQ_PRETOK_H
#define LLMQ_PRETOK_H

#include <stddef.h>

enum llmq_pretok_pattern {
    LLMQ_PRETOK_O200K, /* o200k_base */
    LLMQ_PRETOK_CL100K /* cl100k_base */
};

/* Returns the end offset of the piece that starts at byte pos of s (len bytes
 * of VALID UTF-8, borrowed); pos < len, and the result is > pos. */
size_t llmq_pretok_next(enum llmq_pretok_pattern pattern, const unsigned char *s, size_t len,
                        size_t pos);

#endif
