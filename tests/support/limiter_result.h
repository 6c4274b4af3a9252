/* What an async limiter call (llmq/limiter.h, llmq_alimiter_*) answered, for
 * tests that run the loop until it has: pass llmq_test_on_grant as the
 * callback and a zeroed struct llmq_test_grant as privdata. Loop thread. */
#ifndef LLMQ_TEST_LIMITER_RESULT_H
#define LLMQ_TEST_LIMITER_RESULT_H

#include "llmq/limiter.h"

struct llmq_test_grant {
    int calls; /* how many times the callback ran (once expected) */
    enum llmq_rc rc;
    struct llmq_grant grant; /* a copy, when the call gave one */
};

/* An llmq_alimiter_cb: counts the call, keeps rc and the grant. */
void llmq_test_on_grant(void *privdata, enum llmq_rc rc, const struct llmq_grant *grant,
                        const struct llmq_error *err);

#endif
