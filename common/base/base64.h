/* Base64 decoding, for the vocabulary files (the .tiktoken files in data/)
 * and image data: URLs in requests. Pure; no allocation. */
#ifndef LLMQ_BASE64_H
#define LLMQ_BASE64_H

#include <stddef.h>

/* Decodes base64 text s[0..n) (borrowed; standard or URL-safe alphabet;
 * '=' padding, CR, LF and spaces are skipped) into out, which must hold
 * n / 4 * 3 + 3 bytes. Returns the number of bytes written, or -1 at any
 * other byte. */
long llmq_base64_decode(const char *s, size_t n, unsigned char *out);

#endif
