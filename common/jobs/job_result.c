/* Reading a job's result (job_result.h): HMGET of the job hash's state,
 * fin_ms and result (the layouts before), and GET of P res:<id>, pipelined.
 * P res:<id> is the job's ended record (its state and fin_ms, then the line:
 * lua/lib/job_ended.lua has the format) or, written before it, the bare
 * line, whose state and fin_ms are the hash's. A line stored packed is
 * unpacked (jobs/job_pack.h). The replies are taken by the same functions
 * on the synchronous and the asynchronous path, so the two read the same
 * way. */
#include "jobs/job_result.h"

#include <stdlib.h>
#include <string.h>

#include "jobs/cache_line.h"
#include "jobs/job_pack.h"
#include "llmq/llmq.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/script.h"

#define RESULT_KEY_MAX (LLMQ_KEY_FIXED_MAX + LLMQ_JOB_ID_MAX)
#define HMGET_FMT "HMGET %s " LLMQ_JOB_RESULT_FIELD " state fin_ms"

void llmq_job_result_clear(struct llmq_job_result *r)
{
    if (r == NULL)
        return;
    free(r->line);
    *r = (struct llmq_job_result){NULL, 0, 0, -1};
}

/* Both keys of id: the job hash and the result string. */
static enum llmq_rc result_keys(const char *prefix, const char *id, char *jk, char *rk,
                                struct llmq_error *err)
{
    enum llmq_rc rc = llmq_key(jk, RESULT_KEY_MAX, prefix, LLMQ_KEY_JOB, id, err);
    return rc == LLMQ_OK ? llmq_key(rk, RESULT_KEY_MAX, prefix, LLMQ_KEY_RESULT, id, err) : rc;
}

/* What the HMGET reply r says: 1 when it holds a result of the previous
 * layout (*line borrowed from r), 0 when it holds none, -1 when it is no
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

/* The text of stored line line[0..len) (packed or JSON text) into out;
 * LLMQ_ENOMEM or LLMQ_EINVAL (a damaged packed line) when it cannot. */
static enum llmq_rc copy_line(struct llmq_job_result *out, const char *line, size_t len,
                              struct llmq_error *err)
{
    struct llmq_error e = {0};
    enum llmq_rc rc =
        llmq_cache_line_read(line, len, LLMQ_JOB_PACK_TEXT_MAX, &out->line, &out->len, &e);
    if (rc != LLMQ_OK)
        return llmq_error_set(err, rc, "reading results: %s", e.msg);
    return LLMQ_OK;
}

/* The header fields of an ended record after its first line (lua/lib/
 * job_ended.lua JOB_ENDED_FIELDS: attempts, enq_ms, run_ms, prio, model,
 * tenant, user, last_error, and in version 2 att), each ended by '\n'. */
#define ENDED_FIELDS_V1 8
#define ENDED_FIELDS_V2 9

/* When v[0..len) is an ended record ("E1" or "E2", s, fin_ms, '\n', its
 * version's header fields, then the line: lua/lib/job_ended.lua), fills
 * *dead and *fin_ms from it,
 * points *line at its line (borrowed from v) and returns 1; else 0 (a
 * result of the layout before: the bare line). */
static int take_record(const char *v, size_t len, int *dead, long long *fin_ms, const char **line,
                       size_t *line_len)
{
    if (len < 4 || v[0] != 'E' || (v[1] != '1' && v[1] != '2') || strchr("dxc", v[2]) == NULL ||
        v[2] == '\0')
        return 0;
    int n_fields = v[1] == '1' ? ENDED_FIELDS_V1 : ENDED_FIELDS_V2;
    long long fin = 0;
    size_t i = 3;
    for (; i < len && v[i] >= '0' && v[i] <= '9' && fin < (1LL << 53); i++)
        fin = fin * 10 + (v[i] - '0');
    if (i == 3 || i >= len || v[i] != '\n')
        return 0;
    for (int fields = 0; fields < n_fields; fields++) {
        const char *nl = memchr(v + i + 1, '\n', len - i - 1);
        if (nl == NULL)
            return 0;
        i = (size_t)(nl - v);
    }
    *dead = v[2] == 'x';
    *fin_ms = fin;
    *line = v + i + 1;
    *line_len = len - i - 1;
    return 1;
}

/* Takes the pair of replies of one job (h: the HMGET's, g: the GET's) into
 * out: the ended record, else the result string and the hash's state,
 * else the hash's field of the layout before that. */
static enum llmq_rc take_pair(const redisReply *h, const redisReply *g, struct llmq_job_result *out,
                              struct llmq_error *err)
{
    const redisReply *old_line = NULL;
    if (take_hash(h, &old_line, &out->dead, &out->fin_ms) < 0 ||
        (g->type != REDIS_REPLY_STRING && g->type != REDIS_REPLY_NIL))
        return llmq_error_set(err, LLMQ_EREDIS, "reading results: unexpected reply");
    const char *line = NULL;
    size_t len = 0;
    if (g->type == REDIS_REPLY_STRING &&
        !take_record(g->str, g->len, &out->dead, &out->fin_ms, &line, &len)) {
        line = g->str;
        len = g->len;
    } else if (g->type != REDIS_REPLY_STRING && old_line != NULL) {
        line = old_line->str;
        len = old_line->len;
    }
    return line != NULL ? copy_line(out, line, len, err) : LLMQ_OK;
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
    for (size_t i = 0; i < n; i++) {
        result_keys(prefix, ids[i], jk, rk, NULL);
        redisAppendCommand(c, HMGET_FMT, jk);
        redisAppendCommand(c, "GET %s", rk);
    }
    enum llmq_rc rc = LLMQ_OK;
    for (size_t i = 0; i < n; i++) {
        redisReply *h = NULL, *g = NULL;
        if (redisGetReply(c, (void **)&h) != REDIS_OK ||
            redisGetReply(c, (void **)&g) != REDIS_OK) {
            freeReplyObject(h);
            rc = llmq_redis_error(c, NULL, "reading results", err);
            break;
        }
        /* a cluster's redirection: that one again, elsewhere (redis.h) */
        result_keys(prefix, ids[i], jk, rk, NULL);
        h = llmq_redis_redo(c, h, HMGET_FMT, jk);
        g = llmq_redis_redo(c, g, "GET %s", rk);
        if ((h == NULL || g == NULL) && rc == LLMQ_OK)
            rc = llmq_error_set(err, LLMQ_EREDIS, "reading results: a cluster node did not answer");
        if (rc != LLMQ_OK || h == NULL || g == NULL) {
            /* drained only: the connection stays in step */
        } else if (h->type == REDIS_REPLY_ERROR) {
            rc = llmq_redis_error(c, h, "reading results", err);
        } else if (g->type == REDIS_REPLY_ERROR) {
            rc = llmq_redis_error(c, g, "reading results", err);
        } else {
            rc = take_pair(h, g, &out[i], err);
        }
        freeReplyObject(h);
        freeReplyObject(g);
    }
    for (size_t i = 0; rc != LLMQ_OK && i < n; i++)
        llmq_job_result_clear(&out[i]);
    return rc;
}

/* One asynchronous read in flight: what the HMGET's reply said (a reply
 * lives only for its callback, so its state and the previous layout's line
 * are copied) until the GET's reply arrives. */
struct result_async {
    llmq_job_result_cb *cb;
    void *ud;
    int hash_failed; /* the HMGET's reply was no such reply */
    int alone;       /* the GET could not be sent: on_hash ends the read */
    struct llmq_job_result hash;
};

/* Tells the caller and ends the read. */
static void async_done(struct result_async *a, enum llmq_rc rc, const char *line, size_t len)
{
    a->cb(rc, line, len, a->hash.dead, a->ud);
    llmq_job_result_clear(&a->hash);
    free(a);
}

/* Ends the read with the text of stored line line[0..len) (packed or not). */
static void async_line(struct result_async *a, const char *line, size_t len)
{
    struct llmq_job_result text = {NULL, 0, 0, -1};
    if (copy_line(&text, line, len, NULL) != LLMQ_OK) {
        async_done(a, LLMQ_EREDIS, NULL, 0);
        return;
    }
    async_done(a, LLMQ_OK, text.line, text.len);
    llmq_job_result_clear(&text);
}

static void on_hash(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct result_async *a = privdata;
    const redisReply *line = NULL;
    int got = take_hash(reply, &line, &a->hash.dead, &a->hash.fin_ms);
    if (got < 0)
        a->hash_failed = 1;
    else if (got > 0 && (a->hash.line = malloc(line->len + 1)) != NULL) {
        memcpy(a->hash.line, line->str, line->len); /* as stored: async_line unpacks it */
        a->hash.len = line->len;
    } else if (got > 0)
        a->hash_failed = 1;
    if (a->alone)
        async_done(a, LLMQ_EREDIS, NULL, 0);
}

static void on_result(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct result_async *a = privdata;
    const redisReply *r = reply;
    if (a->hash_failed || r == NULL ||
        (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL))
        async_done(a, LLMQ_EREDIS, NULL, 0);
    else if (r->type == REDIS_REPLY_STRING) {
        const char *line = r->str;
        size_t len = r->len;
        take_record(r->str, r->len, &a->hash.dead, &a->hash.fin_ms, &line, &len);
        async_line(a, line, len);
    } else if (a->hash.line != NULL)
        async_line(a, a->hash.line, a->hash.len);
    else
        async_done(a, LLMQ_OK, NULL, 0);
}

enum llmq_rc llmq_job_result_read_async(redisAsyncContext *ac, const char *prefix, const char *id,
                                        llmq_job_result_cb *cb, void *ud, struct llmq_error *err)
{
    char jk[RESULT_KEY_MAX], rk[RESULT_KEY_MAX];
    if (ac == NULL || cb == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "reading a result: no connection or callback");
    if (result_keys(prefix, id, jk, rk, err) != LLMQ_OK)
        return LLMQ_EINVAL;
    struct result_async *a = malloc(sizeof(*a));
    if (a == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "reading a result: out of memory");
    *a = (struct result_async){.cb = cb, .ud = ud, .hash = {NULL, 0, 0, -1}};
    /* both followed through a cluster's redirections (in order: the GET's
     * resend queues behind the HMGET's) */
    if (llmq_redis_command_async(ac, on_hash, a, HMGET_FMT, jk) != LLMQ_OK) {
        free(a);
        return llmq_error_set(err, LLMQ_EREDIS, "reading a result: cannot send to Redis");
    }
    /* The HMGET is queued, so its callback will run: when the GET cannot
     * follow (out of memory), that callback ends the read. */
    if (llmq_redis_command_async(ac, on_result, a, "GET %s", rk) != LLMQ_OK)
        a->alone = 1;
    return LLMQ_OK;
}
