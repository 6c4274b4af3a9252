/* Collects an async limiter answer (see limiter_result.h). */
#include "limiter_result.h"

void llmq_test_on_grant(void *privdata, enum llmq_rc rc, const struct llmq_grant *grant,
                        const struct llmq_error *err)
{
    (void)err;
    struct llmq_test_grant *r = privdata;
    r->calls++;
    r->rc = rc;
    if (grant != NULL)
        r->grant = *grant;
}
