/* Reading a job's result (job_result.h): HMGET of the job hash's result,
 * state and fin_ms; GET of the older key P res:<id> only when the hash holds
 * no result. Each reply is taken by one function for both the synchronous
 * and the asynchronous path, so the two read the same way. */
#include "jobs/job_result.h"

#include <stdlib.h>
#include <string.h>

#include "llmq/llmq.h"
#include "redis/keys.h"
#include "redis/redis.h"

#define RESULT_KEY_MAX (LLMQ_KEY_FIXED_MAX + LLMQ_JOB_ID_MAX)
#define HMGET_FMT "HMGET %s " LLMQ_JOB_RESULT_FIELD " state fin_ms"

void llmq_job_result_clear(struct llmq_job_result *r)
{
    if (r == NULL)
        return;
    free(r->line);
    *r = (struct llmq_job_result){NULL, 0, 0, -1};
}

/* Both keys of id: the job hash and the older result key. */
static enum llmq_rc result_keys(const char *prefix, const char *id, char *jk, char *rk,
                                struct llmq_error *err)
{
    enum llmq_rc rc = llmq_key(jk, RESULT_KEY_MAX, prefix, LLMQ_KEY_JOB, id, err);
    return rc == LLMQ_OK ? llmq_key(rk, RESULT_KEY_MAX, prefix, LLMQ_KEY_OLD_RESULT, id, err) : rc;
}

/* What the HMGET reply r says: 1 when it holds the result (*line borrowed
 * from r), 0 when there is none (try the older key), -1 when it is no
 * reply to that HMGET. *dead and *fin_ms are filled in both first cases. */
static int take_hash(const redisReply *r, const redisReply **line, int *dead, long long *fin_ms)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3)
        return -1;
    const redisReply *st = r->element[1], *fin = r->element[2];
    *dead = st->type == REDIS_REPLY_STRING && strcmp(st->str, "dead") == 0;
    *fin_ms = -1;
    if (fin->type == REDIS_REPLY_STRING) {
        char *end = NULL;
        long long v = strtoll(fin->str, &end, 10);
        if (end != fin->str && *end == '\0' && v >= 0)
            *fin_ms = v;
    }
    *line = r->element[0]->type == REDIS_REPLY_STRING ? r->element[0] : NULL;
    return *line != NULL;
}

/* Copies the line of reply s into out; LLMQ_ENOMEM when it cannot. */
static enum llmq_rc copy_line(struct llmq_job_result *out, const redisReply *s,
                              struct llmq_error *err)
{
    out->line = malloc(s->len + 1);
    if (out->line == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "reading results: out of memory");
    memcpy(out->line, s->str, s->len);
    out->line[s->len] = '\0';
    out->len = s->len;
    return LLMQ_OK;
}

/* Reads the n replies of one pipelined round; older[i] is set for the ids
 * whose hash holds no result (hash: the round was the HMGETs, else the
 * GETs of the older key for the ids with older[i] set). */
static enum llmq_rc read_round(redisContext *c, size_t n, int hash, unsigned char *older,
                               struct llmq_job_result *out, struct llmq_error *err)
{
    enum llmq_rc rc = LLMQ_OK;
    for (size_t i = 0; i < n; i++) {
        if (!hash && !older[i])
            continue;
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK)
            return llmq_redis_error(c, NULL, "reading results", err);
        const redisReply *line = NULL;
        if (rc != LLMQ_OK) {
            /* drained only: the connection stays in step */
        } else if (r->type == REDIS_REPLY_ERROR) {
            rc = llmq_redis_error(c, r, "reading results", err);
        } else if (hash) {
            int got = take_hash(r, &line, &out[i].dead, &out[i].fin_ms);
            if (got < 0)
                rc = llmq_error_set(err, LLMQ_EREDIS, "reading results: unexpected reply");
            older[i] = got == 0;
        } else if (r->type == REDIS_REPLY_STRING) {
            line = r;
        }
        if (rc == LLMQ_OK && line != NULL)
            rc = copy_line(&out[i], line, err);
        freeReplyObject(r);
    }
    return rc;
}

enum llmq_rc llmq_job_result_read(redisContext *c, const char *prefix, const char *const *ids,
                                  size_t n, struct llmq_job_result *out, struct llmq_error *err)
{
    char jk[RESULT_KEY_MAX], rk[RESULT_KEY_MAX];
    for (size_t i = 0; i < n; i++) {
        out[i] = (struct llmq_job_result){NULL, 0, 0, -1};
        if (result_keys(prefix, ids[i], jk, rk, err) != LLMQ_OK)
            return LLMQ_EINVAL; /* all keys first: a bad id sends nothing */
    }
    unsigned char *older = calloc(n + 1, 1);
    if (older == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "reading results: out of memory");
    for (size_t i = 0; i < n; i++) {
        llmq_key(jk, sizeof(jk), prefix, LLMQ_KEY_JOB, ids[i], NULL);
        redisAppendCommand(c, HMGET_FMT, jk);
    }
    enum llmq_rc rc = read_round(c, n, 1, older, out, err);
    size_t n_older = 0;
    for (size_t i = 0; rc == LLMQ_OK && i < n; i++)
        if (older[i]) {
            llmq_key(rk, sizeof(rk), prefix, LLMQ_KEY_OLD_RESULT, ids[i], NULL);
            redisAppendCommand(c, "GET %s", rk);
            n_older++;
        }
    if (rc == LLMQ_OK && n_older > 0)
        rc = read_round(c, n, 0, older, out, err);
    free(older);
    for (size_t i = 0; rc != LLMQ_OK && i < n; i++)
        llmq_job_result_clear(&out[i]);
    return rc;
}

/* One asynchronous read in flight. */
struct result_async {
    llmq_job_result_cb *cb;
    void *ud;
    int dead;
    char older_key[RESULT_KEY_MAX];
};

/* Tells the caller and ends the read. */
static void async_done(struct result_async *a, enum llmq_rc rc, const redisReply *line)
{
    a->cb(rc, line != NULL ? line->str : NULL, line != NULL ? line->len : 0, a->dead, a->ud);
    free(a);
}

static void on_older(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    const redisReply *r = reply;
    if (r == NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL))
        async_done(privdata, LLMQ_EREDIS, NULL);
    else
        async_done(privdata, LLMQ_OK, r->type == REDIS_REPLY_STRING ? r : NULL);
}

static void on_hash(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct result_async *a = privdata;
    const redisReply *line = NULL;
    long long fin_ms = -1;
    int got = take_hash(reply, &line, &a->dead, &fin_ms);
    if (got != 0)
        async_done(a, got > 0 ? LLMQ_OK : LLMQ_EREDIS, line);
    else if (redisAsyncCommand(ac, on_older, a, "GET %s", a->older_key) != REDIS_OK)
        async_done(a, LLMQ_EREDIS, NULL); /* disconnecting: no callback will come */
}

enum llmq_rc llmq_job_result_read_async(redisAsyncContext *ac, const char *prefix, const char *id,
                                        llmq_job_result_cb *cb, void *ud, struct llmq_error *err)
{
    char jk[RESULT_KEY_MAX];
    if (ac == NULL || cb == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "reading a result: no connection or callback");
    struct result_async *a = malloc(sizeof(*a));
    if (a == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "reading a result: out of memory");
    *a = (struct result_async){.cb = cb, .ud = ud};
    if (result_keys(prefix, id, jk, a->older_key, err) != LLMQ_OK) {
        free(a);
        return LLMQ_EINVAL;
    }
    if (redisAsyncCommand(ac, on_hash, a, HMGET_FMT, jk) != REDIS_OK) {
        free(a);
        return llmq_error_set(err, LLMQ_EREDIS, "reading a result: cannot send to Redis");
    }
    return LLMQ_OK;
}
