/* Script arguments and reply parsing shared by the limiter clients. Replies
 * are checked element by element: a wrong shape is an error, never a crash. */
#include "limiter_reply.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "path.h"
#include "redis.h"

enum llmq_rc llmq_acquire_args_build(struct llmq_acquire_args *a, const struct llmq_path *path,
                                     int64_t cost, enum llmq_priority prio,
                                     struct llmq_error *err)
{
    if (cost < 0)
        return llmq_error_set(err, LLMQ_EINVAL, "acquire: cost must be >= 0, got %" PRId64, cost);
    enum llmq_rc rc = llmq_account_prefix(path->account, a->prefix, sizeof(a->prefix), err);
    if (rc != LLMQ_OK)
        return rc;
    snprintf(a->cost, sizeof(a->cost), "%" PRId64, cost);
    a->argv[0] = a->prefix;
    a->argv[1] = path->model;
    a->argv[2] = path->tenant;
    a->argv[3] = path->user;
    a->argv[4] = a->cost;
    a->argv[5] = llmq_priority_name(prio);
    return LLMQ_OK;
}

static int reply_int(const redisReply *r, size_t i, int64_t *out)
{
    if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER)
        return -1;
    *out = r->element[i]->integer;
    return 0;
}

static int reply_str(const redisReply *r, size_t i, char *buf, size_t n)
{
    if (i >= r->elements)
        return -1;
    const redisReply *e = r->element[i];
    if (e->type == REDIS_REPLY_INTEGER) {
        snprintf(buf, n, "%lld", e->integer);
        return 0;
    }
    if (e->type != REDIS_REPLY_STRING || e->len >= n)
        return -1;
    memcpy(buf, e->str, e->len);
    buf[e->len] = '\0';
    return 0;
}

static void learn_limits(const redisReply *r, const char *account,
                         struct llmq_local_limiter *local)
{
    for (size_t i = 6; local != NULL && i + 3 < r->elements; i += 4) {
        char name[LLMQ_BUCKET_NAME_MAX];
        int64_t req, tok, period;
        if (reply_str(r, i, name, sizeof(name)) != 0 || reply_int(r, i + 1, &req) != 0 ||
            reply_int(r, i + 2, &tok) != 0 || reply_int(r, i + 3, &period) != 0)
            return;
        llmq_local_limiter_learn(local, account, name, req, tok, period);
    }
}

enum llmq_rc llmq_acquire_reply_parse(const redisReply *r, const char *account,
                                      struct llmq_grant *out, struct llmq_local_limiter *local,
                                      struct llmq_error *err)
{
    memset(out, 0, sizeof(*out));
    if (r->type == REDIS_REPLY_ERROR)
        return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: %s", r->str);
    int64_t status, second;
    char handle[LLMQ_RESERVATION_MAX];
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 6 || reply_int(r, 0, &status) != 0 ||
        reply_int(r, 1, &second) != 0 || reply_int(r, 2, &out->at_ms) != 0)
        return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: unexpected reply shape");
    if (status == 1) {
        out->decision = LLMQ_GRANTED;
        out->reservation_id = second;
        if (reply_str(r, 3, handle, sizeof(handle)) != 0)
            return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: bad reservation in reply");
        int len = snprintf(out->reservation, sizeof(out->reservation), "%s|%s", account, handle);
        if (len < 0 || (size_t)len >= sizeof(out->reservation))
            return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: reservation too long");
    } else if (status == 0 || status == -1) {
        out->decision = status == 0 ? LLMQ_DENIED : LLMQ_NEVER_FITS;
        if (reply_str(r, 3, out->bucket, sizeof(out->bucket)) != 0 ||
            reply_str(r, 4, out->reason, sizeof(out->reason)) != 0)
            return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: bad denial in reply");
        if (status == 0) {
            out->wait_ms = second;
            reply_str(r, 5, out->level, sizeof(out->level));
        } else {
            out->cost = second;
            if (reply_int(r, 5, &out->limit) != 0)
                return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: bad limit in reply");
        }
    } else {
        return llmq_error_set(err, LLMQ_ESCRIPT, "acquire: unknown status %" PRId64, status);
    }
    learn_limits(r, account, local);
    return LLMQ_OK;
}

enum llmq_rc llmq_adjust_args_build(struct llmq_adjust_args *a, const char *reservation,
                                    int64_t actual, struct llmq_error *err)
{
    const char *bar = reservation ? strchr(reservation, '|') : NULL;
    if (bar == NULL || (size_t)(bar - reservation) > LLMQ_NAME_MAX)
        return llmq_error_set(err, LLMQ_EINVAL, "reservation: malformed handle");
    char account[LLMQ_NAME_MAX + 1];
    memcpy(account, reservation, (size_t)(bar - reservation));
    account[bar - reservation] = '\0';
    enum llmq_rc rc = llmq_account_prefix(account, a->prefix, sizeof(a->prefix), err);
    if (rc != LLMQ_OK)
        return rc;
    a->argv[0] = a->prefix;
    a->argv[1] = bar + 1;
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
