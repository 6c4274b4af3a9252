/* Reading a batch's input file back (see batch_input.h). */
#include "batch_input.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "file_jobs.h"
#include "http.h"
#include "jobs/batch.h"
#include "list.h"
#include "offload.h"
#include "redis/keys.h"
#include "request_step.h"

#define RECORDS_PER_PAGE 1000 /* per LRANGE: bounds one reply */

struct read_op {
    struct gw_offload_task task; /* first: a stored-before-jobs1 file's check */
    struct gw_request *r;        /* held until done ran */
    struct gw_batch_input *in;
    gw_batch_input_done_fn *done;
    char file_id[GW_ID_MAX + 1];
    size_t job_body_max;
    size_t next;   /* the next record to read */
    char *content; /* a stored-before-jobs1 file's bytes, for its check */
    size_t content_len;
    int failed; /* the check ran out of memory */
};

void gw_batch_input_clear(struct gw_batch_input *in)
{
    free(in->jobs);
    free(in->lines);
    free(in->arena);
    free(in->off);
    free(in->len);
    memset(in, 0, sizeof(*in));
}

static void finish(struct read_op *op, enum gw_batch_input_status st)
{
    struct gw_request *r = op->r;
    op->done(r, st, op->in);
    free(op->content);
    free(op);
}

/* Appends one record (a copy) to the arena. Returns 0 or -1 (memory). */
static int append(struct gw_batch_input *in, const char *rec, size_t len)
{
    if (in->n >= in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 1024;
        size_t *off = realloc(in->off, cap * sizeof(*off));
        if (off == NULL)
            return -1;
        in->off = off;
        size_t *l = realloc(in->len, cap * sizeof(*l));
        if (l == NULL)
            return -1;
        in->len = l;
        in->cap = cap;
    }
    if (in->arena_len + len > in->arena_cap) {
        size_t cap = in->arena_cap ? in->arena_cap : 65536;
        while (cap < in->arena_len + len)
            cap *= 2;
        char *a = realloc(in->arena, cap);
        if (a == NULL)
            return -1;
        in->arena = a;
        in->arena_cap = cap;
    }
    memcpy(in->arena + in->arena_len, rec, len);
    in->off[in->n] = in->arena_len;
    in->len[in->n] = len;
    in->arena_len += len;
    in->n++;
    return 0;
}

/* Points every job into its record. Returns 0, or -1 when one is damaged. */
static int decode_all(struct read_op *op)
{
    struct gw_batch_input *in = op->in;
    in->jobs = calloc(in->n ? in->n : 1, sizeof(*in->jobs));
    in->lines = calloc(in->n ? in->n : 1, sizeof(*in->lines));
    if (in->jobs == NULL || in->lines == NULL)
        return -1;
    for (size_t i = 0; i < in->n; i++)
        if (gw_file_job_decode(in->arena + in->off[i], in->len[i], &in->jobs[i], &in->lines[i]) !=
            0) {
            LLMQ_LOG(LLMQ_LOG_WARN, "gateway: file %s: stored request %zu is damaged", op->file_id,
                     i + 1);
            return -1;
        }
    return 0;
}

static void on_page(redisAsyncContext *ac, void *reply, void *privdata);

static void read_page(struct read_op *op)
{
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
    redisAsyncContext *ac = gw_redis(op->r->gw);
    if (ac == NULL || llmq_key(key, sizeof(key), op->r->gw->prefix, LLMQ_KEY_GW_FILE_JOBS,
                               op->file_id, NULL) != LLMQ_OK) {
        finish(op, GW_BATCH_INPUT_NO_REDIS);
        return;
    }
    if (gw_step_command(op->r, ac, on_page, op, "LRANGE %s %lld %lld", key, (long long)op->next,
                        (long long)(op->next + RECORDS_PER_PAGE - 1)) != REDIS_OK)
        finish(op, GW_BATCH_INPUT_NO_REDIS);
}

static void on_page(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct read_op *op = privdata;
    redisReply *rep = reply;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
        finish(op, GW_BATCH_INPUT_NO_REDIS);
        return;
    }
    for (size_t i = 0; i < rep->elements; i++)
        if (rep->element[i]->type != REDIS_REPLY_STRING ||
            append(op->in, rep->element[i]->str, rep->element[i]->len) != 0) {
            finish(op, GW_BATCH_INPUT_FAILED);
            return;
        }
    op->next += rep->elements;
    if (rep->elements == RECORDS_PER_PAGE && !op->r->gone)
        read_page(op);
    else
        finish(op, decode_all(op) == 0 ? GW_BATCH_INPUT_OK : GW_BATCH_INPUT_FAILED);
}

/* ---- a file stored before layout jobs1: checked again, off the loop ---- */

static void check_work(struct gw_offload_task *t)
{
    struct read_op *op = (struct read_op *)t;
    struct gw_batch_input *in = op->in;
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    d.max_body_bytes = op->job_body_max;
    d.cache_defaults = 1; /* as at upload (files.c) */
    struct llmq_batch b = {0};
    struct llmq_error err = {0};
    if (llmq_batch_parse(op->content, op->content_len, &d, &b, &err) != LLMQ_OK) {
        op->failed = 1;
        return;
    }
    in->n_invalid = b.n_errors;
    if (b.n_errors > 0) {
        in->invalid_line = b.errors[0].line;
        snprintf(in->invalid_msg, sizeof(in->invalid_msg), "%s", b.errors[0].msg);
    }
    for (size_t i = 0; !op->failed && i < b.n_jobs; i++) {
        char *rec = NULL;
        size_t len = 0;
        op->failed = gw_file_job_encode(&b.jobs[i], b.job_lines[i], &rec, &len) != 0 ||
                     append(in, rec, len) != 0;
        free(rec);
    }
    llmq_batch_clear(&b);
}

static void check_done(struct gw_offload_task *t)
{
    struct read_op *op = (struct read_op *)t;
    op->in->checked_again = 1;
    op->r->gw->stats.batch_inputs_checked_again++;
    if (t->stopping || op->failed || decode_all(op) != 0)
        finish(op, GW_BATCH_INPUT_FAILED);
    else
        finish(op, GW_BATCH_INPUT_OK);
}

static void on_content(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct read_op *op = privdata;
    redisReply *rep = reply;
    if (rep == NULL || (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_NIL)) {
        finish(op, GW_BATCH_INPUT_NO_REDIS);
        return;
    }
    if (rep->type == REDIS_REPLY_NIL) {
        finish(op, GW_BATCH_INPUT_NO_FILE);
        return;
    }
    /* a copy: the reply is gone when this returns; the check is off the loop */
    op->content = malloc(rep->len + 1);
    if (op->content == NULL) {
        finish(op, GW_BATCH_INPUT_FAILED);
        return;
    }
    memcpy(op->content, rep->str, rep->len);
    op->content[rep->len] = '\0';
    op->content_len = rep->len;
    op->task.work = check_work;
    op->task.done = check_done;
    if (gw_step_offload(op->r, op->r->gw->offload, &op->task) != 0)
        finish(op, GW_BATCH_INPUT_FAILED);
}

/* ---- the file's hash ---- */

static void on_file(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct read_op *op = privdata;
    struct gw_request *r = op->r;
    redisReply *rep = reply;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 3) {
        finish(op, GW_BATCH_INPUT_NO_REDIS);
        return;
    }
    const char *purpose = gw_list_val(rep, 0), *tenant = gw_list_val(rep, 1);
    const char *layout = gw_list_val(rep, 2);
    if (purpose == NULL || strcmp(tenant ? tenant : "", r->key.tenant) != 0) {
        finish(op, GW_BATCH_INPUT_NO_FILE);
    } else if (strcmp(purpose, "batch") != 0) {
        finish(op, GW_BATCH_INPUT_NOT_BATCH);
    } else if (layout != NULL && strcmp(layout, GW_FILE_LAYOUT_JOBS) == 0) {
        read_page(op);
    } else if (layout != NULL) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: file %s: layout %s is not one this version reads",
                 op->file_id, layout);
        finish(op, GW_BATCH_INPUT_FAILED);
    } else {
        char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
        if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_GW_FILE, op->file_id, NULL) !=
                LLMQ_OK ||
            gw_step_command(r, ac, on_content, op, "HGET %s content", key) != REDIS_OK)
            finish(op, GW_BATCH_INPUT_NO_REDIS);
    }
}

int gw_batch_input_read(struct gw_request *r, const char *file_id, size_t job_body_max,
                        struct gw_batch_input *in, gw_batch_input_done_fn *done)
{
    redisAsyncContext *ac = gw_redis(r->gw);
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
    if (ac == NULL) {
        gw_respond_no_redis(r);
        return -1;
    }
    if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_GW_FILE, file_id, NULL) != LLMQ_OK) {
        gw_respond_errorf(r, 404, "invalid_request_error", "input_file_id", NULL,
                          "No such File object: %s", file_id);
        return -1;
    }
    struct read_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return -1;
    }
    op->r = r;
    op->in = in;
    op->done = done;
    op->job_body_max = job_body_max;
    snprintf(op->file_id, sizeof(op->file_id), "%s", file_id);
    /* each of the op's Redis commands and its check are steps of r
     * (request_step.h), one after the other until finish */
    if (gw_step_command(r, ac, on_file, op, "HMGET %s purpose tenant layout", key) != REDIS_OK) {
        free(op);
        gw_respond_no_redis(r);
        return -1;
    }
    return 0;
}
