/* Unicode character classes and UTF-8 helpers for the tokenizer.
 *
 * The classes are exactly those the tiktoken split patterns test (\p{Lu}|\p{Lt},
 * \p{Ll}, \p{Lm}|\p{Lo}, \p{M}, \p{N}, \s), by Unicode 16.0, the version the
 * reference tiktoken uses. Tables are generated (common/tokenizer/unicode_tables.c). */
#ifndef LLMQ_UNICODE_H
#define LLMQ_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum llmq_uclass {
    LLMQ_UC_LU = 0x01, /* Lu, Lt */
    LLMQ_UC_LL = 0x02, /* Ll */
    LLMQ_UC_LO = 0x04, /* Lm, Lo */
    LLMQ_UC_M = 0x08,  /* Mn, Mc, Me */
    LLMQ_UC_N = 0x10,  /* Nd, Nl, No */
    LLMQ_UC_WS = 0x20, /* White_Space (what \s means in Rust's regex) */
};
#define LLMQ_UC_L (LLMQ_UC_LU | LLMQ_UC_LL | LLMQ_UC_LO)

extern const unsigned char llmq_unicode_stage1[0x1100];
extern const unsigned char llmq_unicode_stage2[][256];

/* Class bits of code point cp (0 for cp > 0x10FFFF). */
static inline unsigned llmq_unicode_class(uint32_t cp)
{
    if (cp > 0x10FFFF)
        return 0;
    return llmq_unicode_stage2[llmq_unicode_stage1[cp >> 8]][cp & 0xFF];
}

/* Decodes the code point at s[pos] of VALID UTF-8 s of len bytes; stores it in
 * *cp and returns the offset just after it. pos must be < len. */
static inline size_t llmq_utf8_next(const unsigned char *s, size_t len, size_t pos, uint32_t *cp)
{
    unsigned c = s[pos];
    if (c < 0x80) {
        *cp = c;
        return pos + 1;
    }
    if (c < 0xE0 && pos + 1 < len) {
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[pos + 1] & 0x3F);
        return pos + 2;
    }
    if (c < 0xF0 && pos + 2 < len) {
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[pos + 1] & 0x3F) << 6) |
              (s[pos + 2] & 0x3F);
        return pos + 3;
    }
    if (pos + 3 < len) {
        *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[pos + 1] & 0x3F) << 12) |
              ((uint32_t)(s[pos + 2] & 0x3F) << 6) | (s[pos + 3] & 0x3F);
        return pos + 4;
    }
    /* Truncated input despite the contract: take one byte, never read past. */
    *cp = 0xFFFD;
    return pos + 1;
}

/* Returns the length of the longest valid UTF-8 prefix of s (len bytes). */
size_t llmq_utf8_valid_prefix(const unsigned char *s, size_t len);

/* Copies s (len bytes) into a new buffer with every ill-formed subsequence
 * replaced by U+FFFD, one per maximal subpart, as the WHATWG/Encoding
 * Standard decoder does (and so as JavaScript's TextDecoder does). Returns a
 * new malloc'd buffer (caller frees) and its length in *out_len, or NULL when
 * out of memory. */
unsigned char *llmq_utf8_sanitize(const unsigned char *s, size_t len, size_t *out_len);

#endif
