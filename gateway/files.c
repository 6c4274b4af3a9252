/* The Files API, as far as the Batch API needs it.
 *
 * POST /v1/files (multipart, read by MHD's post processor in http.c) takes
 * purpose=batch and a JSONL file, checked whole with the same validation as
 * `llmq enqueue` (llmq_batch_parse) on the offload thread (offload.h), so the
 * loop serves other requests meanwhile: a file with any bad line is refused
 * with the line's number and reason, and nothing is stored. An accepted file
 * (common/redis/keys.h) is its hash P gw:file:<id> (layout jobs1), its bytes
 * P gw:file:<id>:data, the checked requests as records P gw:file:<id>:jobs
 * (file_jobs.h, made on the offload thread with the check, so a batch made
 * of the file reads them instead of checking the JSON again) and its index
 * entry: the bytes and records are staged in bounded steps, the hash and
 * the index entry written last, in one MULTI/EXEC (store, below). Files stored before that layout
 * keep their bytes in the hash's field content: read, listed, served and deleted the same. A
 * batch's output and error files are not stored: they are built from its jobs' results when read
 * ("file-out_<batch id>", "file-err_<batch id>"). Files belong to the tenant
 * of the key that uploaded them: other tenants get 404. */
#include "files.h"

#include <hiredis/async.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "batches.h"
#include "fallbacks.h"
#include "http.h"
#include "ids.h"
#include "jobs/batch.h"
#include "jobs/job.h"
#include "jobs/job_result.h"
#include "list.h"
#include "offload.h"
#include "request_step.h"
#include "tokenizer/unicode.h"
#include "base/log.h"
#include "file_jobs.h"

#define INVALID "invalid_request_error"
/* custom_id room: batch job ids are "<batch id>.<custom_id>" (keys.h) */
#define CUSTOM_ID_MAX (LLMQ_JOB_ID_MAX - 31)

static const char *const meta_fields[] = {"filename",   "purpose", "bytes",
                                          "created_at", "tenant",  NULL};

static int utf8_valid(const char *s)
{
    size_t n = strlen(s);
    return llmq_utf8_valid_prefix((const unsigned char *)s, n) == n;
}

/* The File object; NULL when out of memory. A stored filename that is not
 * UTF-8 (uploads refuse those now; older versions stored them) is shown with
 * U+FFFD for its bad bytes, so the file can still be listed, read and
 * deleted. */
static json_t *file_object(const char *id, const char *filename, const char *purpose,
                           long long bytes, long long created_at)
{
    char *fixed = NULL;
    if (filename != NULL && !utf8_valid(filename)) {
        size_t n = 0;
        unsigned char *u =
            llmq_utf8_sanitize((const unsigned char *)filename, strlen(filename), &n);
        fixed = u ? malloc(n + 1) : NULL;
        if (fixed == NULL) {
            free(u);
            return NULL;
        }
        memcpy(fixed, u, n);
        fixed[n] = '\0';
        free(u);
        filename = fixed;
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:n}", "id", id, "object", "file",
                          "bytes", (json_int_t)bytes, "created_at", (json_int_t)created_at,
                          "filename", filename ? filename : "", "purpose", purpose, "status",
                          "processed", "status_details");
    free(fixed);
    return o;
}

static void respond_no_file(struct gw_request *r, const char *id)
{
    gw_respond_errorf(r, 404, INVALID, "id", NULL, "No such File object: %s", id);
}

/* 1 when the stored tenant is the key's. */
static int owned(const struct gw_request *r, const char *tenant)
{
    return strcmp(tenant ? tenant : "", r->key.tenant) == 0;
}

/* ---- upload ---- */

/* The records of a checked file (file_jobs.h), made on the offload thread. */
struct records {
    char **rec;
    size_t *len;
    size_t n;
};

static void records_free(struct records *rs)
{
    for (size_t i = 0; rs->rec != NULL && i < rs->n; i++)
        free(rs->rec[i]);
    free(rs->rec);
    free(rs->len);
    memset(rs, 0, sizeof(*rs));
}

/* An accepted file being stored (store below): its answer, its records and
 * how far the staging has got. */
struct upload {
    char id[40];
    long long bytes, created_at, lines;
    json_t *answer; /* the File object, built before anything is stored */
    struct records records;
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX], jkey[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
    char dkey[LLMQ_KEY_FIXED_MAX + GW_ID_MAX], ikey[LLMQ_KEY_FIXED_MAX];
    size_t data_sent;    /* bytes of the file staged in dkey */
    size_t records_sent; /* records staged in jkey */
};

static void upload_free(void *p)
{
    struct upload *u = p;
    json_decref(u->answer);
    records_free(&u->records);
    free(u);
}

/* Checks an uploaded file as `llmq enqueue` would and makes its records:
 * 0, or -1 with e set. Pure (runs on the offload thread): borrows body;
 * job_body_max and max_lines are the limits read on the loop, fallbacks
 * the model fallbacks known then (gw_fallbacks_map; NULL: none), whose
 * cost each job of a model with one carries (J2 records). *lines: the
 * file's requests; *out: their records, in file order. */
static int check_file(const char *body, size_t len, size_t job_body_max, long long max_lines,
                      const json_t *fallbacks, long long *lines, struct records *out,
                      struct gw_error *e)
{
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    d.max_body_bytes = job_body_max;
    d.cache_defaults = 1; /* a line that asks nothing keeps its key: its batch's key's or the
                             account's cache default may apply (batches.c, lua/batch_stage.lua) */
    struct llmq_batch b = {0};
    struct llmq_error err = {0};
    if (llmq_batch_parse(body, len, &d, &b, &err) != LLMQ_OK)
        return gw_error_set(e, 500, "server_error", NULL, NULL, "%s", err.msg);
    int rc = 0;
    size_t total = b.n_jobs + b.n_errors;
    if ((long long)total > max_lines)
        rc = gw_error_set(e, 400, INVALID, "file", "too_many_requests_in_file",
                          "The file has %zu requests; the limit is %lld per batch file.", total,
                          max_lines);
    else if (b.n_errors > 0)
        rc = gw_error_set(e, 400, INVALID, "file", "invalid_file",
                          "The file has %zu invalid line(s); line %ld: %s", b.n_errors,
                          b.errors[0].line, b.errors[0].msg);
    else if (b.n_jobs == 0)
        rc = gw_error_set(e, 400, INVALID, "file", "empty_file",
                          "The file has no requests (one JSON object a line).");
    for (size_t i = 0; rc == 0 && i < b.n_jobs; i++)
        if (strlen(b.jobs[i].id) > CUSTOM_ID_MAX)
            rc = gw_error_set(e, 400, INVALID, "file", "invalid_file",
                              "line %ld: custom_id is too long: its job id may have %d bytes "
                              "(whitespace, control characters, '/', '|', '{' and '}' take 3)",
                              b.job_lines[i], CUSTOM_ID_MAX);
    for (size_t i = 0; rc == 0 && i < b.n_jobs; i++)
        if (b.jobs[i].endpoints != NULL) /* the record keeps none: refused, not dropped */
            rc = gw_error_set(e, 400, INVALID, "file", "invalid_file",
                              "line %ld: \"llmq.endpoints\" is not taken by llmq-gateway: the "
                              "endpoints a key's jobs run on are the key's (llmq keys create "
                              "--endpoints)",
                              b.job_lines[i]);
    for (size_t i = 0; rc == 0 && i < b.n_jobs; i++)
        if (gw_fallbacks_map_apply(fallbacks, &b.jobs[i], &err) != LLMQ_OK)
            rc = gw_error_set(e, 400, INVALID, "file", "invalid_file",
                              "line %ld: as its model's fallback: %s", b.job_lines[i], err.msg);
    if (rc == 0) {
        out->rec = calloc(b.n_jobs, sizeof(*out->rec));
        out->len = calloc(b.n_jobs, sizeof(*out->len));
        for (size_t i = 0; out->rec != NULL && out->len != NULL && i < b.n_jobs; i++, out->n++)
            if (gw_file_job_encode(&b.jobs[i], b.job_lines[i], &out->rec[i], &out->len[i]) != 0)
                break;
        if (out->n != b.n_jobs) {
            records_free(out);
            rc = gw_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    *lines = (long long)total;
    llmq_batch_clear(&b);
    return rc;
}

/* Storing a checked file. Its bytes and records are tens of megabytes for
 * a large file. Sent at once, they sat in the connection's output buffer,
 * which hiredis grows by a copy per command and shifts after every partial
 * write: seconds of the loop (issue 33), during which no reply was read, so
 * every other request waited and the connection's command timeout fired.
 * So they are staged a bounded step at a time, the next step sent when
 * Redis has answered the last: the bytes in pieces of STAGE_BYTES (SET,
 * then APPEND, to P gw:file:<id>:data), the records in RPUSHes of at most
 * RECORDS_PER_COMMAND records and about STAGE_BYTES (P gw:file:<id>:jobs),
 * each step with a PEXPIRE of STAGE_TTL_MS, so the parts of an upload whose
 * gateway died go away by themselves. Nothing is visible meanwhile: the file
 * is its hash and its index entry, written with the PERSIST of both parts
 * in one MULTI/EXEC at the end, all or nothing. */
#define STAGE_BYTES (1024 * 1024)
#define RECORDS_PER_COMMAND 1000
#define STAGE_TTL_MS "3600000"

static void stage_next(struct gw_request *r);

/* Gives up a store: the staged parts are deleted (or expire, when Redis
 * cannot be reached) and the upload is answered 503. */
static void stage_fail(struct gw_request *r, const char *why)
{
    struct upload *u = r->state;
    redisAsyncContext *ac = gw_redis(r->gw);
    if (ac != NULL)
        redisAsyncCommand(ac, NULL, NULL, "DEL %s %s", u->dkey, u->jkey);
    LLMQ_LOG(LLMQ_LOG_WARN, "gateway: upload %s not stored: %s", u->id, why);
    gw_respond_no_redis(r);
}

/* The reply to the commit: HSET, PERSIST of the bytes, PERSIST of the
 * records, ZADD. */
static void on_stored(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *rep = reply;
    struct upload *u = r->state;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 4) {
        stage_fail(r, rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "Redis did not answer");
    } else if (rep->element[1]->type != REDIS_REPLY_INTEGER || rep->element[1]->integer != 1 ||
               rep->element[2]->type != REDIS_REPLY_INTEGER || rep->element[2]->integer != 1) {
        /* a part expired before the commit (Redis stalled for STAGE_TTL_MS):
           the file is taken back */
        redisAsyncContext *now = gw_redis(r->gw);
        if (now != NULL)
            redisAsyncCommand(now, NULL, NULL, "ZREM %s %s", u->ikey, u->id);
        if (now != NULL)
            redisAsyncCommand(now, NULL, NULL, "DEL %s", u->key);
        stage_fail(r, "a staged part expired before the commit");
    } else {
        r->gw->stats.files_created++;
        gw_respond_json(r, 200, u->answer);
        u->answer = NULL;
    }
}

static void on_staged(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *rep = reply;
    if (rep == NULL || rep->type == REDIS_REPLY_ERROR)
        stage_fail(r, rep ? rep->str : "Redis did not answer");
    else if (r->gone)
        stage_fail(r, "the client hung up");
    else
        stage_next(r);
}

/* Sends one step, argv (argc, lens), and a PEXPIRE of its key argv[1],
 * whose reply runs on_staged. 0, or -1 when it could not be sent. */
static int stage_send(struct gw_request *r, redisAsyncContext *ac, int argc, const char **argv,
                      const size_t *lens)
{
    if (redisAsyncCommandArgv(ac, NULL, NULL, argc, argv, lens) != REDIS_OK ||
        gw_step_command(r, ac, on_staged, r, "PEXPIRE %s %s", argv[1], STAGE_TTL_MS) != REDIS_OK)
        return -1;
    return 0;
}

/* The commit: the file's hash, both parts kept, its index entry. */
static void stage_commit(struct gw_request *r, redisAsyncContext *ac)
{
    struct upload *u = r->state;
    char bytes[24], created[24], nlines[24];
    snprintf(bytes, sizeof(bytes), "%lld", u->bytes);
    snprintf(created, sizeof(created), "%lld", u->created_at);
    snprintf(nlines, sizeof(nlines), "%lld", u->lines);
    const char *argv[] = {"HSET",    u->key,        "filename",   r->upload.filename,
                          "purpose", "batch",       "bytes",      bytes,
                          "lines",   nlines,        "created_at", created,
                          "tenant",  r->key.tenant, "layout",     GW_FILE_LAYOUT_JOBS};
    if (redisAsyncCommand(ac, NULL, NULL, "MULTI") != REDIS_OK ||
        redisAsyncCommandArgv(ac, NULL, NULL, 16, argv, NULL) != REDIS_OK ||
        redisAsyncCommand(ac, NULL, NULL, "PERSIST %s", u->dkey) != REDIS_OK ||
        redisAsyncCommand(ac, NULL, NULL, "PERSIST %s", u->jkey) != REDIS_OK ||
        redisAsyncCommand(ac, NULL, NULL, "ZADD %s %lld %s", u->ikey, (long long)llmq_wall_ms(),
                          u->id) != REDIS_OK ||
        gw_step_command(r, ac, on_stored, r, "EXEC") != REDIS_OK)
        stage_fail(r, "cannot send to Redis");
}

/* Sends the next step of the store (see above). */
static void stage_next(struct gw_request *r)
{
    struct upload *u = r->state;
    redisAsyncContext *ac = gw_redis(r->gw);
    if (ac == NULL) {
        stage_fail(r, "Redis is not connected");
        return;
    }
    if (u->data_sent < r->body_len) {
        size_t left = r->body_len - u->data_sent, k = left < STAGE_BYTES ? left : STAGE_BYTES;
        const char *argv[] = {u->data_sent == 0 ? "SET" : "APPEND", u->dkey,
                              r->body + u->data_sent};
        size_t lens[] = {strlen(argv[0]), strlen(u->dkey), k};
        if (stage_send(r, ac, 3, argv, lens) != 0)
            stage_fail(r, "cannot send to Redis");
        else
            u->data_sent += k;
        return;
    }
    const struct records *rec = &u->records;
    if (u->records_sent == rec->n) {
        records_free(&u->records); /* all staged */
        stage_commit(r, ac);
        return;
    }
    const char *push[2 + RECORDS_PER_COMMAND];
    size_t push_lens[2 + RECORDS_PER_COMMAND], k = 0, bytes = 0;
    push[0] = "RPUSH";
    push[1] = u->jkey;
    push_lens[0] = 5;
    push_lens[1] = strlen(u->jkey);
    while (u->records_sent + k < rec->n && k < RECORDS_PER_COMMAND && bytes < STAGE_BYTES) {
        push[2 + k] = rec->rec[u->records_sent + k];
        push_lens[2 + k] = rec->len[u->records_sent + k];
        bytes += push_lens[2 + k];
        k++;
    }
    if (stage_send(r, ac, (int)(2 + k), push, push_lens) != 0)
        stage_fail(r, "cannot send to Redis");
    else
        u->records_sent += k;
}

/* Stores a checked file (see above); its answer is built first, so a
 * stored file is always answered. Takes rs. */
static void store(struct gw_request *r, long long lines, struct records *rs)
{
    struct upload *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        records_free(rs);
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    r->state = u;
    r->state_free = upload_free;
    u->records = *rs;
    memset(rs, 0, sizeof(*rs));
    gw_new_id("file-", u->id, sizeof(u->id));
    u->bytes = (long long)r->body_len;
    u->created_at = gw_unix_s();
    u->lines = lines;
    u->answer = file_object(u->id, r->upload.filename, "batch", u->bytes, u->created_at);
    if (u->answer == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    const char *p = r->gw->prefix;
    if (llmq_key(u->key, sizeof(u->key), p, LLMQ_KEY_GW_FILE, u->id, NULL) != LLMQ_OK ||
        llmq_key(u->jkey, sizeof(u->jkey), p, LLMQ_KEY_GW_FILE_JOBS, u->id, NULL) != LLMQ_OK ||
        llmq_key(u->dkey, sizeof(u->dkey), p, LLMQ_KEY_GW_FILE_DATA, u->id, NULL) != LLMQ_OK ||
        llmq_key(u->ikey, sizeof(u->ikey), p, LLMQ_KEY_GW_FILES, NULL, NULL) != LLMQ_OK) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "file key too long");
        return;
    }
    stage_next(r);
}

/* An uploaded file being checked on the offload thread (offload.h): the
 * check takes time in proportion to the file, and on the loop it would hold
 * every other request. The task is a step of r (request_step.h); the loop
 * does not touch r->body meanwhile (the body is complete and is freed only
 * with r). */
struct check_task {
    struct gw_offload_task task; /* first: the task is the check */
    struct gw_request *r;
    const char *body; /* r's, borrowed */
    size_t len, job_body_max;
    long long max_lines;
    json_t *fallbacks;      /* gw_fallbacks_map at the upload; NULL: none */
    long long lines;        /* out */
    struct records records; /* out */
    int rc;                 /* out: 0, or -1 with e */
    struct gw_error e;
};

static void check_work(struct gw_offload_task *t)
{
    struct check_task *c = (struct check_task *)t;
    c->rc = check_file(c->body, c->len, c->job_body_max, c->max_lines, c->fallbacks, &c->lines,
                       &c->records, &c->e);
}

static void check_done(struct gw_offload_task *t)
{
    struct check_task *c = (struct check_task *)t;
    struct gw_request *r = c->r;
    r->gw->stats.uploads_validating--;
    if (t->stopping)
        gw_respond_errorf(r, 503, "server_error", NULL, "service_unavailable",
                          "llmq-gateway is stopping; upload the file again");
    else if (c->rc != 0)
        gw_respond_error(r, &c->e);
    else if (!r->gone)
        store(r, c->lines, &c->records);
    records_free(&c->records);
    json_decref(c->fallbacks);
    free(c);
}

static void upload(struct gw_request *r)
{
    if (!r->upload.is_multipart) {
        gw_respond_errorf(r, 400, INVALID, "file", "invalid_request",
                          "Upload the file as multipart/form-data with the fields 'file' and "
                          "'purpose'.");
        return;
    }
    if (!r->upload.has_file) {
        gw_respond_errorf(r, 400, INVALID, "file", "missing_required_parameter",
                          "Missing required parameter: 'file'.");
        return;
    }
    if (r->upload.purpose[0] == '\0') {
        gw_respond_errorf(r, 400, INVALID, "purpose", "missing_required_parameter",
                          "Missing required parameter: 'purpose'.");
        return;
    }
    if (strcmp(r->upload.purpose, "batch") != 0) {
        gw_respond_errorf(r, 400, INVALID, "purpose", "invalid_value",
                          "'%s' is not a supported purpose: llmq-gateway stores files for "
                          "'batch' only.",
                          r->upload.purpose);
        return;
    }
    /* checked before anything is read or stored */
    if (r->upload.filename_too_long) {
        gw_respond_errorf(r, 400, INVALID, "filename", "invalid_value",
                          "The file's filename is longer than %zu bytes.",
                          sizeof(r->upload.filename) - 1);
        return;
    }
    if (!utf8_valid(r->upload.filename)) {
        gw_respond_errorf(r, 400, INVALID, "filename", "invalid_value",
                          "The file's filename is not valid UTF-8.");
        return;
    }
    struct check_task *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    c->task.work = check_work;
    c->task.done = check_done;
    c->r = r;
    c->body = r->body ? r->body : "";
    c->len = r->body_len;
    c->job_body_max = (size_t)r->gw->job_body_max;
    c->max_lines = r->gw->cfg->max_file_lines;
    c->fallbacks = gw_fallbacks_map(r->gw->fallbacks);
    r->gw->stats.uploads_validating++;
    if (gw_step_offload(r, r->gw->offload, &c->task) != 0) {
        r->gw->stats.uploads_validating--;
        json_decref(c->fallbacks);
        free(c);
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
    }
}

/* ---- one uploaded file ---- */

static void on_meta(struct gw_request *r, const redisReply *v)
{
    if (v == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    const char *purpose = gw_list_val(v, 1);
    if (purpose == NULL || !owned(r, gw_list_val(v, 4))) {
        respond_no_file(r, r->m.id);
        return;
    }
    gw_respond_json(r, 200,
                    file_object(r->m.id, gw_list_val(v, 0), purpose,
                                atoll(gw_list_val(v, 2) ? gw_list_val(v, 2) : "0"),
                                atoll(gw_list_val(v, 3) ? gw_list_val(v, 3) : "0")));
}

/* layout: files stored before layout jobs1 keep their bytes in content */
static const char *const content_fields[] = {"tenant", "layout", "content", NULL};

/* Answers with a file's bytes (a copy of them). */
static void respond_content(struct gw_request *r, const char *bytes, size_t len)
{
    char *body = malloc(len + 1);
    if (body == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    memcpy(body, bytes, len);
    r->content_type = "application/octet-stream";
    gw_respond(r, 200, body, len);
}

static void on_data(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *rep = reply;
    if (rep == NULL || (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_NIL))
        gw_respond_no_redis(r);
    else if (rep->type == REDIS_REPLY_NIL)
        respond_no_file(r, r->m.id); /* deleted meanwhile */
    else
        respond_content(r, rep->str, rep->len);
}

static void on_content(struct gw_request *r, const redisReply *v)
{
    if (v == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    if (v->elements != 3 || !owned(r, gw_list_val(v, 0))) {
        respond_no_file(r, r->m.id);
        return;
    }
    const char *layout = gw_list_val(v, 1);
    const redisReply *c = v->element[2];
    if (layout == NULL) { /* stored before layout jobs1: the bytes are in the hash */
        if (c->type != REDIS_REPLY_STRING)
            respond_no_file(r, r->m.id);
        else
            respond_content(r, c->str, c->len);
        return;
    }
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
    if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_GW_FILE_DATA, r->m.id, NULL) !=
        LLMQ_OK) {
        respond_no_file(r, r->m.id);
        return;
    }
    gw_request_command(r, on_data, "GET %s", key);
}

static void on_deleted(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *rep = reply;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY)
        gw_respond_no_redis(r);
    else
        gw_respond_json(
            r, 200, json_pack("{s:s, s:s, s:b}", "id", r->m.id, "object", "file", "deleted", 1));
}

static void on_delete_meta(struct gw_request *r, const redisReply *v)
{
    redisAsyncContext *ac = gw_redis(r->gw);
    if (v == NULL || ac == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    if (gw_list_val(v, 1) == NULL || !owned(r, gw_list_val(v, 4))) {
        respond_no_file(r, r->m.id);
        return;
    }
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX], ikey[LLMQ_KEY_FIXED_MAX];
    char jkey[sizeof(key)], dkey[sizeof(key)];
    const char *p = r->gw->prefix, *id = r->m.id;
    if (llmq_key(key, sizeof(key), p, LLMQ_KEY_GW_FILE, id, NULL) != LLMQ_OK ||
        llmq_key(jkey, sizeof(jkey), p, LLMQ_KEY_GW_FILE_JOBS, id, NULL) != LLMQ_OK ||
        llmq_key(dkey, sizeof(dkey), p, LLMQ_KEY_GW_FILE_DATA, id, NULL) != LLMQ_OK ||
        llmq_key(ikey, sizeof(ikey), p, LLMQ_KEY_GW_FILES, NULL, NULL) != LLMQ_OK) {
        respond_no_file(r, r->m.id);
        return;
    }
    if (redisAsyncCommand(ac, NULL, NULL, "MULTI") != REDIS_OK ||
        redisAsyncCommand(ac, NULL, NULL, "DEL %s %s %s", key, jkey, dkey) != REDIS_OK ||
        redisAsyncCommand(ac, NULL, NULL, "ZREM %s %s", ikey, r->m.id) != REDIS_OK ||
        gw_step_command(r, ac, on_deleted, r, "EXEC") != REDIS_OK)
        gw_respond_no_redis(r);
}

static json_t *list_item(struct gw_request *r, const char *id, const redisReply *v)
{
    const char *purpose = gw_list_val(v, 1);
    if (purpose == NULL || !owned(r, gw_list_val(v, 4)))
        return NULL;
    if (r->has_purpose && strcmp(r->purpose, purpose) != 0)
        return NULL;
    return file_object(id, gw_list_val(v, 0), purpose,
                       atoll(gw_list_val(v, 2) ? gw_list_val(v, 2) : "0"),
                       atoll(gw_list_val(v, 3) ? gw_list_val(v, 3) : "0"));
}

static const struct gw_list_spec file_list = {
    .index = LLMQ_KEY_GW_FILES,
    .object = LLMQ_KEY_GW_FILE,
    .fields = meta_fields,
    .item = list_item,
    .limit_default = 10000,
    .limit_max = 10000,
};

/* ---- a batch's output and error files ---- */

struct outfile {
    int errors; /* 1: the error file */
    int meta;   /* 1: the File object, else the content */
    char batch_id[GW_ID_MAX + 1];
    char **lines; /* per job, its result line or NULL */
    size_t n, pending;
    int failed;
};

static void outfile_free(void *p)
{
    struct outfile *o = p;
    for (size_t i = 0; o->lines && i < o->n; i++)
        free(o->lines[i]);
    free(o->lines);
    free(o);
}

static void outfile_answer(struct gw_request *r)
{
    struct outfile *o = r->state;
    if (o->failed) {
        gw_respond_no_redis(r);
        return;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t i = 0; buf != NULL && i < o->n; i++) {
        if (o->lines[i] == NULL)
            continue;
        int is_error = 0;
        char *line = gw_result_line_for_file(o->lines[i], strlen(o->lines[i]), &is_error);
        if (line != NULL && is_error == o->errors) {
            size_t ll = strlen(line);
            if (len + ll + 2 > cap) {
                while (len + ll + 2 > cap)
                    cap *= 2;
                char *nb = realloc(buf, cap);
                if (nb == NULL) {
                    free(buf);
                    buf = NULL;
                    free(line);
                    break;
                }
                buf = nb;
            }
            memcpy(buf + len, line, ll);
            len += ll;
            buf[len++] = '\n';
        }
        free(line);
    }
    if (buf == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    if (o->meta) {
        free(buf);
        gw_respond_json(r, 200,
                        file_object(r->m.id,
                                    o->errors ? "batch_errors.jsonl" : "batch_output.jsonl",
                                    "batch_output", (long long)len, gw_unix_s()));
        return;
    }
    r->content_type = "application/octet-stream";
    gw_respond(r, 200, buf, len);
}

struct line_fetch {
    struct gw_request *r;
    size_t i;
};

static void on_line(enum llmq_rc rc, const char *line, size_t len, int dead, void *ud)
{
    (void)len;
    (void)dead;
    struct line_fetch *f = ud;
    struct outfile *o = f->r->state;
    if (rc == LLMQ_OK && line != NULL)
        o->lines[f->i] = strdup(line);
    if (rc != LLMQ_OK || (line != NULL && o->lines[f->i] == NULL))
        o->failed = 1; /* Redis failed, or out of memory */
    if (--o->pending == 0)
        outfile_answer(f->r);
    free(f);
}

static void on_job_ids(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct gw_request *r = privdata;
    struct outfile *o = r->state;
    redisReply *rep = reply;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
        gw_respond_no_redis(r);
        return;
    }
    o->n = rep->elements;
    o->lines = calloc(o->n + 1, sizeof(*o->lines));
    if (o->lines == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    o->pending = 1; /* held while sending */
    for (size_t i = 0; i < o->n; i++) {
        struct line_fetch *f = malloc(sizeof(*f));
        if (f == NULL || rep->element[i]->type != REDIS_REPLY_STRING) {
            free(f);
            o->failed = 1;
            continue;
        }
        *f = (struct line_fetch){r, i};
        o->pending++;
        /* (fails for an id too long to be a job's, too) */
        if (gw_step_result_read(r, ac, r->gw->prefix, rep->element[i]->str, on_line, f, NULL) !=
            LLMQ_OK) {
            o->pending--;
            o->failed = 1;
            free(f);
        }
    }
    if (--o->pending == 0)
        outfile_answer(r);
}

static const char *const batch_owner_fields[] = {"status", "tenant", NULL};

static void on_outfile_batch(struct gw_request *r, const redisReply *v)
{
    struct outfile *o = r->state;
    if (v == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    if (!gw_batch_visible(gw_list_val(v, 0)) || !owned(r, gw_list_val(v, 1))) {
        respond_no_file(r, r->m.id);
        return;
    }
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
    if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_GW_BATCH_JOBS, o->batch_id, NULL) !=
        LLMQ_OK) {
        respond_no_file(r, r->m.id);
        return;
    }
    gw_request_command(r, on_job_ids, "LRANGE %s 0 -1", key);
}

/* What is asked of a batch's output or error file. */
enum outfile_ask { OUTFILE_META, OUTFILE_CONTENT, OUTFILE_DELETE };

/* Serves a batch's output or error file; returns 0 when id is not one. */
static int outfile(struct gw_request *r, enum outfile_ask ask)
{
    const char *id = r->m.id;
    int errors = strncmp(id, GW_FILE_ERR_PREFIX, strlen(GW_FILE_ERR_PREFIX)) == 0;
    if (!errors && strncmp(id, GW_FILE_OUT_PREFIX, strlen(GW_FILE_OUT_PREFIX)) != 0)
        return 0;
    if (ask == OUTFILE_DELETE) {
        gw_respond_errorf(r, 400, INVALID, "id", "invalid_value",
                          "%s is built from its batch's results and cannot be deleted", id);
        return 1;
    }
    struct outfile *o = calloc(1, sizeof(*o));
    if (o == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return 1;
    }
    o->errors = errors;
    o->meta = ask == OUTFILE_META;
    snprintf(o->batch_id, sizeof(o->batch_id), "%s", id + strlen(GW_FILE_OUT_PREFIX));
    r->state = o;
    r->state_free = outfile_free;
    gw_object_fetch(r, LLMQ_KEY_GW_BATCH, o->batch_id, batch_owner_fields, on_outfile_batch);
    return 1;
}

void gw_files_create(struct gw_request *r)
{
    upload(r);
}

void gw_files_list(struct gw_request *r)
{
    gw_list_respond(r, &file_list);
}

void gw_files_get(struct gw_request *r)
{
    if (!outfile(r, OUTFILE_META))
        gw_object_fetch(r, LLMQ_KEY_GW_FILE, r->m.id, meta_fields, on_meta);
}

void gw_files_content(struct gw_request *r)
{
    if (!outfile(r, OUTFILE_CONTENT))
        gw_object_fetch(r, LLMQ_KEY_GW_FILE, r->m.id, content_fields, on_content);
}

void gw_files_delete(struct gw_request *r)
{
    if (!outfile(r, OUTFILE_DELETE))
        gw_object_fetch(r, LLMQ_KEY_GW_FILE, r->m.id, meta_fields, on_delete_meta);
}
