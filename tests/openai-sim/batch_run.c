/* Batches of openai-sim: the input file's validation at creation, and its
 * lines run when the batch is due (batch.h).
 *
 * Validation, as OpenAI's: every non-empty line a JSON object with a
 * non-empty string custom_id, unique in the file, method "POST", url equal
 * to the batch's endpoint and an object body naming a model, the same model
 * on every line; at most 50,000 lines. Any error fails the whole batch
 * (status failed, errors.data [{code, message, param, line}]). With
 * --batch-queue-tokens N, a valid batch whose prompt tokens (counted as a
 * live request's) with those of its model's unfinished batches pass N fails
 * the same way with code token_limit_exceeded, as OpenAI's enqueued-token
 * limit does; the most any model held is kept for tests (GET /v1/batches
 * lists it as sim_queue).
 *
 * Running: each line's body goes through the same checks and answer
 * builders as a live request (admit.c sim_call_parse, bodies.c), without the
 * rate-limit window and never streamed. A 200 is an output line
 *   {"id":"batch_req_…","custom_id":…,"response":{"status_code":200,
 *    "request_id":"req_…","body":{…, "usage":…}},"error":null}
 * and a refusal (400, 404) the same shape in the error file;
 * --batch-fail-once S answers 500 (--batch-fail-status) for a line whose
 * custom_id holds S the first time the sim runs it, --batch-fail-always S
 * every time; --batch-invalid S fails the validation of a file with such a
 * line, naming it.
 *
 * Progress is linear over the pace: by t ms after its creation a batch has
 * done the first total * t / pace lines. A batch that expires
 * (--batch-expire-after-ms, the first --batch-expire-count of them) keeps
 * the lines done by then in its output and error files and lists the rest
 * in its error file with code batch_expired, as OpenAI does; a cancelled
 * one keeps the lines done by the cancel and says nothing of the rest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "batch.h"

#define SIM_BATCH_MAX_LINES 50000

static const struct {
    const char *url;
    enum sim_endpoint ep;
} batch_eps[] = {
    {"/v1/chat/completions", SIM_EP_CHAT},
    {"/v1/embeddings", SIM_EP_EMBEDDINGS},
    {"/v1/completions", SIM_EP_COMPLETIONS},
    {"/v1/responses", SIM_EP_RESPONSES},
};

/* The endpoint of a batch's url: OpenAI's form, or Azure's without "/v1". */
static enum sim_endpoint endpoint_of(const char *url)
{
    for (size_t i = 0; i < sizeof(batch_eps) / sizeof(batch_eps[0]); i++)
        if (strcmp(url, batch_eps[i].url) == 0 || strcmp(url, batch_eps[i].url + 3) == 0)
            return batch_eps[i].ep;
    return SIM_EP_NONE;
}

int sim_batch_endpoint_ok(const char *ep, int azure)
{
    return endpoint_of(ep) != SIM_EP_NONE && (azure || strncmp(ep, "/v1/", 4) == 0);
}

/* Calls fn(line, len, line_no, ud) for each non-empty line of f; stops when
 * it returns nonzero. */
static void each_line(const struct sim_file *f, int (*fn)(const char *, size_t, int, void *),
                      void *ud)
{
    const char *p = f->data.data, *end = p + f->data.len;
    int no = 0;
    while (p != NULL && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        no++;
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0 && fn(p, n, no, ud) != 0)
            return;
        p = nl ? nl + 1 : end;
    }
}

struct validate_ctx {
    struct sim_server *srv;
    const struct sim_batch *x;
    json_t *ids; /* custom_id -> true */
    char model[128];
    json_t *errors; /* array */
    int lines;
    int64_t tokens; /* prompt tokens of the valid lines */
};

static void add_error(struct validate_ctx *v, const char *code, const char *param, int line,
                      const char *msg)
{
    json_array_append_new(v->errors, json_pack("{s:s, s:s, s:s?, s:i}", "code", code, "message",
                                               msg, "param", param, "line", line));
}

static int validate_line(const char *s, size_t n, int no, void *ud)
{
    struct validate_ctx *v = ud;
    json_t *o = json_loadb(s, n, 0, NULL);
    const json_t *body = json_object_get(o, "body");
    const char *cid = json_string_value(json_object_get(o, "custom_id"));
    const char *method = json_string_value(json_object_get(o, "method"));
    const char *url = json_string_value(json_object_get(o, "url"));
    const char *model = json_string_value(json_object_get(body, "model"));
    char msg[256];
    v->lines++;
    if (!json_is_object(o))
        add_error(v, "invalid_json_line", NULL, no, "This line is not parseable as valid JSON.");
    else if (cid == NULL || cid[0] == '\0')
        add_error(v, "missing_required_parameter", "custom_id", no,
                  "Missing required parameter: 'custom_id'.");
    else if (json_object_get(v->ids, cid) != NULL)
        add_error(v, "duplicate_custom_id", "custom_id", no,
                  "The custom_id for this request is a duplicate of another request. The "
                  "custom_id parameter must be unique for each request in a batch.");
    else if (method == NULL || strcmp(method, "POST") != 0)
        add_error(v, "invalid_value", "method", no, "Invalid value for 'method': expected POST.");
    else if (url == NULL || strcmp(url, v->x->endpoint) != 0) {
        snprintf(msg, sizeof(msg), "The provided url does not match the batch endpoint '%s'.",
                 v->x->endpoint);
        add_error(v, "invalid_url", "url", no, msg);
    } else if (!json_is_object(body) || model == NULL || model[0] == '\0')
        add_error(v, "missing_required_parameter", "body.model", no,
                  "Missing required parameter: 'body.model'.");
    else if (v->srv->cfg.batch_invalid != NULL && v->srv->cfg.batch_invalid[0] != '\0' &&
             strstr(cid, v->srv->cfg.batch_invalid) != NULL)
        add_error(v, "invalid_request", "body", no,
                  "This request is invalid: openai-sim's --batch-invalid names it.");
    else if (v->model[0] != '\0' && strcmp(v->model, model) != 0) {
        snprintf(msg, sizeof(msg),
                 "The model for this request (%.64s) differs from the batch's other requests "
                 "(%.64s): a batch file holds requests of one model.",
                 model, v->model);
        add_error(v, "mismatched_model", "body.model", no, msg);
    } else {
        json_object_set_new(v->ids, cid, json_true());
        if (v->model[0] == '\0')
            snprintf(v->model, sizeof(v->model), "%s", model);
        int64_t t = 0;
        if (sim_prompt_tokens(&v->srv->cfg, endpoint_of(url), model, body, &t) == 0)
            v->tokens += t;
    }
    json_decref(o);
    return json_array_size(v->errors) >= 100; /* OpenAI names at most some */
}

/* The prompt tokens the unfinished batches of model hold (those due are
 * completed first, so they no longer count). */
static int64_t queue_tokens(struct sim_server *srv, const char *model)
{
    int64_t sum = 0;
    for (struct sim_batch *b = srv->batches->batches; b; b = b->next) {
        sim_batch_advance(srv, b);
        if (strcmp(b->model, model) == 0 &&
            (strcmp(b->status, "in_progress") == 0 || strcmp(b->status, "validating") == 0))
            sum += b->queue_tokens;
    }
    return sum;
}

/* OpenAI's enqueued-token limit: a valid batch whose prompt tokens with
 * those of its model's unfinished batches pass --batch-queue-tokens fails
 * as a whole with token_limit_exceeded. Returns 1 when x is refused. */
static int queue_refuses(struct sim_server *srv, struct validate_ctx *v)
{
    int64_t limit = srv->cfg.batch_queue_tokens;
    if (limit <= 0)
        return 0;
    int64_t held = queue_tokens(srv, v->model);
    if (held + v->tokens <= limit) {
        if (held + v->tokens > srv->batches->queue_max_tokens)
            srv->batches->queue_max_tokens = held + v->tokens;
        return 0;
    }
    char msg[256];
    snprintf(msg, sizeof(msg),
             "Enqueued token limit reached for %.64s in organization org-sim. Limit: %lld "
             "enqueued tokens. Please try again once some in_progress batches have been "
             "completed.",
             v->model, (long long)limit);
    json_array_append_new(v->errors,
                          json_pack("{s:s, s:s, s:n, s:n}", "code", "token_limit_exceeded",
                                    "message", msg, "param", "line"));
    srv->batches->queue_refused++;
    return 1;
}

void sim_batch_validate(struct sim_server *srv, struct sim_batch *x, const struct sim_file *f)
{
    struct validate_ctx v = {.srv = srv, .x = x, .ids = json_object(), .errors = json_array()};
    if (strcmp(f->purpose, "batch") != 0)
        add_error(&v, "invalid_file", "input_file_id", 0,
                  "The input file must have purpose 'batch'.");
    else
        each_line(f, validate_line, &v);
    if (json_array_size(v.errors) == 0 && v.lines == 0)
        add_error(&v, "empty_file", "input_file_id", 0, "The input file is empty.");
    if (v.lines > SIM_BATCH_MAX_LINES)
        add_error(&v, "too_many_requests", "input_file_id", 0,
                  "The input file holds more than 50,000 requests.");
    snprintf(x->model, sizeof(x->model), "%s", v.model);
    x->queue_tokens = v.tokens;
    if (json_array_size(v.errors) == 0)
        queue_refuses(srv, &v);
    if (json_array_size(v.errors) > 0) {
        snprintf(x->status, sizeof(x->status), "failed");
        x->failed_ms = x->created_ms;
        x->errors = json_pack("{s:s, s:O}", "object", "list", "data", v.errors);
    } else {
        snprintf(x->status, sizeof(x->status), "in_progress");
        x->in_progress_ms = x->created_ms;
        x->total = v.lines;
        struct sim_batches *bs = srv->batches;
        if (srv->cfg.batch_expire_after_ms > 0 && bs->expiring < srv->cfg.batch_expire_count) {
            bs->expiring++;
            x->expires_ms = x->created_ms + srv->cfg.batch_expire_after_ms;
        }
    }
    json_decref(v.ids);
    json_decref(v.errors);
}

struct run_ctx {
    struct sim_server *srv;
    struct sim_batch *x;
    struct sim_buf out, err;
    int64_t run;  /* lines to run; the later ones are not done */
    int64_t seen; /* lines looked at so far */
    int expired;  /* list the lines not done as batch_expired */
};

/* 1 when custom_id cid holds the non-empty pattern s. */
static int picks(const char *s, const char *cid)
{
    return s != NULL && s[0] != '\0' && strstr(cid, s) != NULL;
}

/* 1 the first time --batch-fail-once picks custom_id cid (then remembered). */
static int fail_once(struct sim_server *srv, const char *cid)
{
    struct sim_batches *bs = srv->batches;
    if (picks(srv->cfg.batch_fail_always, cid))
        return 1;
    if (!picks(srv->cfg.batch_fail_once, cid))
        return 0;
    for (size_t i = 0; i < bs->n_failed; i++)
        if (strcmp(bs->failed_ids[i], cid) == 0)
            return 0;
    if (bs->n_failed == bs->cap_failed) {
        size_t cap = bs->cap_failed ? bs->cap_failed * 2 : 16;
        char **ids = realloc(bs->failed_ids, cap * sizeof(*ids));
        if (ids == NULL)
            return 0;
        bs->failed_ids = ids;
        bs->cap_failed = cap;
    }
    bs->failed_ids[bs->n_failed] = strdup(cid);
    if (bs->failed_ids[bs->n_failed] == NULL)
        return 0;
    bs->n_failed++;
    return 1;
}

/* Appends one output or error line: the response of status with the body in
 * srv->scratch (its trailing newline dropped). */
static void add_line(struct run_ctx *r, struct sim_buf *b, const char *cid, int status,
                     const char *request_id)
{
    struct sim_buf *s = &r->srv->scratch;
    size_t n = s->len;
    while (n > 0 && (s->data[n - 1] == '\n' || s->data[n - 1] == '\r'))
        n--;
    sim_buf_addf(b, "{\"id\":\"batch_req_%s\",\"custom_id\":\"", request_id + 4);
    sim_buf_add_json_esc(b, cid, strlen(cid));
    sim_buf_addf(b, "\",\"response\":{\"status_code\":%d,\"request_id\":\"%s\",\"body\":", status,
                 request_id);
    sim_buf_add(b, s->data, n);
    sim_buf_adds(b, "},\"error\":null}\n");
}

static int run_line(const char *s, size_t n, int no, void *ud)
{
    (void)no;
    struct run_ctx *r = ud;
    struct sim_server *srv = r->srv;
    json_t *o = json_loadb(s, n, 0, NULL);
    const char *cid = json_string_value(json_object_get(o, "custom_id"));
    char *text = json_dumps(json_object_get(o, "body"), JSON_COMPACT);
    if (cid == NULL || text == NULL) { /* validated: only memory can fail */
        json_decref(o);
        free(text);
        return 0;
    }
    if (r->seen++ >= r->run) { /* not done when the batch ended */
        if (r->expired) {
            sim_buf_addf(&r->err, "{\"id\":\"batch_req_%016llx\",\"custom_id\":\"",
                         (unsigned long long)r->seen);
            sim_buf_add_json_esc(&r->err, cid, strlen(cid));
            sim_buf_adds(&r->err, "\",\"response\":null,\"error\":{\"code\":\"batch_expired\","
                                  "\"message\":\"This request could not be executed before the "
                                  "completion window expired.\"}}\n");
            r->x->failed++;
        }
        json_decref(o);
        free(text);
        return 0;
    }
    struct sim_conn tc;
    memset(&tc, 0, sizeof(tc));
    tc.srv = srv;
    tc.in.data = text;
    tc.in.len = strlen(text);
    tc.req.content_length = (int64_t)tc.in.len;
    tc.ex.t_unix_ms = llmq_wall_ms();
    sim_batch_new_id(srv, "req_", tc.ex.request_id, sizeof(tc.ex.request_id));
    struct sim_call call;
    memset(&call, 0, sizeof(call));
    call.ep = endpoint_of(r->x->endpoint);
    json_t *root = NULL;
    struct sim_rl_info rl;
    memset(&rl, 0, sizeof(rl));
    if (sim_call_parse(&tc, &call, &root) != 0) {
        add_line(r, &r->err, cid, tc.ex.status, tc.ex.request_id);
        r->x->failed++;
    } else if (fail_once(srv, cid)) {
        int st = (int)srv->cfg.batch_fail_status;
        if (st == 429)
            sim_reply_error(srv, &tc.ex, 429, "rate_limit_exceeded", NULL, "rate_limit_exceeded",
                            "Rate limit reached for requests. Please try again later.", NULL, 0);
        else
            sim_reply_error(srv, &tc.ex, st, "server_error", NULL, NULL,
                            "The server had an error while processing your request. Sorry "
                            "about that!",
                            NULL, 0);
        add_line(r, &r->err, cid, st, tc.ex.request_id);
        r->x->failed++;
    } else {
        call.stream = call.include_usage = 0;
        if (call.ep == SIM_EP_CHAT)
            sim_body_chat(srv, &tc.ex, &call, &rl);
        else if (call.ep == SIM_EP_EMBEDDINGS)
            sim_body_embeddings(srv, &tc.ex, &call, &rl);
        else if (call.ep == SIM_EP_COMPLETIONS)
            sim_body_completions(srv, &tc.ex, &call, &rl);
        else
            sim_body_responses(srv, &tc.ex, &call, &rl);
        add_line(r, &r->out, cid, 200, tc.ex.request_id);
        r->x->completed++;
        srv->stats.prompt_tokens += (uint64_t)call.prompt_tokens;
        srv->stats.completion_tokens += (uint64_t)call.completion_total;
    }
    json_decref(root);
    sim_buf_free(&tc.ex.out);
    free(tc.ex.marks);
    free(tc.ex.mark_tokens);
    free(text);
    json_decref(o);
    return 0;
}

/* Ends x as status at time now with its first `run` lines done (the files
 * written, the counts set). */
static void batch_finish(struct sim_server *srv, struct sim_batch *x, const char *status,
                         int64_t run, int64_t now)
{
    const struct sim_file *f = NULL;
    for (const struct sim_file *g = srv->batches->files; g; g = g->next)
        if (strcmp(g->id, x->input_file_id) == 0)
            f = g;
    struct run_ctx r = {.srv = srv, .x = x, .run = run, .expired = strcmp(status, "expired") == 0};
    x->completed = x->failed = 0;
    if (f != NULL)
        each_line(f, run_line, &r);
    char name[96];
    if (r.out.len > 0) {
        snprintf(name, sizeof(name), "%s_output.jsonl", x->id);
        struct sim_file *o = sim_file_add(srv, name, "batch_output", r.out.data, r.out.len);
        if (o != NULL)
            snprintf(x->output_file_id, sizeof(x->output_file_id), "%s", o->id);
    }
    if (r.err.len > 0) {
        snprintf(name, sizeof(name), "%s_error.jsonl", x->id);
        struct sim_file *e = sim_file_add(srv, name, "batch_output", r.err.data, r.err.len);
        if (e != NULL)
            snprintf(x->error_file_id, sizeof(x->error_file_id), "%s", e->id);
    }
    sim_buf_free(&r.out);
    sim_buf_free(&r.err);
    snprintf(x->status, sizeof(x->status), "%s", status);
    if (strcmp(status, "completed") == 0)
        x->completed_ms = now;
    else if (r.expired)
        x->expired_ms = now;
    else
        x->cancelled_ms = now;
}

/* When batch x starts to progress: its creation, or under --batch-hold the
 * release if later (INT64_MAX while held). */
static int64_t start_of(const struct sim_server *srv, const struct sim_batch *x)
{
    if (!srv->cfg.batch_hold)
        return x->created_ms;
    int64_t r = srv->batches->released_ms;
    return r == 0 ? INT64_MAX : (r > x->created_ms ? r : x->created_ms);
}

/* The lines a batch has done by time t (linear over the pace). */
static int64_t done_by(const struct sim_server *srv, const struct sim_batch *x, int64_t t)
{
    int64_t start = start_of(srv, x);
    if (start == INT64_MAX)
        return 0;
    int64_t pace = srv->cfg.batch_pace_ms, el = t - start;
    if (pace <= 0 || el >= pace)
        return x->total;
    return el <= 0 ? 0 : x->total * el / pace;
}

void sim_batch_advance(struct sim_server *srv, struct sim_batch *x)
{
    int64_t now = llmq_wall_ms();
    if (strcmp(x->status, "cancelling") == 0) {
        batch_finish(srv, x, "cancelled", done_by(srv, x, x->cancelling_ms), now);
        return;
    }
    if (strcmp(x->status, "in_progress") != 0)
        return;
    int64_t start = start_of(srv, x);
    if (start == INT64_MAX)
        return;
    int64_t due = start + srv->cfg.batch_pace_ms;
    if (x->expires_ms > 0 && x->expires_ms < due && now >= x->expires_ms)
        batch_finish(srv, x, "expired", done_by(srv, x, x->expires_ms), now);
    else if (now >= due)
        batch_finish(srv, x, "completed", x->total, now);
}
