/* What the sync and async limiter clients share: the arguments of each
 * script call and the parsing of its reply. Pure functions, no I/O. */
#ifndef LLMQ_LIMITER_REPLY_H
#define LLMQ_LIMITER_REPLY_H

#include <hiredis/hiredis.h>

#include "redis/keys.h"
#include "limiter/limiter_local.h"
#include "llmq/limiter.h"

/* llmq_limiter_config.timeout_ms when it is 0 (llmq/limiter.h). */
#define LLMQ_LIMITER_TIMEOUT_MS_DEFAULT 2000

/* Arguments of one acquire call, with the buffers they point into. */
struct llmq_acquire_args {
    char prefix[LLMQ_KEY_PREFIX_MAX];
    char costs[LLMQ_ACQUIRE_MAX_BATCH][24];
    const char *argv[5 + LLMQ_ACQUIRE_MAX_BATCH];
    int argc;
};

/* Fills *a for path, costs[0..n) and prio: KEYS[1] = prefix, then model,
 * tenant, user, priority, costs. Returns LLMQ_EINVAL for a negative cost, a
 * bad n, or a bad account. */
enum llmq_rc llmq_acquire_args_build(struct llmq_acquire_args *a, const struct llmq_path *path,
                                     const int64_t *costs, size_t n, enum llmq_priority prio,
                                     struct llmq_error *err);

/* Parses acquire's reply (borrowed) for account and the costs[0..n) it was
 * asked for into out[0..n): the grants,
 * then the stopping decision if any; *decided gets how many were filled. The
 * limits it carries are taught to local (may be NULL). Returns LLMQ_OK, or
 * LLMQ_ESCRIPT for an error reply or a reply of the wrong shape. */
enum llmq_rc llmq_acquire_reply_parse(const redisReply *r, const char *account,
                                      const int64_t *costs, struct llmq_grant *out, size_t n,
                                      size_t *decided, struct llmq_local_limiter *local,
                                      struct llmq_error *err);

/* Arguments of settle/refund for a reservation "<account>|<handle>". */
struct llmq_adjust_args {
    char prefix[LLMQ_KEY_PREFIX_MAX];
    char actual[24];
    const char *argv[3]; /* prefix, handle, actual */
    int argc;
};

/* Fills *a; actual < 0 means refund (no actual argument). Returns LLMQ_EINVAL
 * for a malformed reservation. */
enum llmq_rc llmq_adjust_args_build(struct llmq_adjust_args *a, const char *reservation,
                                    int64_t actual, struct llmq_error *err);

/* Arguments of pause. */
struct llmq_pause_args {
    char prefix[LLMQ_KEY_PREFIX_MAX];
    char ms[24];
    const char *argv[3]; /* prefix, bucket, ms */
};

enum llmq_rc llmq_pause_args_build(struct llmq_pause_args *a, const char *account,
                                   const char *bucket, int64_t ms, struct llmq_error *err);

/* Checks an integer reply of settle/refund/pause; *value (may be NULL) gets it. */
enum llmq_rc llmq_integer_reply_parse(const redisReply *r, const char *what, int64_t *value,
                                      struct llmq_error *err);

#endif
