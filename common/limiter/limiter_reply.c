/* Script arguments and reply parsing shared by the limiter clients. Replies
 * are checked element by element: a wrong shape is an error, never a crash. */
#include "limiter/limiter_reply.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter/path.h"
#include "limiter/reservation.h"
#include "redis/redis.h"
#include "redis/reply_read.h"

enum llmq_rc llmq_acquire_args_build(struct llmq_acquire_args *a, const struct llmq_path *path,
                                     const int64_t *costs, size_t n, enum llmq_priority prio,
                                     struct llmq_error *err)
{
    if (n < 1 || n > LLMQ_ACQUIRE_MAX_BATCH)
        return llmq_error_set(err, LLMQ_EINVAL, "acquire: 1..%d requests per call, got %zu",
                              LLMQ_ACQUIRE_MAX_BATCH, n);
    enum llmq_rc rc = llmq_account_prefix(path->account, a->prefix, sizeof(a->prefix), err);
    if (rc != LLMQ_OK)
        return rc;
    a->argv[0] = a->prefix;
    a->argv[1] = path->model;
    a->argv[2] = path->tenant;
    a->argv[3] = path->user;
    a->argv[4] = llmq_priority_name(prio);
    for (size_t i = 0; i < n; i++) {
        if (costs[i] < 0)
            return llmq_error_set(err, LLMQ_EINVAL, "acquire: cost must be >= 0, got %" PRId64,
                                  costs[i]);
        snprintf(a->costs[i], sizeof(a->costs[i]), "%" PRId64, costs[i]);
        a->argv[5 + i] = a->costs[i];
    }
    a->argc = 5 + (int)n;
    return LLMQ_OK;
}

/* Teaches local the L limits at r[10..10+4L); returns 0, or -1 when the
 * list is malformed. */
static int learn_limits(const redisReply *r, const char *account, struct llmq_local_limiter *local)
{
    int64_t count;
    if (llmq_reply_int(llmq_reply_at(r, 9), &count) != 0 || count < 0 ||
        10 + 4 * (size_t)count != r->elements)
        return -1;
    for (size_t i = 10; i < r->elements; i += 4) {
        char name[LLMQ_BUCKET_NAME_MAX];
        int64_t req, tok, period;
        if (llmq_reply_copy(llmq_reply_at(r, i), name, sizeof(name)) != 0 ||
            llmq_reply_int(llmq_reply_at(r, i + 1), &req) != 0 ||
            llmq_reply_int(llmq_reply_at(r, i + 2), &tok) != 0 ||
            llmq_reply_int(llmq_reply_at(r, i + 3), &period) != 0)
            return -1;
        if (local != NULL)
            llmq_local_limiter_learn(local, account, name, req, tok, period);
    }
    return 0;
}

enum llmq_rc llmq_acquire_reply_parse(const redisReply *r, const char *account,
                                      const int64_t *costs, struct llmq_grant *out, size_t n,
                                      size_t *decided, struct llmq_local_limiter *local,
                                      struct llmq_error *err)
{
    *decided = 0;
    if (r->type == REDIS_REPLY_ERROR)
        return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: %s", r->str);
    int64_t granted, at_ms, stop, fourth, first_id;
    char tags[LLMQ_RESERVATION_MAX];
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 10 ||
        llmq_reply_int(llmq_reply_at(r, 0), &granted) != 0 ||
        llmq_reply_int(llmq_reply_at(r, 1), &at_ms) != 0 ||
        llmq_reply_int(llmq_reply_at(r, 2), &stop) != 0 ||
        llmq_reply_int(llmq_reply_at(r, 3), &fourth) != 0 ||
        llmq_reply_int(llmq_reply_at(r, 7), &first_id) != 0 ||
        llmq_reply_copy(llmq_reply_at(r, 8), tags, sizeof(tags)) != 0 || granted < 0 ||
        (size_t)granted > n || (stop != 0 && (size_t)granted >= n) ||
        learn_limits(r, account, local) != 0)
        return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: unexpected reply shape");
    for (size_t i = 0; i < (size_t)granted; i++) {
        struct llmq_grant *g = &out[i];
        memset(g, 0, sizeof(*g));
        g->decision = LLMQ_GRANTED;
        g->at_ms = at_ms;
        g->reservation_id = first_id + (int64_t)i;
        g->cost = costs[i];
        if (llmq_reservation_format(g->reservation, sizeof(g->reservation), account, "",
                                    g->reservation_id, costs[i], at_ms, tags) != 0)
            return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: reservation too long");
    }
    *decided = (size_t)granted;
    if (stop == 0)
        return LLMQ_OK;
    struct llmq_grant *g = &out[granted];
    memset(g, 0, sizeof(*g));
    g->at_ms = at_ms;
    g->decision = stop == 1 ? LLMQ_DENIED : LLMQ_NEVER_FITS;
    if (llmq_reply_copy(llmq_reply_at(r, 4), g->bucket, sizeof(g->bucket)) != 0 ||
        llmq_reply_copy(llmq_reply_at(r, 5), g->reason, sizeof(g->reason)) != 0)
        return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: bad denial in reply");
    if (stop == 1) {
        g->wait_ms = fourth;
        llmq_reply_copy(llmq_reply_at(r, 6), g->level, sizeof(g->level));
    } else {
        g->cost = fourth;
        if (llmq_reply_int(llmq_reply_at(r, 6), &g->limit) != 0)
            return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: bad limit in reply");
    }
    *decided = (size_t)granted + 1;
    return LLMQ_OK;
}

enum llmq_rc llmq_adjust_args_build(struct llmq_adjust_args *a, const char *reservation,
                                    int64_t actual, struct llmq_error *err)
{
    char account[LLMQ_NAME_MAX + 1];
    const char *handle = llmq_reservation_split(reservation, account, sizeof(account));
    if (handle == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "reservation: malformed handle");
    enum llmq_rc rc = llmq_account_prefix(account, a->prefix, sizeof(a->prefix), err);
    if (rc != LLMQ_OK)
        return rc;
    a->argv[0] = a->prefix;
    a->argv[1] = handle;
    a->argc = 2;
    if (actual >= 0) {
        snprintf(a->actual, sizeof(a->actual), "%" PRId64, actual);
        a->argv[2] = a->actual;
        a->argc = 3;
    }
    return LLMQ_OK;
}

enum llmq_rc llmq_pause_args_build(struct llmq_pause_args *a, const char *account,
                                   const char *bucket, int64_t ms, struct llmq_error *err)
{
    if (ms <= 0)
        return llmq_error_set(err, LLMQ_EINVAL, "pause: ms must be > 0");
    if (bucket == NULL || bucket[0] == '\0' || strlen(bucket) >= LLMQ_BUCKET_NAME_MAX)
        return llmq_error_set(err, LLMQ_EINVAL, "pause: bad bucket name");
    enum llmq_rc rc = llmq_account_prefix(account, a->prefix, sizeof(a->prefix), err);
    if (rc != LLMQ_OK)
        return rc;
    snprintf(a->ms, sizeof(a->ms), "%" PRId64, ms);
    a->argv[0] = a->prefix;
    a->argv[1] = bucket;
    a->argv[2] = a->ms;
    return LLMQ_OK;
}

enum llmq_rc llmq_integer_reply_parse(const redisReply *r, const char *what, int64_t *value,
                                      struct llmq_error *err)
{
    if (r->type == REDIS_REPLY_ERROR)
        return llmq_error_set(err, LLMQ_ESCRIPT, "%s: %s", what, r->str);
    if (r->type != REDIS_REPLY_INTEGER)
        return llmq_error_set(err, LLMQ_ESCRIPT, "%s: unexpected reply type %d", what, r->type);
    if (value != NULL)
        *value = r->integer;
    return LLMQ_OK;
}
