/* The header-learning throttle; why it is safe is in learn_throttle.h. */
#include "learn_throttle.h"

/* The six values a settle carries (settle_request.h). */
static const uint32_t sent_fields =
    LLMQ_RLH_BIT(LLMQ_RLH_REMAINING_REQUESTS) | LLMQ_RLH_BIT(LLMQ_RLH_REMAINING_TOKENS) |
    LLMQ_RLH_BIT(LLMQ_RLH_RESET_REQUESTS_MS) | LLMQ_RLH_BIT(LLMQ_RLH_RESET_TOKENS_MS) |
    LLMQ_RLH_BIT(LLMQ_RLH_LIMIT_REQUESTS) | LLMQ_RLH_BIT(LLMQ_RLH_LIMIT_TOKENS);

static int remaining_is_zero(const struct llmq_ratelimit_headers *h)
{
    int64_t v;
    return (llmq_ratelimit_headers_get(h, LLMQ_RLH_REMAINING_REQUESTS, &v) && v == 0) ||
           (llmq_ratelimit_headers_get(h, LLMQ_RLH_REMAINING_TOKENS, &v) && v == 0);
}

int llmq_worker_learn_send(int64_t *sent_ms, long status, const struct llmq_ratelimit_headers *h,
                           int64_t now_ms)
{
    if ((h->present & sent_fields) == 0)
        return 0;
    int send = *sent_ms < 0 || status == 429 || remaining_is_zero(h) ||
               now_ms - *sent_ms >= LEARN_HEADERS_EVERY_MS;
    if (send)
        *sent_ms = now_ms;
    return send;
}
