/* Fuzzes what llmq makes of a hostile Redis reply to the limiter scripts:
 * the bytes are decoded by hiredis's own RESP reader into a redisReply (as a
 * connection would), then given to llmq_acquire_reply_parse and
 * llmq_integer_reply_parse (common/limiter/limiter_reply.h). The limits an acquire
 * reply teaches the fail-open local limiter are then used: a few local
 * acquires, settles and refunds on a path whose buckets a reply may name
 * ("gpt-4o", "gpt-4o/t/acme", "gpt-4o/u/bob"), so hostile periods and limits
 * reach the sliding window arithmetic (common/limiter/window.c).
 *
 * The first byte picks how many requests the call asked for (1..256). */
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "limiter/limiter_local.h"
#include "limiter/limiter_reply.h"

static struct llmq_grant grants[LLMQ_ACQUIRE_MAX_BATCH];

static void use_local(struct llmq_local_limiter *local, const uint8_t *data, size_t size)
{
    struct llmq_path path;
    if (llmq_path_init(&path, "acct", "gpt-4o", "acme", "bob", NULL) != LLMQ_OK)
        __builtin_trap();
    int64_t now_ms = 1000;
    for (size_t i = 0; i < 8; i++) {
        /* costs and clock steps drawn from the input, so they vary too */
        uint8_t b = size > i ? data[size - 1 - i] : (uint8_t)i;
        int64_t cost = (int64_t)b * (b & 1 ? 1000 : 1);
        struct llmq_grant g;
        if (llmq_local_limiter_acquire(local, &path, cost, now_ms, &g) != LLMQ_OK)
            return;
        if (g.decision == LLMQ_GRANTED)
            llmq_local_limiter_adjust(local, g.reservation, (b & 2) ? -1 : cost / 2);
        now_ms += (int64_t)(b & 0x0f) * 997;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = (size_t)fuzz_take_byte(&data, &size) + 1;
    redisReply *r = fuzz_reply_from_bytes(data, size);
    if (r == NULL)
        return 0;
    int64_t costs[LLMQ_ACQUIRE_MAX_BATCH];
    for (size_t i = 0; i < n; i++)
        costs[i] = (int64_t)(i * 37 % 1000);

    struct llmq_local_limiter local;
    llmq_local_limiter_init(&local, 0.5);
    size_t decided = 0;
    struct llmq_error err = {0};
    enum llmq_rc rc = llmq_acquire_reply_parse(r, "acct", costs, grants, n, &decided, &local, &err);
    if (decided > n || (rc != LLMQ_OK && rc != LLMQ_ESCRIPT))
        __builtin_trap();
    for (size_t i = 0; rc == LLMQ_OK && i < decided; i++) {
        if (grants[i].decision != LLMQ_GRANTED)
            continue;
        /* a granted reservation must be one settle/refund accepts */
        struct llmq_adjust_args a;
        if (llmq_adjust_args_build(&a, grants[i].reservation, 1, &err) != LLMQ_OK)
            __builtin_trap();
    }
    use_local(&local, data, size);
    llmq_local_limiter_free(&local);

    int64_t v;
    llmq_integer_reply_parse(r, "settle", &v, &err);
    freeReplyObject(r);
    return 0;
}
