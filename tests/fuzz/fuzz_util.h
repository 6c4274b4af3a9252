/* Helpers the libFuzzer targets share: turning the fuzzer's bytes into the
 * shapes the parsers take (a NUL-terminated copy, a redisReply decoded by
 * hiredis's own reader). Header-only: each target is one executable.
 *
 * A target must never abort on any input and must free everything it got;
 * the only way it reports a bug is by letting a sanitizer or libFuzzer see
 * it (crash, leak, timeout). */
#ifndef LLMQ_FUZZ_UTIL_H
#define LLMQ_FUZZ_UTIL_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Returns a new NUL-terminated copy of data[0..size) (free with free), or
 * NULL when memory runs out. Interior NULs are kept: a C-string parser sees
 * the prefix up to the first one. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return NULL;
    if (size > 0)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Takes the first byte of *data as a selector (0 when there is none) and
 * advances past it. */
static inline uint8_t fuzz_take_byte(const uint8_t **data, size_t *size)
{
    if (*size == 0)
        return 0;
    uint8_t b = (*data)[0];
    (*data)++;
    (*size)--;
    return b;
}

/* 1 when data[0..size) declares a RESP array or bulk string longer than
 * max: hiredis 0.14 allocates what a header declares before reading the
 * rest ("*2000000000\r\n" asks for 16 GB), which a fuzzer reports as an
 * out-of-memory in hiredis, not in llmq. A Redis server never sends such a
 * reply to llmq's scripts, so such inputs are skipped. Conservative: any
 * '*' or '$' followed by a long enough number counts. */
static inline int fuzz_resp_too_big(const uint8_t *data, size_t size, long max)
{
    for (size_t i = 0; i + 1 < size; i++) {
        if (data[i] != '*' && data[i] != '$')
            continue;
        long v = 0;
        for (size_t j = i + 1; j < size && data[j] >= '0' && data[j] <= '9'; j++) {
            v = v * 10 + (data[j] - '0');
            if (v > max)
                return 1;
        }
    }
    return 0;
}

/* Decodes the first RESP reply in data[0..size) with hiredis's reader.
 * Returns a new reply (free with freeReplyObject), or NULL when the bytes
 * hold no complete, well-formed reply. */
static inline redisReply *fuzz_reply_from_bytes(const uint8_t *data, size_t size)
{
    if (fuzz_resp_too_big(data, size, 4096))
        return NULL;
    redisReader *rd = redisReaderCreate();
    if (rd == NULL)
        return NULL;
    void *reply = NULL;
    if (redisReaderFeed(rd, (const char *)data, size) != REDIS_OK ||
        redisReaderGetReply(rd, &reply) != REDIS_OK)
        reply = NULL;
    redisReaderFree(rd);
    return reply;
}

#endif
