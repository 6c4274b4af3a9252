/* The Files and Batches APIs of openai-sim, as OpenAI serves them, in memory.
 *
 *   POST /v1/files                 multipart/form-data: purpose, file
 *   GET  /v1/files[?purpose=P]     the list (every file: no pagination)
 *   GET  /v1/files/{id}            a file object
 *   GET  /v1/files/{id}/content    its bytes
 *   POST /v1/batches               {input_file_id, endpoint, completion_window, metadata}
 *   GET  /v1/batches               the list (every batch, newest first: no pagination),
 *                                  plus "sim_queue" (not OpenAI's): the enqueued-token
 *                                  limit's record (batch_run.c)
 *   GET  /v1/batches/{id}          a batch object
 *   POST /v1/batches/{id}/cancel   cancels an unfinished batch: cancelling, then
 *                                  cancelled at the next look with the lines
 *                                  done by then in its output file
 * With --azure also as Azure OpenAI serves them (global batch): the same
 * under /openai/files and /openai/batches, each with ?api-version=V (else
 * 404 "Resource not found") and the resource's key in the api-key header
 * (a key sent as a Bearer token is a 401, as Azure answers one that is no
 * Entra token); a batch's endpoint and its lines' url are then
 * "/chat/completions" (or "/v1/chat/completions"), and a line's model the
 * deployment. Both forms reach the same files and batches.
 *
 * A batch is validated when it is created (batch_run.c): a file that is no
 * Batch input (a line that is not a JSON object with custom_id, method POST,
 * the batch's url and a body with a model; duplicate custom_ids; two models)
 * makes the batch "failed" with the errors of OpenAI's shape. A valid one is
 * "in_progress" and completes --batch-pace-ms after its creation: checked
 * when it is read (no timer), then every line runs as a live request would
 * (the same validation and bodies, no rate limit): a 2xx goes to the output
 * file, anything else to the error file, both with OpenAI's line shape.
 * --batch-expire-after-ms makes the first batches expire early (batch_run.c);
 * --batch-api-slow-ms makes the first POSTs of files and batches take
 * effect and answer late: what they make is not seen (listed, found) before
 * the answer leaves, as with a provider that is slow to accept a request.
 * Everything lives until the server exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "batch.h"

void sim_batch_free(struct sim_server *srv)
{
    struct sim_batches *bs = srv->batches;
    if (bs == NULL)
        return;
    while (bs->files != NULL) {
        struct sim_file *f = bs->files;
        bs->files = f->next;
        sim_buf_free(&f->data);
        free(f);
    }
    while (bs->batches != NULL) {
        struct sim_batch *b = bs->batches;
        bs->batches = b->next;
        json_decref(b->metadata);
        json_decref(b->errors);
        free(b);
    }
    for (size_t i = 0; i < bs->n_failed; i++)
        free(bs->failed_ids[i]);
    free(bs->failed_ids);
    free(bs);
    srv->batches = NULL;
}

struct sim_batches *sim_batches_get(struct sim_server *srv)
{
    if (srv->batches == NULL)
        srv->batches = calloc(1, sizeof(*srv->batches));
    return srv->batches;
}

void sim_batch_new_id(struct sim_server *srv, const char *head, char *out, size_t n)
{
    struct sim_batches *bs = srv->batches;
    uint64_t st = srv->id_salt ^ (++bs->seq * 0x9e3779b97f4a7c15ULL);
    snprintf(out, n, "%s%016llx%08llx", head, (unsigned long long)llmq_rng_next(&st),
             (unsigned long long)(bs->seq & 0xffffffffu));
}

struct sim_file *sim_file_add(struct sim_server *srv, const char *filename, const char *purpose,
                              const char *data, size_t len)
{
    struct sim_batches *bs = sim_batches_get(srv);
    struct sim_file *f = bs ? calloc(1, sizeof(*f)) : NULL;
    if (f == NULL)
        return NULL;
    sim_batch_new_id(srv, "file-", f->id, sizeof(f->id));
    snprintf(f->filename, sizeof(f->filename), "%s", filename);
    snprintf(f->purpose, sizeof(f->purpose), "%s", purpose);
    f->created_s = llmq_wall_ms() / 1000;
    sim_buf_add(&f->data, data, len);
    if (f->data.oom) {
        sim_buf_free(&f->data);
        free(f);
        return NULL;
    }
    f->next = bs->files;
    bs->files = f;
    return f;
}

static struct sim_file *file_find(struct sim_server *srv, const char *id, size_t n)
{
    int64_t now = llmq_wall_ms();
    for (struct sim_file *f = srv->batches ? srv->batches->files : NULL; f; f = f->next)
        if (f->visible_ms <= now && strlen(f->id) == n && memcmp(f->id, id, n) == 0)
            return f;
    return NULL;
}

static struct sim_batch *batch_find(struct sim_server *srv, const char *id, size_t n)
{
    int64_t now = llmq_wall_ms();
    for (struct sim_batch *b = srv->batches ? srv->batches->batches : NULL; b; b = b->next)
        if (b->visible_ms <= now && strlen(b->id) == n && memcmp(b->id, id, n) == 0)
            return b;
    return NULL;
}

/* The paths of these APIs, and what a path names. */
enum batch_route {
    BR_NONE = 0,
    BR_FILES,        /* /v1/files */
    BR_FILE,         /* /v1/files/{id} */
    BR_FILE_CONTENT, /* /v1/files/{id}/content */
    BR_BATCHES,      /* /v1/batches */
    BR_BATCH,        /* /v1/batches/{id} */
    BR_BATCH_CANCEL, /* /v1/batches/{id}/cancel */
};

/* Splits path p[0..n) into its route and the id in it (*id, *id_len);
 * *azure: 1 for the Azure form (/openai/...), taken only when azure_ok. */
static enum batch_route batch_route_of(const char *p, size_t n, const char **id, size_t *id_len,
                                       int azure_ok, int *azure)
{
    static const struct {
        const char *head;
        enum batch_route whole, one, tail_route;
        const char *tail;
        int azure;
    } r[] = {
        {"/v1/files", BR_FILES, BR_FILE, BR_FILE_CONTENT, "/content", 0},
        {"/v1/batches", BR_BATCHES, BR_BATCH, BR_BATCH_CANCEL, "/cancel", 0},
        {"/openai/files", BR_FILES, BR_FILE, BR_FILE_CONTENT, "/content", 1},
        {"/openai/batches", BR_BATCHES, BR_BATCH, BR_BATCH_CANCEL, "/cancel", 1},
    };
    *id = NULL;
    *id_len = 0;
    *azure = 0;
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        if (r[i].azure && !azure_ok)
            continue;
        *azure = r[i].azure;
        size_t hl = strlen(r[i].head);
        if (n < hl || memcmp(p, r[i].head, hl) != 0)
            continue;
        if (n == hl)
            return r[i].whole;
        if (p[hl] != '/' || n == hl + 1)
            return BR_NONE;
        const char *s = p + hl + 1;
        const char *slash = memchr(s, '/', n - hl - 1);
        *id = s;
        if (slash == NULL) {
            *id_len = n - hl - 1;
            return r[i].one;
        }
        *id_len = (size_t)(slash - s);
        size_t rest = n - (size_t)(slash - p);
        if (*id_len > 0 && rest == strlen(r[i].tail) && memcmp(slash, r[i].tail, rest) == 0)
            return r[i].tail_route;
        return BR_NONE;
    }
    return BR_NONE;
}

int sim_batch_route(const struct sim_conn *c, int *azure)
{
    const char *id;
    size_t n;
    return batch_route_of(c->in.data + c->req.path.off, c->req.path.len, &id, &n, c->srv->cfg.azure,
                          azure) != BR_NONE;
}

/* Answers the JSON in srv->scratch with status 200. */
static void reply_scratch(struct sim_conn *c)
{
    c->ex.status = 200;
    sim_reply_json(c->srv, &c->ex, 200, NULL, 0, NULL);
}

static void reply_400(struct sim_conn *c, const char *param, const char *msg)
{
    c->ex.outcome = SIM_OUT_BAD_REQUEST;
    sim_reply_error(c->srv, &c->ex, 400, "invalid_request_error", param, NULL, msg, NULL, 0);
}

static void reply_404(struct sim_conn *c, const char *what, const char *id, size_t n)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "No such %s: '%.*s'", what, (int)(n > 100 ? 100 : n), id);
    c->ex.outcome = SIM_OUT_NOT_FOUND;
    sim_reply_error(c->srv, &c->ex, 404, "invalid_request_error", "id", NULL, msg, NULL, 0);
}

static void file_json(struct sim_buf *b, const struct sim_file *f)
{
    sim_buf_addf(b, "{\"id\":\"%s\",\"object\":\"file\",\"bytes\":%zu,\"created_at\":%lld,", f->id,
                 f->data.len, (long long)f->created_s);
    sim_buf_adds(b, "\"filename\":\"");
    sim_buf_add_json_esc(b, f->filename, strlen(f->filename));
    sim_buf_addf(b, "\",\"purpose\":\"%s\",\"status\":\"processed\",\"status_details\":null}",
                 f->purpose);
}

/* The value of the part named name of a multipart body into [*v, *v + *vn),
 * and its filename (when it has one) into fname. Returns 0, or -1. */
static int multipart_part(const char *body, size_t len, const char *name, const char **v,
                          size_t *vn, char *fname, size_t fname_n)
{
    const char *eol = memmem(body, len, "\r\n", 2);
    if (len < 4 || memcmp(body, "--", 2) != 0 || eol == NULL)
        return -1;
    char delim[256];
    size_t bl = (size_t)(eol - body); /* "--boundary" */
    if (bl + 2 >= sizeof(delim))
        return -1;
    delim[0] = '\r';
    delim[1] = '\n';
    memcpy(delim + 2, body, bl);
    size_t dl = bl + 2;
    char want[160];
    snprintf(want, sizeof(want), "name=\"%s\"", name);
    const char *part = eol + 2, *end = body + len;
    while (part < end) {
        const char *head_end = memmem(part, (size_t)(end - part), "\r\n\r\n", 4);
        if (head_end == NULL)
            return -1;
        const char *data = head_end + 4;
        const char *next = memmem(data, (size_t)(end - data), delim, dl);
        if (next == NULL)
            return -1;
        const char *nm = memmem(part, (size_t)(head_end - part), want, strlen(want));
        if (nm != NULL) {
            *v = data;
            *vn = (size_t)(next - data);
            fname[0] = '\0';
            const char *fn = memmem(part, (size_t)(head_end - part), "filename=\"", 10);
            if (fn != NULL) {
                fn += 10;
                const char *q = memchr(fn, '"', (size_t)(head_end - fn));
                if (q != NULL)
                    snprintf(fname, fname_n, "%.*s", (int)(q - fn), fn);
            }
            return 0;
        }
        part = next + dl;
        if (end - part >= 2 && memcmp(part, "--", 2) == 0)
            return -1; /* the closing delimiter */
        part += 2;     /* its CRLF */
    }
    return -1;
}

static void files_create(struct sim_conn *c, int64_t late_ms)
{
    const char *body = c->in.data + c->req.head_len;
    size_t len = (size_t)(c->req.content_length > 0 ? c->req.content_length : 0);
    const char *purpose, *data;
    size_t pn, dn;
    char fname[256], ignored[8];
    if (multipart_part(body, len, "purpose", &purpose, &pn, ignored, sizeof(ignored)) != 0) {
        reply_400(c, "purpose", "Missing required parameter: 'purpose'.");
        return;
    }
    if (multipart_part(body, len, "file", &data, &dn, fname, sizeof(fname)) != 0) {
        reply_400(c, "file", "Missing required parameter: 'file'.");
        return;
    }
    if (pn != 5 || memcmp(purpose, "batch", 5) != 0) {
        reply_400(c, "purpose", "openai-sim takes files of purpose 'batch' only.");
        return;
    }
    struct sim_file *f = sim_file_add(c->srv, fname[0] ? fname : "upload", "batch", data, dn);
    if (f == NULL) {
        c->ex.out.oom = 1;
        return;
    }
    f->visible_ms = late_ms > 0 ? llmq_wall_ms() + late_ms : 0;
    sim_buf_reset(&c->srv->scratch);
    file_json(&c->srv->scratch, f);
    reply_scratch(c);
}

static void files_list(struct sim_conn *c)
{
    struct sim_buf *b = &c->srv->scratch;
    sim_buf_reset(b);
    sim_buf_adds(b, "{\"object\":\"list\",\"data\":[");
    int first = 1;
    int64_t now = llmq_wall_ms();
    for (struct sim_file *f = c->srv->batches ? c->srv->batches->files : NULL; f; f = f->next) {
        if (f->visible_ms > now)
            continue;
        if (!first)
            sim_buf_adds(b, ",");
        file_json(b, f);
        first = 0;
    }
    sim_buf_adds(b, "],\"has_more\":false}");
    reply_scratch(c);
}

static void file_content(struct sim_conn *c, const struct sim_file *f)
{
    sim_buf_reset(&c->srv->scratch);
    sim_buf_add(&c->srv->scratch, f->data.data, f->data.len);
    reply_scratch(c);
}

static void ts_or_null(struct sim_buf *b, const char *name, int64_t ms)
{
    if (ms > 0)
        sim_buf_addf(b, ",\"%s\":%lld", name, (long long)(ms / 1000));
    else
        sim_buf_addf(b, ",\"%s\":null", name);
}

static void id_or_null(struct sim_buf *b, const char *name, const char *id)
{
    if (id[0])
        sim_buf_addf(b, ",\"%s\":\"%s\"", name, id);
    else
        sim_buf_addf(b, ",\"%s\":null", name);
}

static void json_value(struct sim_buf *b, const json_t *v)
{
    char *t = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    sim_buf_adds(b, t ? t : "null");
    free(t);
}

static void batch_json(struct sim_buf *b, const struct sim_batch *x)
{
    sim_buf_addf(b, "{\"id\":\"%s\",\"object\":\"batch\",\"endpoint\":\"%s\",\"errors\":", x->id,
                 x->endpoint);
    json_value(b, x->errors);
    sim_buf_addf(b, ",\"input_file_id\":\"%s\",\"completion_window\":\"%s\",\"status\":\"%s\"",
                 x->input_file_id, x->window, x->status);
    id_or_null(b, "output_file_id", x->output_file_id);
    id_or_null(b, "error_file_id", x->error_file_id);
    sim_buf_addf(b, ",\"created_at\":%lld", (long long)(x->created_ms / 1000));
    ts_or_null(b, "in_progress_at", x->in_progress_ms);
    sim_buf_addf(b, ",\"expires_at\":%lld", (long long)(x->created_ms / 1000 + 86400));
    ts_or_null(b, "finalizing_at", x->completed_ms);
    ts_or_null(b, "completed_at", x->completed_ms);
    ts_or_null(b, "failed_at", x->failed_ms);
    ts_or_null(b, "expired_at", x->expired_ms);
    ts_or_null(b, "cancelling_at", x->cancelling_ms);
    ts_or_null(b, "cancelled_at", x->cancelled_ms);
    sim_buf_addf(b, ",\"request_counts\":{\"total\":%lld,\"completed\":%lld,\"failed\":%lld}",
                 (long long)x->total, (long long)x->completed, (long long)x->failed);
    sim_buf_adds(b, ",\"metadata\":");
    json_value(b, x->metadata);
    sim_buf_adds(b, "}");
}

/* POST /v1/batches */
static void batches_create(struct sim_conn *c, int64_t late_ms, int azure)
{
    struct sim_server *srv = c->srv;
    const char *body = c->in.data + c->req.head_len;
    size_t len = (size_t)(c->req.content_length > 0 ? c->req.content_length : 0);
    json_t *root = len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *fid = json_string_value(json_object_get(root, "input_file_id"));
    const char *ep = json_string_value(json_object_get(root, "endpoint"));
    const char *win = json_string_value(json_object_get(root, "completion_window"));
    json_t *meta = json_object_get(root, "metadata");
    struct sim_file *f = fid ? file_find(srv, fid, strlen(fid)) : NULL;
    if (!json_is_object(root))
        reply_400(c, NULL, "We could not parse the JSON body of your request.");
    else if (fid == NULL)
        reply_400(c, "input_file_id", "Missing required parameter: 'input_file_id'.");
    else if (ep == NULL || !sim_batch_endpoint_ok(ep, azure))
        reply_400(c, "endpoint",
                  azure ? "Invalid 'endpoint': expected one of /chat/completions, /embeddings, "
                          "/completions, /responses."
                        : "Invalid 'endpoint': expected one of /v1/chat/completions, "
                          "/v1/embeddings, /v1/completions, /v1/responses.");
    else if (win == NULL || strcmp(win, "24h") != 0)
        reply_400(c, "completion_window", "Invalid 'completion_window': expected '24h'.");
    else if (meta != NULL && !json_is_object(meta) && !json_is_null(meta))
        reply_400(c, "metadata", "Invalid 'metadata': expected an object.");
    else if (f == NULL)
        reply_404(c, "file", fid, strlen(fid));
    else {
        struct sim_batch *x = calloc(1, sizeof(*x));
        if (x == NULL) {
            c->ex.out.oom = 1;
            json_decref(root);
            return;
        }
        sim_batch_new_id(srv, "batch_", x->id, sizeof(x->id));
        snprintf(x->input_file_id, sizeof(x->input_file_id), "%s", f->id);
        snprintf(x->endpoint, sizeof(x->endpoint), "%s", ep);
        snprintf(x->window, sizeof(x->window), "%s", win);
        x->metadata = json_is_object(meta) ? json_incref(meta) : json_null();
        x->created_ms = llmq_wall_ms();
        x->visible_ms = late_ms > 0 ? x->created_ms + late_ms : 0;
        sim_batch_validate(srv, x, f);
        x->next = srv->batches->batches;
        srv->batches->batches = x;
        sim_buf_reset(&srv->scratch);
        batch_json(&srv->scratch, x);
        reply_scratch(c);
    }
    json_decref(root);
}

static void batches_list(struct sim_conn *c)
{
    struct sim_buf *b = &c->srv->scratch;
    /* finish what is due before the list is written (it uses scratch) */
    for (struct sim_batch *x = c->srv->batches ? c->srv->batches->batches : NULL; x; x = x->next)
        sim_batch_advance(c->srv, x);
    sim_buf_reset(b);
    sim_buf_adds(b, "{\"object\":\"list\",\"data\":[");
    int first = 1;
    int64_t now = llmq_wall_ms();
    for (struct sim_batch *x = c->srv->batches ? c->srv->batches->batches : NULL; x; x = x->next) {
        if (x->visible_ms > now)
            continue;
        if (!first)
            sim_buf_adds(b, ",");
        batch_json(b, x);
        first = 0;
    }
    /* not OpenAI's: the enqueued-token limit's record, for tests */
    const struct sim_batches *bs = c->srv->batches;
    sim_buf_addf(b,
                 "],\"has_more\":false,\"sim_queue\":{\"limit\":%lld,\"max_tokens\":%lld,"
                 "\"refused\":%lld}}",
                 (long long)c->srv->cfg.batch_queue_tokens, (long long)bs->queue_max_tokens,
                 (long long)bs->queue_refused);
    reply_scratch(c);
}

/* As OpenAI: an unfinished batch becomes cancelling, and cancelled (its
 * lines done by the time of the cancel kept) when it is next looked at. */
static void batch_cancel(struct sim_conn *c, struct sim_batch *x)
{
    sim_batch_advance(c->srv, x);
    if (strcmp(x->status, "in_progress") == 0 || strcmp(x->status, "validating") == 0) {
        snprintf(x->status, sizeof(x->status), "cancelling");
        x->cancelling_ms = llmq_wall_ms();
    } else if (strcmp(x->status, "cancelled") != 0 && strcmp(x->status, "cancelling") != 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "Cannot cancel a batch with status '%s'.", x->status);
        c->ex.outcome = SIM_OUT_BAD_REQUEST;
        sim_reply_error(c->srv, &c->ex, 409, "invalid_request_error", NULL, NULL, msg, NULL, 0);
        return;
    }
    sim_buf_reset(&c->srv->scratch);
    batch_json(&c->srv->scratch, x);
    reply_scratch(c);
}

int64_t sim_batch_handle(struct sim_conn *c)
{
    const char *id;
    size_t n;
    int azure = 0;
    enum batch_route r = batch_route_of(c->in.data + c->req.path.off, c->req.path.len, &id, &n,
                                        c->srv->cfg.azure, &azure);
    int post = sim_span_eq(c->in.data, c->req.method, "POST");
    int get = sim_span_eq(c->in.data, c->req.method, "GET");
    int want_post = r == BR_BATCH_CANCEL || ((r == BR_FILES || r == BR_BATCHES) && post);
    struct sim_batches *bs = sim_batches_get(c->srv);
    if (bs == NULL) {
        c->ex.out.oom = 1;
        return 0;
    }
    if ((want_post && !post) || (!want_post && !get)) {
        c->ex.outcome = SIM_OUT_BAD_REQUEST;
        sim_reply_error(c->srv, &c->ex, 405, "invalid_request_error", NULL, NULL,
                        "Method not allowed", NULL, 0);
        return 0;
    }
    int64_t late_ms = 0;
    if (post && (r == BR_FILES || r == BR_BATCHES) &&
        bs->slowed < c->srv->cfg.batch_api_slow_first) {
        bs->slowed++;
        late_ms = c->srv->cfg.batch_api_slow_ms;
    }
    struct sim_file *f = NULL;
    struct sim_batch *x = NULL;
    if (r == BR_FILE || r == BR_FILE_CONTENT) {
        f = file_find(c->srv, id, n);
        if (f == NULL) {
            reply_404(c, "file", id, n);
            return 0;
        }
    } else if (r == BR_BATCH || r == BR_BATCH_CANCEL) {
        x = batch_find(c->srv, id, n);
        if (x == NULL) {
            reply_404(c, "batch", id, n);
            return 0;
        }
    }
    switch (r) {
    case BR_FILES:
        post ? files_create(c, late_ms) : files_list(c);
        break;
    case BR_FILE:
        sim_buf_reset(&c->srv->scratch);
        file_json(&c->srv->scratch, f);
        reply_scratch(c);
        break;
    case BR_FILE_CONTENT:
        file_content(c, f);
        break;
    case BR_BATCHES:
        post ? batches_create(c, late_ms, azure) : batches_list(c);
        break;
    case BR_BATCH:
        sim_batch_advance(c->srv, x);
        sim_buf_reset(&c->srv->scratch);
        batch_json(&c->srv->scratch, x);
        reply_scratch(c);
        break;
    case BR_BATCH_CANCEL:
        batch_cancel(c, x);
        break;
    case BR_NONE:
        break;
    }
    /* the answer leaves a little after what it made is seen: the loop's
     * timers count from its cached time, which may be behind the clock */
    return late_ms > 0 ? late_ms + 100 : 0;
}
