/* Pushing jobs to Redis: lua/enqueue.lua over a pipelined synchronous
 * connection, several jobs per call.
 *
 * Rounds overlap: round k is flushed to Redis, then the replies of round k-1
 * are read while Redis works on round k, so neither side waits for the other
 * more than one round. Every reply is read even after an error, so the
 * connection stays in step. A missing-function reply (the library flushed mid-push) makes
 * that call run again, synchronously, once the pipeline is drained. */
#include "jobs/job_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job_pack.h"
#include "jobs/job_result.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/redis_async.h"
#include "redis/reply_read.h"
#include "redis/script.h"
#include "llmq/limiter.h"
#include "llmq/priority.h"

#define FIELDS_PER_JOB 16 /* with {pins}, {fb}, {cache} and {ow}; 12 without */
#define CACHE_FIELD_MAX (16 + NUM_LEN + LLMQ_JOB_CACHE_KEY_HEX) /* "<mode> <ttl_s> <key>[ t]" */
#define FB_FIELD_MAX (LLMQ_NAME_MAX + 2 * NUM_LEN + 3)          /* "[=]<model> <cost> <prompt>" */
#define NUMS_PER_JOB 6
#define NUM_LEN 24

enum llmq_rc llmq_job_store_prepare(redisContext *c, const char *prefix, struct llmq_error *err)
{
    for (int i = 0; i < LLMQ_PRIORITY_COUNT; i++) {
        char key[LLMQ_KEY_FIXED_MAX];
        enum llmq_rc krc = llmq_key(key, sizeof(key), prefix, LLMQ_KEY_QUEUE,
                                    llmq_priority_name(llmq_priority_by_rank(i)), err);
        if (krc != LLMQ_OK)
            return krc;
        redisReply *r = llmq_redis_command(c, "XGROUP CREATE %s %s 0 MKSTREAM", key, LLMQ_GROUP);
        int ok =
            r != NULL && (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "BUSYGROUP", 9) == 0);
        if (!ok) {
            enum llmq_rc rc = llmq_redis_error(c, r, "XGROUP CREATE", err);
            if (r != NULL)
                freeReplyObject(r);
            return rc;
        }
        freeReplyObject(r);
    }
    return llmq_script_ensure_loaded(c, err);
}

/* Options of an enqueue call at most (lua/enqueue.lua: {held}, {lease=..},
 * {key=..}, {pins}, {fb}, {cache}, {ow}). */
#define OPTS_MAX 7

/* The arguments of one enqueue call: KEYS[1], the options, then
 * FIELDS_PER_JOB per job. Numbers, options and packed bodies
 * (jobs/job_pack.h) are made here; everything else is borrowed from jobs.
 * The packed bodies live until the next build_call or call_args_free (the
 * command is formatted before either). */
struct call_args {
    const char *argv[1 + OPTS_MAX + LLMQ_JOB_STORE_JOBS_PER_CALL * FIELDS_PER_JOB];
    size_t argvlen[1 + OPTS_MAX + LLMQ_JOB_STORE_JOBS_PER_CALL * FIELDS_PER_JOB];
    char nums[LLMQ_JOB_STORE_JOBS_PER_CALL][NUMS_PER_JOB][NUM_LEN];
    char fb[LLMQ_JOB_STORE_JOBS_PER_CALL][FB_FIELD_MAX];
    char cache[LLMQ_JOB_STORE_JOBS_PER_CALL][CACHE_FIELD_MAX];
    char lease_opt[LLMQ_JOB_ID_MAX + 16];
    char key_opt[80];
    char *packed[LLMQ_JOB_STORE_JOBS_PER_CALL];
    struct llmq_job_packer *packer; /* NULL: bodies go as they are */
    int argc;
};

static struct call_args *call_args_new(void)
{
    struct call_args *a = calloc(1, sizeof(struct call_args));
    if (a != NULL)
        a->packer = llmq_job_packer_new();
    return a;
}

static void call_args_drop_packed(struct call_args *a)
{
    for (size_t i = 0; i < LLMQ_JOB_STORE_JOBS_PER_CALL; i++) {
        free(a->packed[i]);
        a->packed[i] = NULL;
    }
}

static void call_args_free(struct call_args *a)
{
    if (a == NULL)
        return;
    call_args_drop_packed(a);
    llmq_job_packer_free(a->packer);
    free(a);
}

static void arg(struct call_args *a, const char *s, size_t len)
{
    a->argv[a->argc] = s;
    a->argvlen[a->argc] = len;
    a->argc++;
}

static void num_arg(struct call_args *a, char *buf, long long v)
{
    int len = snprintf(buf, NUM_LEN, "%lld", v);
    arg(a, buf, (size_t)len);
}

/* Job j's body as it is stored: packed when that makes it shorter, else
 * (or when packing fails: the text is a valid stored value too) the text. */
static void body_arg(struct call_args *a, size_t i, const struct llmq_job *j)
{
    size_t len = 0;
    if (a->packer != NULL &&
        llmq_job_packer_pack(a->packer, j->body, j->body_len, &a->packed[i], &len, NULL) ==
            LLMQ_OK &&
        a->packed[i] != NULL)
        arg(a, a->packed[i], len);
    else
        arg(a, j->body, j->body_len);
}

/* A gate's names fit the option buffers of build_call. */
static enum llmq_rc gate_check(const struct llmq_job_gate *gate, struct llmq_error *err)
{
    if (gate != NULL && gate->lease != NULL && strlen(gate->lease) > LLMQ_JOB_ID_MAX)
        return llmq_error_set(err, LLMQ_EINVAL, "enqueue: lease name too long");
    if (gate != NULL && gate->key_id != NULL && strlen(gate->key_id) > 64)
        return llmq_error_set(err, LLMQ_EINVAL, "enqueue: key id too long");
    return LLMQ_OK;
}

/* 1 when job j goes with a {cache} value: a mode other than off, and its
 * key (a job built elsewhere than llmq_job_from_*, e.g. from a gateway
 * file's record, has none and asks nothing). */
static int cache_used(const struct llmq_job *j)
{
    return j->cache != LLMQ_JOB_CACHE_OFF && j->cache_key[0] != '\0';
}

static void build_call(struct call_args *a, const char *prefix, const struct llmq_job_gate *gate,
                       const struct llmq_job *jobs, size_t n)
{
    a->argc = 0;
    call_args_drop_packed(a);
    arg(a, prefix, strlen(prefix));
    if (gate != NULL && gate->held)
        arg(a, "{held}", 6);
    if (gate != NULL && gate->lease != NULL) {
        int len = snprintf(a->lease_opt, sizeof(a->lease_opt), "{lease=%s}", gate->lease);
        arg(a, a->lease_opt, (size_t)len);
    }
    if (gate != NULL && gate->key_id != NULL) {
        int len = snprintf(a->key_opt, sizeof(a->key_opt), "{key=%s}", gate->key_id);
        arg(a, a->key_opt, (size_t)len);
    }
    /* A 13th field per job, the endpoint pin, only in calls that have one:
     * every other call is as before. */
    int pins = 0;
    for (size_t i = 0; i < n; i++)
        pins |= jobs[i].endpoints != NULL;
    if (pins)
        arg(a, "{pins}", 6);
    /* and one more, the cost as the model's fallback, only in calls that
     * have one (llmq_job_store_fallbacks) */
    int fb = 0;
    for (size_t i = 0; i < n; i++)
        fb |= jobs[i].fallback_model != NULL || jobs[i].fallback_only;
    if (fb)
        arg(a, "{fb}", 4);
    /* and one more, the job's cache mode, TTL and key, only in calls that
     * have a job that uses the cache */
    int cache = 0;
    for (size_t i = 0; i < n; i++)
        cache |= cache_used(&jobs[i]);
    if (cache)
        arg(a, "{cache}", 7);
    /* and one more, the completion window (offload), only in calls that have one */
    int ow = 0;
    for (size_t i = 0; i < n; i++)
        ow |= jobs[i].completion_window_ms > 0;
    if (ow)
        arg(a, "{ow}", 4);
    for (size_t i = 0; i < n; i++) {
        const struct llmq_job *j = &jobs[i];
        const char *prio = llmq_priority_name(j->priority);
        arg(a, j->id, strlen(j->id));
        arg(a, prio, strlen(prio));
        arg(a, j->model, strlen(j->model));
        arg(a, j->url, strlen(j->url));
        body_arg(a, i, j);
        num_arg(a, a->nums[i][0], j->cost.total_tokens);
        arg(a, j->tenant ? j->tenant : "", j->tenant ? strlen(j->tenant) : 0);
        arg(a, j->user ? j->user : "", j->user ? strlen(j->user) : 0);
        num_arg(a, a->nums[i][1], j->deadline_ms);
        num_arg(a, a->nums[i][2], j->ttl_ms);
        num_arg(a, a->nums[i][3], j->max_attempts);
        num_arg(a, a->nums[i][4], j->cost.prompt_tokens);
        if (pins)
            arg(a, j->endpoints ? j->endpoints : "", j->endpoints ? strlen(j->endpoints) : 0);
        if (fb) {
            /* "=" first: that fallback only (lua/lib/sched_decide.lua) */
            const char *only = j->fallback_only ? "=" : "";
            int len = j->fallback_model == NULL
                          ? snprintf(a->fb[i], sizeof(a->fb[i]), "%s", only)
                          : snprintf(a->fb[i], sizeof(a->fb[i]), "%s%.200s %lld %lld", only,
                                     j->fallback_model, j->fallback_cost.total_tokens,
                                     j->fallback_cost.prompt_tokens);
            arg(a, a->fb[i], (size_t)len);
        }
        if (cache) {
            int len = !cache_used(j) ? 0
                                     : snprintf(a->cache[i], sizeof(a->cache[i]), "%s %lld %s%s",
                                                j->cache == LLMQ_JOB_CACHE_USE       ? "use"
                                                : j->cache == LLMQ_JOB_CACHE_REFRESH ? "refresh"
                                                                                     : "default",
                                                j->cache_ttl_s, j->cache_key,
                                                j->cache_store_truncated ? " t" : "");
            arg(a, a->cache[i], (size_t)len);
        }
        if (ow)
            num_arg(a, a->nums[i][5], j->completion_window_ms);
    }
}

/* Reads the outcomes of one enqueue reply covering n jobs into out[0..n).
 * Returns 0, or -1 with err filled (an error reply, or an unexpected shape).
 * Shared by the synchronous and the asynchronous push. */
static int parse_outcomes(redisContext *c, const redisReply *r, size_t n,
                          struct llmq_job_outcome *out, struct llmq_error *err)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != n) {
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            llmq_redis_error(c, r, "enqueue", err);
        else
            llmq_error_set(err, LLMQ_ESCRIPT, "enqueue: unexpected reply");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_STRING) {
            llmq_error_set(err, LLMQ_ESCRIPT, "enqueue: unexpected reply element");
            return -1;
        }
        out[i].created = e->element[0]->integer == 1;
        snprintf(out[i].state, sizeof(out[i].state), "%s", e->element[1]->str);
    }
    return 0;
}

/* Reads the reply of one call covering n jobs into out[0..n). Returns 1 for
 * a missing function or a cluster's redirection (to run again: neither
 * ran), 0 when done, -1 on error (err filled). */
static int take_reply(redisContext *c, redisReply *r, size_t n, struct llmq_job_outcome *out,
                      struct llmq_error *err)
{
    if (llmq_script_must_resend(c, r))
        return 1;
    return parse_outcomes(c, r, n, out, err);
}

/* One pipelined round: calls [first, first + ncalls) of the push. */
struct round {
    size_t first_job;
    size_t ncalls;
};

static size_t call_jobs(size_t call_first_job, size_t n)
{
    size_t left = n - call_first_job;
    return left < LLMQ_JOB_STORE_JOBS_PER_CALL ? left : LLMQ_JOB_STORE_JOBS_PER_CALL;
}

/* Reads the replies of round rd. Calls that met a missing function are marked in redo
 * (indexed by call number). Returns the first error (reading on regardless). */
static enum llmq_rc read_round(redisContext *c, const struct round *rd, size_t n,
                               struct llmq_job_outcome *out, unsigned char *redo,
                               struct llmq_error *err)
{
    enum llmq_rc rc = LLMQ_OK;
    size_t job = rd->first_job;
    for (size_t k = 0; k < rd->ncalls; k++) {
        size_t cj = call_jobs(job, n);
        void *reply = NULL;
        if (redisGetReply(c, &reply) != REDIS_OK) {
            if (reply != NULL)
                freeReplyObject(reply);
            return llmq_redis_error(c, NULL, "enqueue", err);
        }
        int t = take_reply(c, reply, cj, out + job, rc == LLMQ_OK ? err : NULL);
        if (t == 1)
            redo[job / LLMQ_JOB_STORE_JOBS_PER_CALL] = 1;
        else if (t < 0 && rc == LLMQ_OK)
            rc = err ? err->rc : LLMQ_ESCRIPT;
        freeReplyObject(reply);
        job += cj;
    }
    return rc;
}

/* Appends round rd's calls and flushes them to the socket. */
static enum llmq_rc send_round(redisContext *c, const char *prefix,
                               const struct llmq_job_gate *gate, const struct llmq_job *jobs,
                               size_t n, const struct round *rd, struct call_args *a,
                               struct llmq_error *err)
{
    size_t job = rd->first_job;
    for (size_t k = 0; k < rd->ncalls; k++) {
        size_t cj = call_jobs(job, n);
        build_call(a, prefix, gate, jobs + job, cj);
        if (llmq_script_append(c, LLMQ_SCRIPT_ENQUEUE, 1, a->argc, a->argv, a->argvlen) != LLMQ_OK)
            return llmq_error_set(err, LLMQ_ENOMEM, "enqueue: cannot buffer command");
        job += cj;
    }
    int done = 0;
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return llmq_redis_error(c, NULL, "enqueue", err);
    return LLMQ_OK;
}

/* Runs again, one by one, the calls that met a missing function (llmq_script_run loads
 * the script). */
static enum llmq_rc redo_calls(redisContext *c, const char *prefix,
                               const struct llmq_job_gate *gate, const struct llmq_job *jobs,
                               size_t n, const unsigned char *redo, struct call_args *a,
                               struct llmq_job_outcome *out, struct llmq_error *err)
{
    for (size_t job = 0; job < n; job += LLMQ_JOB_STORE_JOBS_PER_CALL) {
        if (!redo[job / LLMQ_JOB_STORE_JOBS_PER_CALL])
            continue;
        size_t cj = call_jobs(job, n);
        build_call(a, prefix, gate, jobs + job, cj);
        redisReply *r =
            llmq_script_run(c, LLMQ_SCRIPT_ENQUEUE, 1, a->argc, a->argv, a->argvlen, err);
        if (r == NULL)
            return err ? err->rc : LLMQ_EREDIS;
        int t = take_reply(c, r, cj, out + job, err);
        freeReplyObject(r);
        if (t != 0)
            return t < 0 && err
                       ? err->rc
                       : llmq_error_set(err, LLMQ_ESCRIPT,
                                        "enqueue: function not found after loading the library");
    }
    return LLMQ_OK;
}

static int same_names(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Before a push of several calls: one enqueue {check} call with a job of
 * each distinct (model, tenant, user) of jobs[0..n) (at most one call's
 * worth; beyond that each call still checks its own), so that a job the
 * script would refuse (a USD budget and no price) refuses the whole push
 * before anything of it is written. */
static enum llmq_rc push_precheck(redisContext *c, const char *prefix, const struct llmq_job *jobs,
                                  size_t n, struct call_args *a, struct llmq_error *err)
{
    struct llmq_job picks[LLMQ_JOB_STORE_JOBS_PER_CALL];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && !(strcmp(picks[j].model, jobs[i].model) == 0 &&
                          same_names(picks[j].tenant, jobs[i].tenant) &&
                          same_names(picks[j].user, jobs[i].user)))
            j++;
        if (j < k)
            continue;
        if (k == LLMQ_JOB_STORE_JOBS_PER_CALL)
            return LLMQ_OK;
        picks[k] = jobs[i];
        picks[k].body_len = 0; /* sent as "": only the names are checked */
        k++;
    }
    build_call(a, prefix, NULL, picks, k);
    /* the option goes first, after KEYS[1] */
    memmove(&a->argv[2], &a->argv[1], (size_t)(a->argc - 1) * sizeof(a->argv[0]));
    memmove(&a->argvlen[2], &a->argvlen[1], (size_t)(a->argc - 1) * sizeof(a->argvlen[0]));
    a->argv[1] = "{check}";
    a->argvlen[1] = 7;
    a->argc++;
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_ENQUEUE, 1, a->argc, a->argv, a->argvlen, err);
    if (r == NULL)
        return err ? err->rc : LLMQ_EREDIS;
    enum llmq_rc rc = LLMQ_OK;
    if (r->type == REDIS_REPLY_ERROR)
        rc = llmq_redis_error(c, r, "enqueue", err);
    freeReplyObject(r);
    return rc;
}

enum llmq_rc llmq_job_store_push(redisContext *c, const char *prefix, const struct llmq_job *jobs,
                                 size_t n, struct llmq_job_outcome *out, struct llmq_error *err)
{
    return llmq_job_store_push_gated(c, prefix, NULL, jobs, n, out, err);
}

enum llmq_rc llmq_job_store_push_gated(redisContext *c, const char *prefix,
                                       const struct llmq_job_gate *gate,
                                       const struct llmq_job *jobs, size_t n,
                                       struct llmq_job_outcome *out, struct llmq_error *err)
{
    enum llmq_rc bad = gate_check(gate, err);
    if (bad != LLMQ_OK)
        return bad;
    size_t per_round = (size_t)LLMQ_JOB_STORE_JOBS_PER_CALL * LLMQ_JOB_STORE_CALLS_PER_ROUND;
    struct call_args *a = call_args_new();
    unsigned char *redo = calloc(n / LLMQ_JOB_STORE_JOBS_PER_CALL + 1, 1);
    enum llmq_rc rc = LLMQ_OK;
    struct round prev = {0, 0};
    if (a == NULL || redo == NULL)
        rc = llmq_error_set(err, LLMQ_ENOMEM, "enqueue: out of memory");
    if (rc == LLMQ_OK && n > LLMQ_JOB_STORE_JOBS_PER_CALL)
        rc = push_precheck(c, prefix, jobs, n, a, err);
    for (size_t first = 0; rc == LLMQ_OK && first < n; first += per_round) {
        size_t here = n - first < per_round ? n - first : per_round;
        struct round cur = {first, (here + LLMQ_JOB_STORE_JOBS_PER_CALL - 1) /
                                       LLMQ_JOB_STORE_JOBS_PER_CALL};
        rc = send_round(c, prefix, gate, jobs, n, &cur, a, err);
        if (rc != LLMQ_OK)
            prev.ncalls = 0; /* the connection is broken: nothing more can be read */
        else
            rc = read_round(c, &prev, n, out, redo, err);
        prev = rc == LLMQ_OK || !c->err ? cur : (struct round){0, 0};
    }
    /* The last round sent (or, after a script error, the one in flight) is
     * drained so the connection stays in step. */
    if (!c->err && prev.ncalls > 0) {
        enum llmq_rc last = read_round(c, &prev, n, out, redo, rc == LLMQ_OK ? err : NULL);
        if (rc == LLMQ_OK)
            rc = last;
    }
    if (rc == LLMQ_OK)
        rc = redo_calls(c, prefix, gate, jobs, n, redo, a, out, err);
    call_args_free(a);
    free(redo);
    return rc;
}

enum llmq_rc llmq_job_store_fallbacks(redisContext *c, const char *prefix, struct llmq_job *jobs,
                                      size_t n, const struct llmq_cost_options *opt,
                                      struct llmq_error *err)
{
    char key[LLMQ_KEY_FIXED_MAX];
    enum llmq_rc rc = llmq_key(key, sizeof(key), prefix, LLMQ_KEY_EP_FALLBACKS, NULL, err);
    if (rc != LLMQ_OK || n == 0)
        return rc;
    redisReply *r = llmq_redis_command(c, "HGETALL %s", key);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        rc = llmq_redis_error(c, r, "HGETALL fallbacks", err);
        if (r != NULL)
            freeReplyObject(r);
        return rc;
    }
    for (size_t i = 0; rc == LLMQ_OK && i < n; i++) {
        for (size_t k = 0; k + 1 < r->elements; k += 2) {
            const redisReply *m = r->element[k], *fb = r->element[k + 1];
            if (m->type == REDIS_REPLY_STRING && fb->type == REDIS_REPLY_STRING &&
                strcmp(m->str, jobs[i].model) == 0 && strlen(fb->str) <= LLMQ_NAME_MAX) {
                rc = llmq_job_estimate_as(&jobs[i], fb->str, opt, err);
                break;
            }
        }
    }
    freeReplyObject(r);
    return rc;
}

enum llmq_rc llmq_job_store_result(redisContext *c, const char *prefix, const char *id, char **line,
                                   int *dead, struct llmq_error *err)
{
    struct llmq_job_result r;
    enum llmq_rc rc = llmq_job_result_read(c, prefix, &id, 1, &r, err);
    if (rc != LLMQ_OK)
        return rc;
    if (r.line == NULL)
        return llmq_error_set(err, LLMQ_ENOTFOUND, "job %s has no result", id);
    *line = r.line;
    if (dead != NULL)
        *dead = r.dead;
    return LLMQ_OK;
}

/* An integer field of the hash P <kind>, or def. */
static long long hash_int(redisContext *c, const char *prefix, enum llmq_key_kind kind,
                          const char *field, long long def)
{
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_key(key, sizeof(key), prefix, kind, NULL, NULL) != LLMQ_OK)
        return def;
    redisReply *r = llmq_redis_command(c, "HGET %s %s", key, field);
    long long v = llmq_reply_int_or(r, def);
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

long long llmq_job_store_setting(redisContext *c, const char *prefix, const char *field,
                                 long long def)
{
    return hash_int(c, prefix, LLMQ_KEY_SETTINGS, field, def);
}

int llmq_job_store_cache_defaults(redisContext *c, const char *prefix)
{
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_key(key, sizeof(key), prefix, LLMQ_KEY_CACHE_CONFIG, NULL, NULL) != LLMQ_OK)
        return 1;
    redisReply *r = llmq_redis_command(c, "EXISTS %s", key);
    int v = (int)llmq_reply_int_or(r, 1) != 0;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

long long llmq_job_store_stat(redisContext *c, const char *prefix, const char *field)
{
    return hash_int(c, prefix, LLMQ_KEY_STATS, field, 0);
}

/* One asynchronous push. At most LLMQ_JOB_STORE_ASYNC_WINDOW of its calls
 * are in flight: the next is sent as one is answered, so a 20,000-job batch
 * (313 calls, ~40 MB) never sits whole in the connection's output buffer
 * and Redis's query buffer, and what else the connection carries (a lease
 * renewal, a sync call's push) waits behind a few calls rather than all of
 * them. The gate and prefix are copied; the jobs are borrowed until cb. */
struct push_async {
    struct llmq_redis_async *ra; /* the self-healing connection of ac, NULL: ac alone */
    redisAsyncContext *ac;       /* the connection the push began on */
    char *prefix;
    int held;
    char lease[LLMQ_JOB_ID_MAX + 1], key_id[65];
    int has_lease, has_key_id;
    const struct llmq_job *jobs;
    size_t n;
    size_t next;      /* the first job not sent yet */
    size_t in_flight; /* calls sent and not answered */
    int sending;      /* inside push_async_send: a reply there must not end pa */
    struct call_args *a;
    struct llmq_job_outcome *out;
    llmq_job_store_push_cb *cb;
    void *ud;
    struct llmq_error err; /* the first failure */
};

/* One call of an asynchronous push, covering out[first, first + count). */
struct push_async_call {
    struct push_async *pa;
    size_t first, count;
};

static void push_async_free(struct push_async *pa)
{
    call_args_free(pa->a);
    free(pa->prefix);
    free(pa);
}

/* The connection to send on now: the current context of pa's self-healing
 * connection (it may have moved to another node), or the one it began on. */
static redisAsyncContext *push_async_context(struct push_async *pa)
{
    return pa->ra != NULL ? llmq_redis_async_context(pa->ra) : pa->ac;
}

static void on_push_reply(redisAsyncContext *ac, redisReply *reply, void *privdata);

/* Sends calls until the window is full, every job is sent, or one fails. */
static void push_async_send(struct push_async *pa)
{
    const struct llmq_job_gate gate = {.held = pa->held,
                                       .lease = pa->has_lease ? pa->lease : NULL,
                                       .key_id = pa->has_key_id ? pa->key_id : NULL};
    pa->sending = 1;
    while (pa->err.rc == LLMQ_OK && pa->next < pa->n &&
           pa->in_flight < LLMQ_JOB_STORE_ASYNC_WINDOW) {
        struct push_async_call *call = malloc(sizeof(*call));
        if (call == NULL) {
            llmq_error_set(&pa->err, LLMQ_ENOMEM, "enqueue: out of memory");
            break;
        }
        *call = (struct push_async_call){pa, pa->next, call_jobs(pa->next, pa->n)};
        build_call(pa->a, pa->prefix, &gate, pa->jobs + pa->next, call->count);
        redisAsyncContext *ac = push_async_context(pa);
        if (ac == NULL ||
            llmq_script_run_async(ac, LLMQ_SCRIPT_ENQUEUE, 1, pa->a->argc, pa->a->argv,
                                  pa->a->argvlen, on_push_reply, call) != LLMQ_OK) {
            free(call);
            llmq_error_set(&pa->err, LLMQ_EREDIS, "enqueue: cannot send to Redis");
            break;
        }
        pa->in_flight++;
        pa->next += call->count;
    }
    pa->sending = 0;
}

/* Ends pa once nothing is in flight and nothing more will be sent. */
static void push_async_settle(struct push_async *pa)
{
    if (pa->in_flight > 0 || pa->sending)
        return;
    pa->cb(pa->err.rc, &pa->err, pa->ud);
    push_async_free(pa);
}

static void on_push_reply(redisAsyncContext *ac, redisReply *reply, void *privdata)
{
    (void)ac;
    struct push_async_call *call = privdata;
    struct push_async *pa = call->pa;
    struct llmq_error e = {0};
    if (parse_outcomes(NULL, reply, call->count, pa->out + call->first, &e) != 0 &&
        pa->err.rc == LLMQ_OK)
        pa->err = e;
    free(call);
    pa->in_flight--;
    push_async_send(pa); /* nothing after a failure (a NULL reply: the connection went) */
    push_async_settle(pa);
}

enum llmq_rc llmq_job_store_push_async(redisAsyncContext *ac, const char *prefix,
                                       const struct llmq_job_gate *gate,
                                       const struct llmq_job *jobs, size_t n,
                                       struct llmq_job_outcome *out, llmq_job_store_push_cb *cb,
                                       void *ud, struct llmq_error *err)
{
    if (ac == NULL || prefix == NULL || n == 0 || cb == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "enqueue: no connection, jobs or callback");
    enum llmq_rc bad = gate_check(gate, err);
    if (bad != LLMQ_OK)
        return bad;
    struct push_async *pa = calloc(1, sizeof(*pa));
    if (pa == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "enqueue: out of memory");
    pa->a = call_args_new();
    pa->prefix = strdup(prefix);
    if (pa->a == NULL || pa->prefix == NULL) {
        push_async_free(pa);
        return llmq_error_set(err, LLMQ_ENOMEM, "enqueue: out of memory");
    }
    pa->ra = llmq_redis_async_owner(ac);
    pa->ac = ac;
    if (gate != NULL) {
        pa->held = gate->held;
        pa->has_lease = gate->lease != NULL;
        pa->has_key_id = gate->key_id != NULL;
        snprintf(pa->lease, sizeof(pa->lease), "%s", pa->has_lease ? gate->lease : "");
        snprintf(pa->key_id, sizeof(pa->key_id), "%s", pa->has_key_id ? gate->key_id : "");
    }
    pa->jobs = jobs;
    pa->n = n;
    pa->out = out;
    pa->cb = cb;
    pa->ud = ud;
    push_async_send(pa);
    if (pa->in_flight == 0) { /* nothing sent: cb never runs */
        enum llmq_rc rc = llmq_error_set(err, pa->err.rc ? pa->err.rc : LLMQ_EREDIS, "%s",
                                         pa->err.msg[0] ? pa->err.msg : "enqueue: nothing sent");
        push_async_free(pa);
        return rc;
    }
    /* the last reply runs cb (with pa->err when a later call could not be sent) */
    return LLMQ_OK;
}
