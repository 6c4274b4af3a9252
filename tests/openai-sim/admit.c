/* Admission of an API request in openai-sim: body validation, injected
 * faults and the per-(API key, model) sliding window.
 *
 * Charge at admission, as OpenAI counts it: prompt tokens (tokens.c) + (max
 * tokens of the request, or the top of --completion-tokens when it sets
 * none) x n. Embeddings reserve no completion. The charge stays for the whole
 * window; with --charge usage it is settled to prompt + completion when the
 * answer has been produced (sim_api_settle). Injected faults and 429s are
 * never charged. Buckets are created on first use and live until exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

#define SIM_MAX_TOKENS_CAP 100000000

static void bad_request(struct sim_conn *c, const struct sim_call *call, const char *param,
                        const char *msg)
{
    c->ex.outcome = SIM_OUT_BAD_REQUEST;
    sim_reply_error(c->srv, &c->ex, 400, "invalid_request_error", param, NULL, msg, NULL,
                    call->azure);
}

/* An optional positive integer field: its value, -1 when absent, -2 when invalid. */
static int64_t opt_positive(const json_t *root, const char *name)
{
    const json_t *v = json_object_get(root, name);
    if (v == NULL || json_is_null(v))
        return -1;
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return -2;
    return json_integer_value(v);
}

/* OpenAI's sampling temperature bound (0 to 2), which llmq itself does not
 * check: a line llmq accepts and the provider refuses. */
static int temperature_invalid(const json_t *root)
{
    const json_t *t = json_object_get(root, "temperature");
    if (t == NULL || json_is_null(t))
        return 0;
    return !json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 2;
}

/* Takes the model from the body (or the Azure path) and checks --models. */
static int check_model(struct sim_conn *c, struct sim_call *call, const json_t *root)
{
    struct sim_server *srv = c->srv;
    if (!call->azure) {
        const json_t *m = json_object_get(root, "model");
        if (!json_is_string(m) || json_string_length(m) == 0 ||
            json_string_length(m) >= sizeof(c->ex.model)) {
            bad_request(c, call, "model", "you must provide a model parameter");
            return -1;
        }
        snprintf(c->ex.model, sizeof(c->ex.model), "%s", json_string_value(m));
    }
    if (srv->cfg.n_models == 0)
        return 0;
    for (int i = 0; i < srv->cfg.n_models; i++)
        if (strcmp(srv->cfg.models[i], c->ex.model) == 0)
            return 0;
    c->ex.outcome = SIM_OUT_NOT_FOUND;
    if (call->azure) {
        sim_reply_azure_error(srv, &c->ex, 404,
                              "The API deployment for this resource does not exist. If you "
                              "created the deployment within the last 5 minutes, please wait a "
                              "moment and try again.",
                              NULL);
        return -1;
    }
    char msg[256];
    snprintf(msg, sizeof(msg), "The model `%.128s` does not exist or you do not have access to it.",
             c->ex.model);
    sim_reply_error(srv, &c->ex, 404, "invalid_request_error", NULL, "model_not_found", msg, NULL,
                    0);
    return -1;
}

/* The chat fields. Returns NULL, or the 400 message (and *param). */
static const char *chat_fields(const json_t *root, struct sim_call *call, const char **param)
{
    const json_t *msgs = json_object_get(root, "messages");
    *param = "messages";
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return "'messages' must be a non-empty array";
    int64_t n = opt_positive(root, "n");
    *param = "n";
    if (n == -2 || n > SIM_MAX_CHOICES)
        return "'n' must be an integer from 1 to 128";
    call->n = n > 0 ? (int)n : 1;
    *param = "temperature";
    if (temperature_invalid(root))
        return "Invalid 'temperature': expected a number from 0 to 2.";
    call->max_tokens = opt_positive(root, "max_completion_tokens");
    if (call->max_tokens == -1)
        call->max_tokens = opt_positive(root, "max_tokens");
    const json_t *st = json_object_get(root, "stream");
    *param = "stream";
    if (st != NULL && !json_is_boolean(st) && !json_is_null(st))
        return "'stream' must be a boolean";
    call->stream = json_is_true(st);
    const json_t *so = json_object_get(root, "stream_options");
    call->include_usage = call->stream && json_is_true(json_object_get(so, "include_usage"));
    return NULL;
}

/* The embeddings fields. Returns NULL, or the 400 message (and *param). */
static const char *embeddings_fields(const json_t *root, const struct sim_config *cfg,
                                     struct sim_call *call, const char **param)
{
    const json_t *in = json_object_get(root, "input");
    *param = "input";
    if (!json_is_string(in) && !(json_is_array(in) && json_array_size(in) > 0))
        return "'input' must be a string or a non-empty array";
    int64_t dims = opt_positive(root, "dimensions");
    *param = "dimensions";
    if (dims == -2 || dims > 4096)
        return "'dimensions' must be 1..4096";
    call->dims = dims > 0 ? (int)dims : cfg->embedding_dims;
    const json_t *ef = json_object_get(root, "encoding_format");
    const char *fmt = json_is_null(ef) ? "float" : json_string_value(ef);
    *param = "encoding_format";
    if (ef != NULL && (fmt == NULL || (strcmp(fmt, "float") != 0 && strcmp(fmt, "base64") != 0)))
        return "'encoding_format' must be float or base64";
    call->base64 = fmt != NULL && strcmp(fmt, "base64") == 0;
    call->n = 0; /* no completion */
    return NULL;
}

/* The responses fields. Returns NULL, or the 400 message (and *param). */
static const char *responses_fields(const json_t *root, struct sim_call *call, const char **param)
{
    const json_t *in = json_object_get(root, "input");
    *param = "input";
    if (!json_is_string(in) && !json_is_array(in))
        return "'input' must be a string or an array";
    const json_t *st = json_object_get(root, "stream");
    *param = "stream";
    if (st != NULL && !json_is_boolean(st) && !json_is_null(st))
        return "'stream' must be a boolean";
    call->stream = json_is_true(st);
    call->include_usage = call->stream; /* response.completed always carries it */
    call->max_tokens = opt_positive(root, "max_output_tokens");
    return NULL;
}

/* The (legacy) completions fields. Returns NULL, or the 400 message (and *param). */
static const char *completions_fields(const json_t *root, struct sim_call *call, const char **param)
{
    const json_t *p = json_object_get(root, "prompt");
    *param = "prompt";
    if (!json_is_string(p) && !(json_is_array(p) && json_array_size(p) > 0))
        return "'prompt' must be a string or a non-empty array";
    int64_t n = opt_positive(root, "n");
    *param = "n";
    if (n == -2 || n > SIM_MAX_CHOICES)
        return "'n' must be an integer from 1 to 128";
    call->n = n > 0 ? (int)n : 1;
    call->max_tokens = opt_positive(root, "max_tokens");
    const json_t *st = json_object_get(root, "stream");
    *param = "stream";
    if (st != NULL && !json_is_boolean(st) && !json_is_null(st))
        return "'stream' must be a boolean";
    call->stream = json_is_true(st);
    const json_t *so = json_object_get(root, "stream_options");
    call->include_usage = call->stream && json_is_true(json_object_get(so, "include_usage"));
    return NULL;
}

/* Endpoint-specific fields. Returns 0, or -1 with a 400 built. */
static int check_fields(struct sim_conn *c, struct sim_call *call, const json_t *root)
{
    const char *param = NULL, *msg;
    call->n = 1;
    call->max_tokens = -1;
    if (call->ep == SIM_EP_CHAT)
        msg = chat_fields(root, call, &param);
    else if (call->ep == SIM_EP_EMBEDDINGS)
        msg = embeddings_fields(root, &c->srv->cfg, call, &param);
    else if (call->ep == SIM_EP_COMPLETIONS)
        msg = completions_fields(root, call, &param);
    else
        msg = responses_fields(root, call, &param);
    /* The cap keeps the reserve (max tokens x n) far from int64 overflow. */
    if (msg == NULL && (call->max_tokens == -2 || call->max_tokens > SIM_MAX_TOKENS_CAP)) {
        param = NULL;
        msg = "max tokens must be an integer from 1 to 100000000";
    }
    if (msg == NULL)
        return 0;
    bad_request(c, call, param, msg);
    return -1;
}

int sim_call_parse(struct sim_conn *c, struct sim_call *call, json_t **root_out)
{
    const struct sim_config *cfg = &c->srv->cfg;
    const char *body = c->in.data + c->req.head_len;
    size_t n = (size_t)(c->req.content_length > 0 ? c->req.content_length : 0);
    json_error_t err;
    *root_out = NULL;
    json_t *root = n > 0 ? json_loadb(body, n, 0, &err) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        bad_request(c, call, NULL,
                    "We could not parse the JSON body of your request. (HINT: This likely means "
                    "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
                    "payload, but what was sent was not valid JSON.)");
        return -1;
    }
    *root_out = root;
    call->root = root;
    if (check_model(c, call, root) != 0 || check_fields(c, call, root) != 0)
        return -1;
    call->hash = sim_hash_bytes(body, n);
    if (sim_prompt_tokens(cfg, call->ep, c->ex.model, root, &call->prompt_tokens) != 0) {
        c->ex.outcome = SIM_OUT_FAIL_500;
        fprintf(stderr,
                "openai-sim: cannot count prompt tokens of %s: tokenizer vocabulary not "
                "loaded (set LLMQ_DATA_DIR)\n",
                c->ex.model);
        sim_reply_error(c->srv, &c->ex, 500, "server_error", NULL, NULL,
                        "openai-sim could not load the tokenizer vocabulary", NULL, call->azure);
        return -1;
    }
    call->cached_tokens = call->prompt_tokens * cfg->cached_pct / 100;
    sim_completion_tokens(cfg, call);
    int64_t per = call->max_tokens > 0 ? call->max_tokens : cfg->completion_max;
    call->reserve_tokens = call->prompt_tokens + per * call->n;
    return 0;
}

double sim_draw_pct(struct sim_server *srv)
{
    return (double)(llmq_rng_next(&srv->rng) >> 11) * (100.0 / 9007199254740992.0);
}

int sim_fault_before(struct sim_conn *c, const struct sim_call *call)
{
    struct sim_server *srv = c->srv;
    const struct sim_config *cfg = &srv->cfg;
    if (srv->failed_first < cfg->fail_first) {
        srv->failed_first++;
        c->ex.outcome = SIM_OUT_FAIL_500;
        sim_reply_error(srv, &c->ex, 500, "server_error", NULL, NULL,
                        "The server had an error while processing your request. Sorry about "
                        "that!",
                        NULL, call->azure);
        return 1;
    }
    double sum = cfg->insufficient_quota_pct + cfg->fail_500_pct + cfg->fail_503_pct +
                 cfg->bad_200_html_pct + cfg->bad_200_shape_pct;
    if (sum <= 0.0)
        return 0;
    double u = sim_draw_pct(srv);
    if (u < cfg->insufficient_quota_pct) {
        c->ex.outcome = SIM_OUT_INSUFFICIENT_QUOTA;
        c->ex.status = 429;
        if (call->azure)
            sim_reply_azure_error(srv, &c->ex, 429,
                                  "Your quota for this deployment has been exhausted.", NULL);
        else
            sim_reply_error(srv, &c->ex, 429, "insufficient_quota", NULL, "insufficient_quota",
                            "You exceeded your current quota, please check your plan and "
                            "billing details. For more information on this error, read the "
                            "docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
                            NULL, 0);
        return 1;
    }
    u -= cfg->insufficient_quota_pct;
    if (u < cfg->fail_500_pct) {
        c->ex.outcome = SIM_OUT_FAIL_500;
        sim_reply_error(srv, &c->ex, 500, "server_error", NULL, NULL,
                        "The server had an error while processing your request. Sorry about "
                        "that!",
                        NULL, call->azure);
        return 1;
    }
    u -= cfg->fail_500_pct;
    if (u < cfg->fail_503_pct) {
        c->ex.outcome = SIM_OUT_FAIL_503;
        sim_reply_error(srv, &c->ex, 503, "server_error", NULL, NULL,
                        "The engine is currently overloaded, please try again later.", NULL,
                        call->azure);
        return 1;
    }
    u -= cfg->fail_503_pct;
    if (u < cfg->bad_200_html_pct) {
        /* What a captive portal or a misconfigured proxy answers. */
        static const char page[] = "<!DOCTYPE html>\n<html><head><title>Sign in</title></head>"
                                   "<body><p>Please sign in to continue.</p></body></html>\n";
        c->ex.outcome = SIM_OUT_BAD_200_HTML;
        c->ex.status = 200;
        sim_buf_addf(&c->ex.out,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nx-request-id: %s\r\n%s\r\n",
                     sizeof(page) - 1, c->ex.request_id,
                     c->ex.close_after ? "Connection: close\r\n" : "");
        sim_buf_add(&c->ex.out, page, sizeof(page) - 1);
        sim_mark(&c->ex);
        return 1;
    }
    u -= cfg->bad_200_html_pct;
    if (u < cfg->bad_200_shape_pct) {
        /* Valid JSON, but no choices / data / output: not what any endpoint returns. */
        c->ex.outcome = SIM_OUT_BAD_200_SHAPE;
        sim_buf_reset(&srv->scratch);
        sim_buf_addf(&srv->scratch, "{\"id\":\"%s\",\"object\":\"unexpected\",\"status\":\"ok\"}",
                     c->ex.request_id);
        sim_reply_json(srv, &c->ex, 200, NULL, call->azure, NULL);
        return 1;
    }
    return 0;
}

static void limits_for(const struct sim_config *cfg, const char *model, int64_t *rpm, int64_t *tpm)
{
    for (int i = 0; i < cfg->n_limits; i++) {
        if (strcmp(cfg->limits[i].model, model) == 0) {
            *rpm = cfg->limits[i].rpm;
            *tpm = cfg->limits[i].tpm;
            return;
        }
    }
    *rpm = cfg->rpm;
    *tpm = cfg->tpm;
}

static struct sim_bucket *bucket_get(struct sim_server *srv, const unsigned char sha[32],
                                     const char *model)
{
    uint64_t h = sim_hash_bytes(model, strlen(model)) ^ sim_hash_bytes(sha, 8);
    struct sim_bucket **slot = &srv->buckets[h % SIM_BUCKET_SLOTS];
    for (struct sim_bucket *b = *slot; b != NULL; b = b->next)
        if (memcmp(b->key_sha, sha, 32) == 0 && strcmp(b->model, model) == 0)
            return b;
    struct sim_bucket *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    memcpy(b->key_sha, sha, 32);
    snprintf(b->model, sizeof(b->model), "%s", model);
    limits_for(&srv->cfg, model, &b->rpm, &b->tpm);
    b->next = *slot;
    *slot = b;
    return b;
}

static void rl_fill(const struct sim_bucket *b, int64_t now_ms, int64_t period_ms,
                    struct sim_rl_info *rl)
{
    rl->have_req = b->rpm > 0;
    rl->have_tok = b->tpm > 0;
    rl->limit_req = b->rpm;
    rl->limit_tok = b->tpm;
    rl->remaining_req = b->rpm > (int64_t)b->win.len ? b->rpm - (int64_t)b->win.len : 0;
    rl->remaining_tok = b->tpm > b->win.used_tokens ? b->tpm - b->win.used_tokens : 0;
    rl->reset_req_ms = sim_window_reset_ms(&b->win, now_ms, period_ms);
    rl->reset_tok_ms = sim_window_reset_tokens_ms(&b->win, now_ms, period_ms);
}

/* Builds the 429 of a request that can never fit the token limit. */
static void too_large(struct sim_conn *c, const struct sim_call *call, int64_t tpm,
                      const struct sim_rl_info *rl)
{
    char msg[384];
    c->ex.outcome = SIM_OUT_TOO_LARGE;
    snprintf(msg, sizeof(msg),
             "Request too large for %.128s in organization org-sim on tokens per min (TPM): "
             "Limit %lld, Requested %lld. The input or output tokens must be reduced in order "
             "to run successfully. Visit https://platform.openai.com/account/rate-limits to "
             "learn more.",
             c->ex.model, (long long)tpm, (long long)call->reserve_tokens);
    if (call->azure)
        sim_reply_azure_error(c->srv, &c->ex, 429, msg, rl);
    else
        sim_reply_error(c->srv, &c->ex, 429, "tokens", NULL, "rate_limit_exceeded", msg, rl, 0);
}

int sim_window_admit(struct sim_conn *c, const struct sim_call *call, struct sim_rl_info *rl)
{
    struct sim_server *srv = c->srv;
    const struct sim_config *cfg = &srv->cfg;
    int64_t rpm, tpm, wait_ms = 0;
    memset(rl, 0, sizeof(*rl));
    limits_for(cfg, c->ex.model, &rpm, &tpm);
    int spurious = cfg->spurious_429_pct > 0.0 && sim_draw_pct(srv) < cfg->spurious_429_pct;
    struct sim_bucket *b = rpm > 0 || tpm > 0 ? bucket_get(srv, c->ex.key_sha, c->ex.model) : NULL;
    int64_t now = llmq_monotonic_ms();
    if (b != NULL) {
        sim_window_expire(&b->win, now, cfg->period_ms);
        rl_fill(b, now, cfg->period_ms, rl);
    }
    if (spurious) {
        c->ex.outcome = SIM_OUT_SPURIOUS_429;
        sim_reply_429(srv, &c->ex, call, "requests", rpm, rpm, 1, cfg->spurious_retry_ms,
                      b ? rl : NULL);
        return 1;
    }
    if (b == NULL)
        return 0;
    enum sim_window_verdict v =
        sim_window_check(&b->win, now, cfg->period_ms, rpm, tpm, call->reserve_tokens, &wait_ms);
    if (v == SIM_WINDOW_TOO_LARGE) {
        too_large(c, call, tpm, rl);
        return 1;
    }
    if (v == SIM_WINDOW_DENY_REQUESTS) {
        c->ex.outcome = SIM_OUT_LIMIT_REQUESTS;
        sim_reply_429(srv, &c->ex, call, "requests", rpm, (int64_t)b->win.len, 1, wait_ms, rl);
        return 1;
    }
    if (v == SIM_WINDOW_DENY_TOKENS) {
        c->ex.outcome = SIM_OUT_LIMIT_TOKENS;
        sim_reply_429(srv, &c->ex, call, "tokens", tpm, b->win.used_tokens, call->reserve_tokens,
                      wait_ms, rl);
        return 1;
    }
    if (sim_window_add(&b->win, now, call->reserve_tokens, &c->ex.seq) == 0) {
        c->ex.bucket = b;
        c->ex.charged_tokens = call->reserve_tokens;
    }
    rl_fill(b, now, cfg->period_ms, rl);
    return 0;
}
