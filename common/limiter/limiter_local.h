/* The fail-open local limiter: when Redis is unreachable and the policy is
 * fail-open, a process admits requests against its own share of each bucket's
 * limit, as last seen in Redis replies. Exact sliding windows (window.h), in
 * process memory; a bucket never seen has no local limit.
 *
 * Local reservations look like Redis ones with an 'L' before the id:
 * "<account>|L<id>|<cost>|<at_ms>|w<bucket>|...". */
#ifndef LLMQ_LIMITER_LOCAL_H
#define LLMQ_LIMITER_LOCAL_H

#include <stdint.h>

#include "llmq/limiter.h"
#include "limiter/window.h"

struct llmq_local_bucket {
    char *key; /* "<account>|<bucket>" */
    struct llmq_window window;
};

struct llmq_local_limiter {
    double share;
    struct llmq_local_bucket *buckets;
    size_t count, cap;
    uint64_t next_id;
};

void llmq_local_limiter_init(struct llmq_local_limiter *l, double share);
void llmq_local_limiter_free(struct llmq_local_limiter *l);

/* Remembers the limits of account's bucket (requests/tokens < 0: none);
 * keeps the window's entries when the bucket is known. */
enum llmq_rc llmq_local_limiter_learn(struct llmq_local_limiter *l, const char *account,
                                      const char *bucket, int64_t requests, int64_t tokens,
                                      int64_t period_ms);

/* Decides locally at now_ms (monotonic); fills *out like a Redis decision,
 * with out->local = 1. Returns LLMQ_OK or LLMQ_ENOMEM. */
enum llmq_rc llmq_local_limiter_acquire(struct llmq_local_limiter *l, const struct llmq_path *path,
                                        int64_t cost, int64_t now_ms, struct llmq_grant *out);

/* Settles (actual >= 0: the charge is raised to actual, never lowered, as
 * the Redis buckets' default admission ledger does) or refunds (actual < 0)
 * a local reservation.
 * Returns 1 if reservation was local, 0 if it is a Redis one. */
int llmq_local_limiter_adjust(struct llmq_local_limiter *l, const char *reservation,
                              int64_t actual);

#endif
