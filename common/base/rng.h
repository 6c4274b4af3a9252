/* The one random number generator of llmq (backoff jitter, dispatch spread,
 * job ids): splitmix64 over a caller-owned uint64_t state. Fast, not
 * cryptographic (gateway keys and ids use OpenSSL's RAND_bytes). Pure: no
 * global state, so a test seeds it and gets the same stream every run; one
 * state per thread. */
#ifndef LLMQ_RNG_H
#define LLMQ_RNG_H

#include <stdint.h>

/* Seeds *state (never leaves it in a bad state: any seed works). */
void llmq_rng_seed(uint64_t *state, uint64_t seed);

/* Next 64 random bits from *state. */
uint64_t llmq_rng_next(uint64_t *state);

/* Uniform integer in [0, n] (n >= 0; n < 0 gives 0), without modulo bias. */
int64_t llmq_rng_uniform(uint64_t *state, int64_t n);

#endif
