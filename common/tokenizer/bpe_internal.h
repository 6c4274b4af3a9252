/* The layout of a loaded vocabulary, shared by bpe_load.c (builds it) and
 * bpe.c (reads it). Nothing else may look inside. */
#ifndef LLMQ_BPE_INTERNAL_H
#define LLMQ_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

struct llmq_bpe_vocab {
    unsigned char *pool; /* all token bytes, token r at pool[off[r] .. off[r + 1]) */
    uint32_t *off;       /* n_tokens + 1 offsets */
    uint32_t n_tokens;
    uint64_t *table; /* open addressing: (hash high 32 bits << 32) | (rank + 1); 0 = empty */
    uint64_t mask;   /* table size - 1 (a power of two, at least twice n_tokens) */
    uint32_t byte_rank[256];
};

/* Hash of a byte string, for the table. Lookups and inserts must agree. */
static inline uint64_t llmq_bpe_hash(const unsigned char *b, size_t len)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)len;
    while (len >= 8) {
        uint64_t w = 0;
        for (int i = 0; i < 8; i++)
            w |= (uint64_t)b[i] << (8 * i);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        b += 8;
        len -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < len; i++)
        w |= (uint64_t)b[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
}

#endif
