/* splitmix64 and an unbiased bounded draw; see rng.h. */
#include "base/rng.h"

void llmq_rng_seed(uint64_t *state, uint64_t seed)
{
    *state = seed;
}

uint64_t llmq_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

int64_t llmq_rng_uniform(uint64_t *state, int64_t n)
{
    if (n <= 0)
        return 0;
    uint64_t range = (uint64_t)n + 1;
    /* Reject the top partial block so every value is equally likely. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % range);
    uint64_t r;
    do {
        r = llmq_rng_next(state);
    } while (r >= limit);
    return (int64_t)(r % range);
}
