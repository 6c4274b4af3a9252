/* Fuzzes the tokenizer (common/include/llmq/tokens.h): arbitrary bytes,
 * including invalid UTF-8, encoded with o200k_base (or cl100k_base when the
 * first byte is odd). Every token id must name vocabulary bytes, the ids'
 * bytes must concatenate back to the input when it is valid UTF-8 (tiktoken
 * is lossless), and the count must equal the encoding's length.
 *
 * Inputs are bounded (4 KiB): BPE merging is quadratic in a pre-token's
 * length by design, and a timeout there says nothing new. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "llmq/tokens.h"

#define MAX_INPUT 4096

/* 1 when s[0..n) is well-formed UTF-8 (no surrogates, no overlongs). */
static int utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1;
            cp = c & 0x1f;
            min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2;
            cp = c & 0x0f;
            min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return 0;
        }
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t sel = fuzz_take_byte(&data, &size);
    if (size > MAX_INPUT)
        return 0;
    enum llmq_encoding e = (sel & 1) ? LLMQ_ENCODING_CL100K_BASE : LLMQ_ENCODING_O200K_BASE;
    uint32_t *ids = NULL;
    size_t n = 0, counted = 0;
    struct llmq_error err = {0};
    if (llmq_tokens_encode(e, (const char *)data, size, &ids, &n, &err) != LLMQ_OK)
        return 0;
    if (llmq_tokens_count(e, (const char *)data, size, &counted, &err) != LLMQ_OK || counted != n)
        __builtin_trap();
    int lossless = utf8_valid(data, size);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const unsigned char *b = llmq_tokens_token_bytes(e, ids[i], &len);
        if (b == NULL || len == 0)
            __builtin_trap();
        if (lossless) {
            if (at + len > size || memcmp(data + at, b, len) != 0)
                __builtin_trap();
            at += len;
        }
    }
    if (lossless && at != size)
        __builtin_trap();
    free(ids);
    return 0;
}
