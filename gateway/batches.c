/* The Batch API: POST /v1/batches, GET /v1/batches[/{id}],
 * POST /v1/batches/{id}/cancel.
 *
 * Creating a batch reads its input file's requests, checked at upload
 * (batch_input.h: no parse on the loop), checks what may have changed since
 * (the body limit) and what the key and the batch ask (the key's policy, the
 * endpoint), then makes it whole or nothing (see "staging" below): the batch is written
 * hidden (status validating), every line is enqueued held as a job
 * "<batch id>.<custom_id>" (llmq_job_store_push_async, lua/enqueue.lua
 * {held}) with the completion window as the jobs' ttl, and
 * lua/batch_stage.lua commits it: visible, in_progress, every job queued
 * (or, for a batch of completion_window "24h" whose model's offload policy
 * is 'all', staged for a provider batch: docs/DESIGN.md §3.10).
 * From then on the batch's counts and its end are kept by the scripts that
 * end jobs (lua/lib/jobs.lua llmq_jobs_batch_settle): GET only reads.
 * A cancel always ends: the last of its job_cancel calls says every id was
 * looked at, so ids of jobs that never existed end the batch too. */
#include <hiredis/async.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "batches.h"
#include "batch_input.h"
#include "cache_opts.h"
#include "http.h"
#include "ids.h"
#include "jobs/job.h"
#include "jobs/job_store.h"
#include "list.h"
#include "base/log.h"
#include "redis/script.h"
#include "request_step.h"

#define INVALID "invalid_request_error"
#define IDS_PER_COMMAND 1000
#define IDS_PER_CALL 500 /* job ids per script call: bounds each call's time */

static const char *const batch_fields[] = {
    "status",       "endpoint",       "input_file_id", "completion_window",
    "created_at",   "in_progress_at", "expires_at",    "finalizing_at",
    "completed_at", "failed_at",      "expired_at",    "cancelling_at",
    "cancelled_at", "total",          "completed",     "failed",
    "metadata",     "tenant",         "errors",        NULL};
enum {
    F_STATUS,
    F_ENDPOINT,
    F_INPUT,
    F_WINDOW,
    F_CREATED,
    F_IN_PROGRESS,
    F_EXPIRES,
    F_FINALIZING,
    F_COMPLETED_AT,
    F_FAILED_AT,
    F_EXPIRED_AT,
    F_CANCELLING_AT,
    F_CANCELLED_AT,
    F_TOTAL,
    F_COMPLETED,
    F_FAILED,
    F_METADATA,
    F_TENANT,
    F_ERRORS
};

static json_t *time_or_null(const redisReply *v, size_t i)
{
    const char *s = gw_list_val(v, i);
    return s ? json_integer(atoll(s)) : json_null();
}

static long long num(const redisReply *v, size_t i)
{
    const char *s = gw_list_val(v, i);
    return s ? atoll(s) : 0;
}

int gw_batch_visible(const char *status)
{
    return status != NULL && strcmp(status, "validating") != 0;
}

static int terminal(const char *status)
{
    return strcmp(status, "completed") == 0 || strcmp(status, "cancelled") == 0 ||
           strcmp(status, "expired") == 0 || strcmp(status, "failed") == 0;
}

/* OpenAI's Batch object from the HMGET of batch_fields; NULL when it is not
 * the caller's, does not exist, or is still being created (hidden: whole or
 * absent, see staging below). */
static json_t *batch_object(struct gw_request *r, const char *id, const redisReply *v)
{
    const char *status = gw_list_val(v, F_STATUS);
    const char *tenant = gw_list_val(v, F_TENANT);
    if (!gw_batch_visible(status) || strcmp(tenant ? tenant : "", r->key.tenant) != 0)
        return NULL;
    long long completed = num(v, F_COMPLETED), failed = num(v, F_FAILED);
    char out_id[GW_ID_MAX + 16], err_id[GW_ID_MAX + 16];
    snprintf(out_id, sizeof(out_id), "%s%s", GW_FILE_OUT_PREFIX, id);
    snprintf(err_id, sizeof(err_id), "%s%s", GW_FILE_ERR_PREFIX, id);
    int done = terminal(status);
    json_t *md = NULL, *errors = NULL;
    const char *mds = gw_list_val(v, F_METADATA), *errs = gw_list_val(v, F_ERRORS);
    if (mds != NULL)
        md = json_loads(mds, 0, NULL);
    if (errs != NULL)
        errors = json_loads(errs, 0, NULL);
    json_t *counts = json_pack("{s:I, s:I, s:I}", "total", (json_int_t)num(v, F_TOTAL), "completed",
                               (json_int_t)completed, "failed", (json_int_t)failed);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "object", json_string("batch"));
    json_object_set_new(o, "endpoint", json_string(gw_list_val(v, F_ENDPOINT) ?: ""));
    json_object_set_new(o, "errors", errors ? errors : json_null());
    json_object_set_new(o, "input_file_id", json_string(gw_list_val(v, F_INPUT) ?: ""));
    json_object_set_new(o, "completion_window", json_string(gw_list_val(v, F_WINDOW) ?: ""));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "output_file_id",
                        done && completed > 0 ? json_string(out_id) : json_null());
    json_object_set_new(o, "error_file_id", done && failed > 0 ? json_string(err_id) : json_null());
    json_object_set_new(o, "created_at", time_or_null(v, F_CREATED));
    json_object_set_new(o, "in_progress_at", time_or_null(v, F_IN_PROGRESS));
    json_object_set_new(o, "expires_at", time_or_null(v, F_EXPIRES));
    json_object_set_new(o, "finalizing_at", time_or_null(v, F_FINALIZING));
    json_object_set_new(o, "completed_at", time_or_null(v, F_COMPLETED_AT));
    json_object_set_new(o, "failed_at", time_or_null(v, F_FAILED_AT));
    json_object_set_new(o, "expired_at", time_or_null(v, F_EXPIRED_AT));
    json_object_set_new(o, "cancelling_at", time_or_null(v, F_CANCELLING_AT));
    json_object_set_new(o, "cancelled_at", time_or_null(v, F_CANCELLED_AT));
    json_object_set_new(o, "request_counts", counts);
    json_object_set_new(o, "metadata", json_is_object(md) ? md : json_null());
    if (!json_is_object(md))
        json_decref(md);
    return o;
}

static void respond_no_batch(struct gw_request *r, const char *id)
{
    gw_respond_errorf(r, 404, INVALID, "batch_id", NULL, "No batch found with id '%s'.", id);
}

static void on_batch(struct gw_request *r, const redisReply *v)
{
    if (v == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    json_t *o = batch_object(r, r->m.id, v);
    if (o == NULL)
        respond_no_batch(r, r->m.id);
    else
        gw_respond_json(r, 200, o);
}

/* Answers with the batch as it is now. */
static void respond_batch(struct gw_request *r)
{
    gw_object_fetch(r, LLMQ_KEY_GW_BATCH, r->m.id, batch_fields, on_batch);
}

static const struct gw_list_spec batch_list = {
    .index = LLMQ_KEY_GW_BATCHES,
    .object = LLMQ_KEY_GW_BATCH,
    .fields = batch_fields,
    .item = batch_object,
    .limit_default = 20,
    .limit_max = 100,
};

/* ---- runs over a batch's job ids ---- */

/* One script run over many job ids, in calls of IDS_PER_CALL. */
struct chunked {
    size_t left;     /* replies to come, + 1 while sending */
    int failed;      /* a call got an error reply, or none */
    char error[200]; /* the first error ("" none) */
    void (*done)(const struct chunked *ch, void *ud);
    void *ud;
};

static void chunked_release(struct chunked *ch)
{
    if (--ch->left > 0)
        return;
    ch->done(ch, ch->ud);
    free(ch);
}

static void chunked_fail(struct chunked *ch, const char *why)
{
    if (!ch->failed)
        snprintf(ch->error, sizeof(ch->error), "%s", why);
    ch->failed = 1;
}

static void on_chunk(redisAsyncContext *ac, redisReply *reply, void *privdata)
{
    (void)ac;
    struct chunked *ch = privdata;
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR)
        chunked_fail(ch, reply ? reply->str : "Redis did not answer");
    chunked_release(ch);
}

/* Runs script over ids[0..n) (borrowed for the call): each call's arguments
 * are head[0..nh) (head[0] the prefix, KEYS[1]), then up to IDS_PER_CALL ids,
 * then on the last call mark. Calls go in order on one connection, so the
 * last one runs last. done runs once, from the loop, after every reply
 * (inside the last reply's callback). Each call is a step of r
 * (request_step.h; NULL: of no request). Returns 0, or -1 when nothing
 * could be sent (done will not run). */
static int run_chunked(struct gw_request *r, struct gw *gw, enum llmq_script_id script,
                       const char *const *head, int nh, const char *const *ids, size_t n,
                       const char *mark, void (*done)(const struct chunked *ch, void *ud), void *ud)
{
    redisAsyncContext *ac = gw_redis(gw);
    struct chunked *ch = ac ? calloc(1, sizeof(*ch)) : NULL;
    const char **argv = ch ? malloc(sizeof(*argv) * ((size_t)nh + IDS_PER_CALL + 1)) : NULL;
    if (argv == NULL) {
        free(ch);
        return -1;
    }
    ch->done = done;
    ch->ud = ud;
    ch->left = 1;
    size_t first = 0, sent = 0;
    do {
        size_t k = n - first < IDS_PER_CALL ? n - first : IDS_PER_CALL;
        int argc = 0;
        for (int i = 0; i < nh; i++)
            argv[argc++] = head[i];
        for (size_t i = 0; i < k; i++)
            argv[argc++] = ids[first + i];
        first += k;
        if (first >= n)
            argv[argc++] = mark;
        ch->left++;
        if (gw_step_script(r, ac, script, 1, argc, argv, NULL, on_chunk, ch) != LLMQ_OK) {
            ch->left--;
            chunked_fail(ch, "cannot send to Redis");
            break;
        }
        sent++;
    } while (first < n);
    free(argv);
    if (sent == 0) {
        free(ch);
        return -1;
    }
    chunked_release(ch); /* the sending reference; the calls hold theirs */
    return 0;
}

/* The string elements of an array reply, borrowed from it; NULL when out of
 * memory or not an array. */
static const char **reply_strings(const redisReply *rep)
{
    const char **ids = NULL;
    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY)
        ids = malloc(sizeof(*ids) * (rep->elements + 1));
    for (size_t i = 0; ids != NULL && i < rep->elements; i++)
        ids[i] = rep->element[i]->type == REDIS_REPLY_STRING ? rep->element[i]->str : "";
    return ids;
}

/* ---- staging: a batch is whole or absent ----
 * A batch is written hidden (status validating, lease = this gateway's id,
 * its id in P gw:staging), its jobs enqueued held (in no queue), then
 * lua/batch_stage.lua commits it: visible, every job queued. Any failure
 * before it was visible aborts it (nothing is left); a gateway killed
 * part-way leaves it to whichever gateway gw_lease.lua hands it to
 * (gw_batches_recover): committed if it was already visible, else aborted. */

struct gw_stage {
    struct gw *gw;
    char id[40];
    struct gw_stage *next;
    int registered;
};

static void stage_register(struct gw *gw, struct gw_stage *s, const char *id)
{
    s->gw = gw;
    snprintf(s->id, sizeof(s->id), "%s", id);
    s->next = gw->stages;
    gw->stages = s;
    s->registered = 1;
}

static void stage_unregister(struct gw_stage *s)
{
    if (!s->registered)
        return;
    struct gw_stage **p = &s->gw->stages;
    while (*p != NULL && *p != s)
        p = &(*p)->next;
    if (*p == s)
        *p = s->next;
    s->registered = 0;
}

static int stage_active(const struct gw *gw, const char *id)
{
    for (const struct gw_stage *s = gw->stages; s != NULL; s = s->next)
        if (strcmp(s->id, id) == 0)
            return 1;
    return 0;
}

/* Runs batch_stage mode (commit|abort) over every id of batch bid, as
 * steps of r (NULL: none). */
static int stage_run(struct gw_request *r, struct gw *gw, const char *bid, const char *mode,
                     const char *const *ids, size_t n,
                     void (*done)(const struct chunked *ch, void *ud), void *ud)
{
    const char *head[] = {gw->prefix, bid, gw->id, mode};
    return run_chunked(r, gw, LLMQ_SCRIPT_BATCH_STAGE, head, 4, ids, n, "{last}", done, ud);
}

/* 1 when a batch_stage error says the batch is visible (an abort refused). */
static int visible_error(const char *error)
{
    return strncmp(error, "LLMQ_ECONFLICT", 14) == 0;
}

/* A batch gw_lease.lua handed to this gateway. */
struct recovery {
    struct gw_stage stage;
    int commit; /* 1: finish it; 0: roll it back */
};

static void recovery_end(struct recovery *rc)
{
    stage_unregister(&rc->stage);
    free(rc);
}

static void on_recovered(const struct chunked *ch, void *ud)
{
    struct recovery *rc = ud;
    if (ch->failed)
        LLMQ_LOG(LLMQ_LOG_WARN,
                 "gateway: batch %s: %s it failed (%s); tried again at the next "
                 "lease renewal",
                 rc->stage.id, rc->commit ? "finishing" : "rolling back", ch->error);
    else
        LLMQ_LOG(LLMQ_LOG_INFO, "gateway: batch %s: the gateway creating it is gone; %s",
                 rc->stage.id,
                 rc->commit ? "finished it (every job queued)" : "rolled it back (nothing kept)");
    recovery_end(rc);
}

static void on_recover_ids(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct recovery *rc = privdata;
    const char **ids = reply_strings(reply);
    if (ids == NULL || stage_run(NULL, rc->stage.gw, rc->stage.id, rc->commit ? "commit" : "abort",
                                 ids, ((redisReply *)reply)->elements, on_recovered, rc) != 0)
        recovery_end(rc); /* tried again at the next renewal */
    free(ids);
}

void gw_batches_recover(struct gw *gw, const char *id, const char *status)
{
    redisAsyncContext *ac = gw_redis(gw);
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
    if (stage_active(gw, id) || ac == NULL ||
        llmq_key(key, sizeof(key), gw->prefix, LLMQ_KEY_GW_BATCH_JOBS, id, NULL) != LLMQ_OK)
        return;
    struct recovery *rc = calloc(1, sizeof(*rc));
    if (rc == NULL)
        return;
    stage_register(gw, &rc->stage, id);
    rc->commit = strcmp(status, "validating") != 0;
    if (redisAsyncCommand(ac, on_recover_ids, rc, "LRANGE %s 0 -1", key) != REDIS_OK)
        recovery_end(rc);
}

/* ---- create ---- */

struct create {
    struct gw_batch_request req;
    struct gw_batch_input in; /* the input file's requests (batch_input.h) */
    char *job_ids;            /* "<batch id>.<custom_id>" of each, back to back */
    struct llmq_job_outcome *out;
    char id[40];
    const char **ids; /* the jobs' ids, in job_ids */
    char why[200];    /* why the batch was aborted */
    struct gw_stage stage;
};

static void create_free(void *p)
{
    struct create *c = p;
    stage_unregister(&c->stage);
    free(c->req.metadata);
    free(c->ids);
    free(c->job_ids);
    gw_batch_input_clear(&c->in);
    free(c->out);
    free(c);
}

static void on_aborted(const struct chunked *ch, void *ud)
{
    struct gw_request *r = ud;
    struct create *c = r->state;
    if (!ch->failed) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: batch %s: not created (%s); nothing of it was kept",
                 c->id, c->why);
        gw_respond_errorf(r, 503, "server_error", NULL, "service_unavailable",
                          "The batch could not be created (%s); nothing of it was kept. Please "
                          "create it again.",
                          c->why);
    } else if (visible_error(ch->error)) {
        /* it was committed as far as being visible: it stands, and this
         * gateway's next lease renewal queues the rest */
        snprintf(r->m.id, sizeof(r->m.id), "%s", c->id);
        respond_batch(r);
    } else {
        /* hidden still: rolled back once Redis answers (gw_lease.lua) */
        gw_respond_no_redis(r);
    }
}

/* Rolls the batch back, then answers. */
static void abort_batch(struct gw_request *r, const char *why)
{
    struct create *c = r->state;
    snprintf(c->why, sizeof(c->why), "%s", why);
    if (stage_run(r, r->gw, c->id, "abort", c->ids, c->in.n, on_aborted, r) != 0)
        gw_respond_no_redis(r);
}

static void on_committed(const struct chunked *ch, void *ud)
{
    struct gw_request *r = ud;
    struct create *c = r->state;
    if (ch->failed) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: batch %s: commit failed: %s", c->id, ch->error);
        abort_batch(r, ch->error);
        return;
    }
    r->gw->stats.batches_created++;
    LLMQ_LOG(LLMQ_LOG_INFO, "gateway: batch %s: %zu jobs enqueued", c->id, c->in.n);
    snprintf(r->m.id, sizeof(r->m.id), "%s", c->id);
    respond_batch(r);
}

static void on_pushed(enum llmq_rc rc, const struct llmq_error *err, void *ud)
{
    struct gw_request *r = ud;
    struct create *c = r->state;
    size_t taken = 0;
    for (size_t i = 0; rc == LLMQ_OK && i < c->in.n; i++)
        taken += !c->out[i].created;
    if (rc != LLMQ_OK) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: batch %s: enqueue failed: %s", c->id, err->msg);
        abort_batch(r, "Redis failed while its jobs were enqueued");
    } else if (taken > 0) {
        abort_batch(r, "job ids of it were taken");
    } else if (r->gone) {
        abort_batch(r, "the client hung up before it was created");
    } else if (stage_run(r, r->gw, c->id, "commit", c->ids, c->in.n, on_committed, r) != 0) {
        abort_batch(r, "Redis failed before it was committed");
    }
}

static void on_written(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct gw_request *r = privdata;
    struct create *c = r->state;
    redisReply *rep = reply;
    struct llmq_error err = {0};
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
        /* (nothing, or a hidden batch the lease renewal rolls back) */
        gw_respond_no_redis(r);
        return;
    }
    /* each step from here (the push, the commit or the abort) is sent from
     * the callback of the one before: r is kept to the answer */
    char key_id[17]; /* its key's spend budgets apply (lua/lib/budget.lua) */
    snprintf(key_id, sizeof(key_id), "%.16s", r->key.hash);
    const struct llmq_job_gate held = {.held = 1, .key_id = key_id[0] ? key_id : NULL};
    if (gw_step_push(r, ac, r->gw->prefix, &held, c->in.jobs, c->in.n, c->out, on_pushed, r,
                     &err) != LLMQ_OK)
        on_pushed(err.rc ? err.rc : LLMQ_EREDIS, &err, r);
}

/* Writes the hidden batch (hash, job list, P gw:staging entry) in one
 * MULTI/EXEC. */
static void write_batch(struct gw_request *r)
{
    struct create *c = r->state;
    struct gw *gw = r->gw;
    redisAsyncContext *ac = gw_redis(gw);
    if (ac == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    long long now = gw_unix_s();
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX], lkey[sizeof(key)], skey[LLMQ_KEY_FIXED_MAX];
    if (llmq_key(key, sizeof(key), gw->prefix, LLMQ_KEY_GW_BATCH, c->id, NULL) != LLMQ_OK ||
        llmq_key(lkey, sizeof(lkey), gw->prefix, LLMQ_KEY_GW_BATCH_JOBS, c->id, NULL) != LLMQ_OK ||
        llmq_key(skey, sizeof(skey), gw->prefix, LLMQ_KEY_GW_STAGING, NULL, NULL) != LLMQ_OK) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "batch key too long");
        return;
    }
    char created[24], expires[24], total[24];
    snprintf(created, sizeof(created), "%lld", now);
    snprintf(expires, sizeof(expires), "%lld", now + c->req.window_ms / 1000);
    snprintf(total, sizeof(total), "%zu", c->in.n);
    const char *h[] = {"HSET",
                       key,
                       "status",
                       "validating",
                       "lease",
                       gw->id,
                       "endpoint",
                       c->req.endpoint,
                       "input_file_id",
                       c->req.input_file_id,
                       "completion_window",
                       c->req.completion_window,
                       "created_at",
                       created,
                       "expires_at",
                       expires,
                       "total",
                       total,
                       "completed",
                       "0",
                       "failed",
                       "0",
                       "expired",
                       "0",
                       "tenant",
                       r->key.tenant,
                       c->req.metadata ? "metadata" : NULL,
                       c->req.metadata};
    int hn = c->req.metadata ? 28 : 26;
    /* from here until the last batch_stage reply, gw_lease.lua's list of the
     * batches this gateway holds names it: not to be recovered */
    stage_register(gw, &c->stage, c->id);
    int ok = redisAsyncCommand(ac, NULL, NULL, "MULTI") == REDIS_OK &&
             redisAsyncCommandArgv(ac, NULL, NULL, hn, h, NULL) == REDIS_OK;
    const char *argv[2 + IDS_PER_COMMAND];
    for (size_t first = 0; ok && first < c->in.n; first += IDS_PER_COMMAND) {
        size_t k = c->in.n - first;
        if (k > IDS_PER_COMMAND)
            k = IDS_PER_COMMAND;
        argv[0] = "RPUSH";
        argv[1] = lkey;
        for (size_t i = 0; i < k; i++)
            argv[2 + i] = c->ids[first + i];
        ok = redisAsyncCommandArgv(ac, NULL, NULL, (int)(2 + k), argv, NULL) == REDIS_OK;
    }
    ok = ok && redisAsyncCommand(ac, NULL, NULL, "SADD %s %s", skey, c->id) == REDIS_OK;
    if (!ok || gw_step_command(r, ac, on_written, r, "EXEC") != REDIS_OK)
        gw_respond_no_redis(r);
}

/* Checks the input's jobs against the key and the batch, and names them
 * "<batch id>.<custom_id>"; answers r and returns -1 when one is refused.
 * No parse: the jobs were checked when the file was uploaded (batch_input.h);
 * what may have changed since is checked here: the body limit (P settings),
 * and what the key and the batch ask. */
static int prepare_jobs(struct gw_request *r)
{
    struct create *c = r->state;
    struct gw_batch_input *in = &c->in;
    size_t job_body_max = (size_t)r->gw->job_body_max;
    /* the body limit now: a file checked again counted its own (batch_input.h) */
    size_t too_big = 0;
    long first_line = 0;
    size_t first_len = 0;
    for (size_t i = 0; i < in->n; i++)
        if (in->jobs[i].body_len > job_body_max && too_big++ == 0) {
            first_line = in->lines[i];
            first_len = in->jobs[i].body_len;
        }
    if (in->n_invalid > 0 || too_big > 0) {
        char msg[LLMQ_ERROR_MSG_MAX];
        long line = in->invalid_line;
        if (too_big > 0 && (in->n_invalid == 0 || first_line < line)) {
            snprintf(msg, sizeof(msg), "body is over the size limit (%zu > %zu bytes)", first_len,
                     job_body_max);
            line = first_line;
        } else {
            snprintf(msg, sizeof(msg), "%s", in->invalid_msg);
        }
        gw_respond_errorf(r, 400, INVALID, "input_file_id", "invalid_file",
                          "The input file has %zu invalid line(s); line %ld: %s",
                          in->n_invalid + too_big, line, msg);
        return -1;
    }
    if (in->n == 0) {
        gw_respond_errorf(r, 400, INVALID, "input_file_id", "empty_file",
                          "The input file has no requests.");
        return -1;
    }
    gw_new_id("batch_", c->id, sizeof(c->id));
    size_t bl = strlen(c->id), room = 0;
    for (size_t i = 0; i < in->n; i++)
        room += bl + 1 + strlen(in->jobs[i].id) + 1;
    c->job_ids = malloc(room);
    c->ids = malloc(sizeof(*c->ids) * in->n);
    c->out = calloc(in->n, sizeof(*c->out));
    if (c->job_ids == NULL || c->ids == NULL || c->out == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    char *next = c->job_ids;
    for (size_t i = 0; i < in->n; i++) {
        struct llmq_job *j = &in->jobs[i];
        struct gw_error e;
        /* the key's terms replace the line's (strings borrowed from r->key) */
        struct gw_job_terms terms = {j->model, j->tenant, j->user, j->priority};
        enum gw_key_verdict v = gw_key_policy_decide(&r->key, &terms, &e);
        if (v == GW_KEY_REFUSES) {
            gw_respond_errorf(r, 400, INVALID, "input_file_id", e.code,
                              "line %ld (custom_id \"%s\"): %s Nothing of the batch was created.",
                              in->lines[i], j->id, e.msg);
            return -1;
        }
        if (v != GW_KEY_ALLOWS) {
            gw_respond_error(r, &e);
            return -1;
        }
        j->tenant = (char *)terms.tenant;
        j->user = (char *)terms.user;
        j->priority = terms.priority;
        gw_key_policy_fallback(&r->key, j, 0); /* its models hold for the fallback too */
        gw_cache_key_default(&r->key, j);
        if (strcmp(j->url, c->req.endpoint) != 0) {
            gw_respond_errorf(r, 400, INVALID, "endpoint", "mismatched_endpoint",
                              "line %ld: url %s is not the batch's endpoint %s", in->lines[i],
                              j->url, c->req.endpoint);
            return -1;
        }
        size_t n = bl + 1 + strlen(j->id) + 1;
        if (n > LLMQ_JOB_ID_MAX + 1) {
            gw_respond_errorf(r, 400, INVALID, "input_file_id", "invalid_file",
                              "line %ld: custom_id is too long", in->lines[i]);
            return -1;
        }
        snprintf(next, n, "%s.%s", c->id, j->id);
        j->id = next;
        c->ids[i] = next;
        next += n;
        if (j->ttl_ms == 0) /* the line set none: the completion window */
            j->ttl_ms = c->req.window_ms;
        /* "24h", OpenAI's window: a line that can wait it may be offloaded
         * (lua/enqueue.lua {ow} gives it the window as its deadline;
         * lua/batch_stage.lua stages it under its model's policy 'all'); a
         * line whose own deadline or ttl comes sooner runs live */
        if (c->req.window_ms == LLMQ_JOB_COMPLETION_WINDOW_MS && j->deadline_ms <= 0 &&
            j->ttl_ms >= LLMQ_JOB_COMPLETION_WINDOW_MS)
            j->completion_window_ms = LLMQ_JOB_COMPLETION_WINDOW_MS;
    }
    return 0;
}

static void on_input(struct gw_request *r, enum gw_batch_input_status st, struct gw_batch_input *in)
{
    struct create *c = r->state;
    (void)in;
    switch (st) {
    case GW_BATCH_INPUT_OK:
        if (!r->gone && prepare_jobs(r) == 0)
            write_batch(r);
        break;
    case GW_BATCH_INPUT_NO_FILE:
        gw_respond_errorf(r, 404, INVALID, "input_file_id", NULL, "No such File object: %s",
                          c->req.input_file_id);
        break;
    case GW_BATCH_INPUT_NOT_BATCH:
        gw_respond_errorf(r, 400, INVALID, "input_file_id", "invalid_value",
                          "File %s was not uploaded with purpose 'batch'.", c->req.input_file_id);
        break;
    case GW_BATCH_INPUT_NO_REDIS:
        gw_respond_no_redis(r);
        break;
    default:
        gw_respond_errorf(r, 500, "server_error", NULL, NULL,
                          "The input file %s could not be read; nothing of the batch was "
                          "created.",
                          c->req.input_file_id);
        break;
    }
}

static void create(struct gw_request *r)
{
    struct create *c = calloc(1, sizeof(*c));
    struct gw_error e;
    if (c == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    r->state = c;
    r->state_free = create_free;
    if (gw_batch_request_decode(r->body ? r->body : "", r->body_len, r->gw->cfg->max_window_ms,
                                &c->req, &e) != 0) {
        gw_respond_error(r, &e);
        return;
    }
    gw_batch_input_read(r, c->req.input_file_id, (size_t)r->gw->job_body_max, &c->in, on_input);
}

/* ---- cancel ---- */

static void on_cancel_done(const struct chunked *ch, void *ud)
{
    struct gw_request *r = ud;
    if (ch->failed) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: batch %s: cancel failed: %s", r->m.id, ch->error);
        gw_respond_no_redis(r);
    } else {
        r->gw->stats.batches_cancelled++;
        respond_batch(r);
    }
}

static void on_cancel_ids(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    const char **ids = reply_strings(reply);
    const char *head[] = {r->gw->prefix, r->m.id};
    /* the cancel calls (steps of r); their last, '{all}', lets job_cancel
     * end the batch even where jobs were never enqueued */
    if (ids == NULL ||
        run_chunked(r, r->gw, LLMQ_SCRIPT_JOB_CANCEL, head, 2, ids, ((redisReply *)reply)->elements,
                    "{all}", on_cancel_done, r) != 0)
        gw_respond_no_redis(r);
    free(ids);
}

static void on_cancel_batch(struct gw_request *r, const redisReply *v)
{
    if (v == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    json_t *o = batch_object(r, r->m.id, v);
    if (o == NULL) {
        respond_no_batch(r, r->m.id);
        return;
    }
    json_decref(o);
    const char *status = gw_list_val(v, F_STATUS);
    if (terminal(status)) {
        gw_respond_errorf(r, 409, INVALID, NULL, NULL, "Cannot cancel a batch with status %s.",
                          status);
        return;
    }
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
    if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_GW_BATCH_JOBS, r->m.id, NULL) !=
        LLMQ_OK) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "batch key too long");
        return;
    }
    gw_request_command(r, on_cancel_ids, "LRANGE %s 0 -1", key);
}

void gw_batches_create(struct gw_request *r)
{
    create(r);
}

void gw_batches_list(struct gw_request *r)
{
    gw_list_respond(r, &batch_list);
}

void gw_batches_get(struct gw_request *r)
{
    respond_batch(r);
}

void gw_batches_cancel(struct gw_request *r)
{
    gw_object_fetch(r, LLMQ_KEY_GW_BATCH, r->m.id, batch_fields, on_cancel_batch);
}
