/* Fuzzes the usage parser (common/openai/usage.h) on the same bytes as a JSON body,
 * as an SSE stream and through the auto-detecting entry point. A count it
 * reports must be a non-negative integer no larger than 10^15. */
#include <stdint.h>

#include "openai/usage.h"

static void check(enum llmq_rc rc, const struct llmq_usage *u)
{
    if (rc != LLMQ_OK && u->present != 0)
        __builtin_trap();
    const int64_t v[] = {u->input_tokens, u->output_tokens, u->total_tokens, u->cached_tokens,
                         u->reasoning_tokens};
    for (int i = 0; i < 5; i++)
        if ((u->present & (1u << i)) && (v[i] < 0 || v[i] > 2000000000000000LL))
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct llmq_usage u;
    check(llmq_usage_parse_json(text, size, &u), &u);
    check(llmq_usage_parse_sse(text, size, &u), &u);
    check(llmq_usage_parse(text, size, &u), &u);
    return 0;
}
