/* UTF-8 validation and repair for the tokenizer.
 *
 * The tokenizer works on valid UTF-8 only (the split patterns are defined on
 * code points). Input that is not valid UTF-8 is repaired first: each maximal
 * subpart of an ill-formed sequence becomes one U+FFFD, the Encoding
 * Standard's rule, so our ids equal tiktoken's for the same bytes decoded by
 * TextDecoder. JSON request bodies never need it (jansson rejects bad UTF-8). */
#include "tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>

/* Length of the well-formed sequence at s[pos], or 0 when it is ill-formed; in
 * that case *bad is how many bytes form the maximal subpart to replace. */
static size_t seq_len(const unsigned char *s, size_t len, size_t pos, size_t *bad)
{
    unsigned c = s[pos];
    unsigned lo = 0x80, hi = 0xBF;
    size_t need;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    for (size_t i = 1; i <= need; i++) {
        if (pos + i >= len || s[pos + i] < lo || s[pos + i] > hi) {
            *bad = i; /* the lead and the continuations seen so far */
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

size_t llmq_utf8_valid_prefix(const unsigned char *s, size_t len)
{
    size_t pos = 0, bad;
    while (pos < len) {
        if (s[pos] < 0x80) {
            pos++;
            continue;
        }
        size_t n = seq_len(s, len, pos, &bad);
        if (n == 0)
            return pos;
        pos += n;
    }
    return len;
}

unsigned char *llmq_utf8_sanitize(const unsigned char *s, size_t len, size_t *out_len)
{
    /* Worst case: every byte becomes the 3-byte U+FFFD. */
    unsigned char *out = malloc(len * 3 + 1);
    size_t pos = 0, o = 0, bad;
    if (out == NULL)
        return NULL;
    while (pos < len) {
        size_t n = seq_len(s, len, pos, &bad);
        if (n > 0) {
            memcpy(out + o, s + pos, n);
            o += n;
            pos += n;
        } else {
            out[o++] = 0xEF;
            out[o++] = 0xBF;
            out[o++] = 0xBD;
            pos += bad;
        }
    }
    *out_len = o;
    return out;
}
