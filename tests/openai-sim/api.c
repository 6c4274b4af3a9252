/* Request handling of openai-sim: route, authenticate, validate, inject
 * faults, enforce the per-(key, model) window, and build the answer.
 *
 * Order of decisions for an API request (each can end it):
 *   route (404/405) -> auth (401) -> JSON and fields (400) -> model (404 with
 *   --models) -> injected insufficient_quota / spurious 429 / 500 / 503 (not
 *   charged) -> window: requests, then tokens (429, not charged) -> charge
 *   prompt + reserved completion -> injected reset / slow -> 200 after the
 *   latency, settled to the real usage when the response has been produced.
 * The fault draws come from one seeded stream in arrival order. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api.h"

/* Resets ex for a new request on c and stamps its id and times. */
static void exchange_begin(struct sim_conn *c)
{
    struct sim_server *srv = c->srv;
    struct sim_exchange *ex = &c->ex;
    sim_buf_reset(&ex->out);
    ex->n_marks = ex->released = ex->sent = 0;
    ex->stream_tokens = 0;
    ex->stream = ex->include_usage = 0;
    ex->first_s = 0.0;
    ex->processing_ms = 0;
    ex->reset = 0;
    ex->close_after = !c->req.keep_alive;
    ex->status = 0;
    ex->outcome = SIM_OUT_OK;
    ex->t_unix_ms = llmq_wall_ms();
    ex->t_mono_ms = llmq_monotonic_ms();
    ex->key8[0] = '-';
    ex->key8[1] = '\0';
    ex->model[0] = ex->path[0] = ex->client_id[0] = '\0';
    ex->prompt_tokens = ex->completion_tokens = ex->charged_tokens = 0;
    ex->bucket = NULL;
    ex->conn_id = c->id;
    ex->inflight = 0;
    uint64_t st = srv->id_salt ^ (++srv->req_counter * 0xd1b54a32d192ed03ULL);
    uint64_t a = llmq_rng_next(&st), b = llmq_rng_next(&st);
    snprintf(ex->request_id, sizeof(ex->request_id), "req_%016llx%016llx", (unsigned long long)a,
             (unsigned long long)b);
    srv->stats.requests++;
}

/* Copies span s of the read buffer into out[n], truncating. */
static void copy_span(const struct sim_conn *c, struct sim_span s, char *out, size_t n)
{
    size_t k = s.len < n - 1 ? s.len : n - 1;
    memcpy(out, c->in.data + s.off, k);
    out[k] = '\0';
}

void sim_api_http_error(struct sim_conn *c, int status, const char *why)
{
    exchange_begin(c);
    c->ex.close_after = 1;
    c->ex.outcome = status == 413 ? SIM_OUT_TOO_BIG : SIM_OUT_BAD_REQUEST;
    snprintf(c->ex.path, sizeof(c->ex.path), "-");
    sim_reply_error(c->srv, &c->ex, status, "invalid_request_error", NULL, NULL, why, NULL, 0);
}

/* Maps the request path to an endpoint; an Azure deployment path also
 * yields its deployment name (the model) in ex->model. */
static enum sim_endpoint route(struct sim_conn *c, int *azure)
{
    const char *p = c->in.data + c->req.path.off;
    size_t n = c->req.path.len;
    static const struct {
        const char *suffix;
        enum sim_endpoint ep;
    } eps[] = {
        {"/chat/completions", SIM_EP_CHAT},
        {"/embeddings", SIM_EP_EMBEDDINGS},
        {"/responses", SIM_EP_RESPONSES},
        {"/completions", SIM_EP_COMPLETIONS},
    };
    size_t n_eps = sizeof(eps) / sizeof(eps[0]);
    *azure = 0;
    if (n == 7 && memcmp(p, "/health", 7) == 0)
        return SIM_EP_HEALTH;
    for (size_t i = 0; i < n_eps; i++) {
        size_t sl = strlen(eps[i].suffix);
        if (n == sl + 3 && memcmp(p, "/v1", 3) == 0 && memcmp(p + 3, eps[i].suffix, sl) == 0)
            return eps[i].ep;
    }
    static const char dep[] = "/openai/deployments/";
    size_t dl = sizeof(dep) - 1;
    if (!c->srv->cfg.azure || n <= dl || memcmp(p, dep, dl) != 0)
        return SIM_EP_NONE;
    const char *name = p + dl;
    const char *slash = memchr(name, '/', n - dl);
    if (slash == NULL || slash == name || (size_t)(slash - name) >= sizeof(c->ex.model))
        return SIM_EP_NONE;
    size_t rest = n - (size_t)(slash - p);
    for (size_t i = 0; i < n_eps; i++) {
        if (rest == strlen(eps[i].suffix) && memcmp(slash, eps[i].suffix, rest) == 0) {
            memcpy(c->ex.model, name, (size_t)(slash - name));
            c->ex.model[slash - name] = '\0';
            *azure = 1;
            return eps[i].ep;
        }
    }
    return SIM_EP_NONE;
}

/* Finds the caller's key; checks it against --api-key. Returns 0 or -1 (401 built). */
static int authenticate(struct sim_conn *c, int azure)
{
    struct sim_server *srv = c->srv;
    const char *buf = c->in.data;
    const char *key = "";
    size_t kn = 0;
    struct sim_span a = c->req.auth;
    if (a.len > 7 && strncasecmp(buf + a.off, "Bearer ", 7) == 0) {
        key = buf + a.off + 7;
        kn = a.len - 7;
    } else if (c->req.api_key.len > 0) {
        key = buf + c->req.api_key.off;
        kn = c->req.api_key.len;
    }
    sim_key_digest(key, kn, c->ex.key8, c->ex.key_sha);
    const char *want = srv->cfg.api_key;
    if (want == NULL || (strlen(want) == kn && memcmp(want, key, kn) == 0))
        return 0;
    c->ex.outcome = SIM_OUT_UNAUTHORIZED;
    if (azure)
        sim_reply_azure_error(srv, &c->ex, 401,
                              "Access denied due to invalid subscription key or wrong API "
                              "endpoint. Make sure to provide a valid key for an active "
                              "subscription and use a correct regional API endpoint for your "
                              "resource.",
                              NULL);
    else
        sim_reply_error(srv, &c->ex, 401, "invalid_request_error", NULL,
                        kn ? "invalid_api_key" : NULL,
                        kn ? "Incorrect API key provided. You can find your API key at "
                             "https://platform.openai.com/account/api-keys."
                           : "You didn't provide an API key. You need to provide your API key "
                             "in an Authorization header using Bearer auth (i.e. "
                             "Authorization: Bearer YOUR_KEY).",
                        NULL, 0);
    return -1;
}

static void not_found(struct sim_conn *c, int azure)
{
    char msg[160];
    c->ex.outcome = SIM_OUT_NOT_FOUND;
    if (azure) {
        sim_reply_azure_error(c->srv, &c->ex, 404, "Resource not found", NULL);
        return;
    }
    snprintf(msg, sizeof(msg), "Invalid URL (%.*s %.64s)",
             (int)(c->req.method.len > 16 ? 16 : c->req.method.len), c->in.data + c->req.method.off,
             c->ex.path);
    sim_reply_error(c->srv, &c->ex, 404, "invalid_request_error", NULL, NULL, msg, NULL, 0);
}

/* Latency of a successful answer: base + jitter + injected slowness (--slow,
 * --slow-first). */
static int64_t answer_delay(struct sim_server *srv)
{
    const struct sim_config *cfg = &srv->cfg;
    int64_t d = cfg->latency_ms;
    if (cfg->latency_jitter_ms > 0)
        d += (int64_t)(llmq_rng_next(&srv->rng) % (uint64_t)(cfg->latency_jitter_ms + 1));
    if (cfg->slow_pct > 0.0 &&
        (double)(llmq_rng_next(&srv->rng) >> 11) * (100.0 / 9007199254740992.0) < cfg->slow_pct)
        d += cfg->slow_ms;
    if (srv->slowed_first < cfg->slow_first) {
        srv->slowed_first++;
        d += cfg->slow_ms;
    }
    return d;
}

/* Checks the route-level rules: method, Azure api-version. Returns the
 * endpoint, or SIM_EP_NONE with an answer built. */
static enum sim_endpoint route_checked(struct sim_conn *c, int *azure)
{
    enum sim_endpoint ep = route(c, azure);
    const char *buf = c->in.data;
    if (ep == SIM_EP_NONE) {
        not_found(c, 0);
        return SIM_EP_NONE;
    }
    int get = sim_span_eq(buf, c->req.method, "GET");
    if (ep == SIM_EP_HEALTH && get) {
        sim_buf_reset(&c->srv->scratch);
        sim_buf_adds(&c->srv->scratch, "{\"status\":\"ok\"}\n");
        sim_reply_json(c->srv, &c->ex, 200, NULL, 0, NULL);
        return SIM_EP_NONE;
    }
    if (!sim_span_eq(buf, c->req.method, "POST")) {
        c->ex.outcome = SIM_OUT_BAD_REQUEST;
        sim_reply_error(c->srv, &c->ex, 405, "invalid_request_error", NULL, NULL,
                        "Method not allowed: use POST", NULL, *azure);
        return SIM_EP_NONE;
    }
    if (*azure) {
        struct sim_span q = c->req.query;
        const char *v = q.len ? memmem(buf + q.off, q.len, "api-version=", 12) : NULL;
        if (v == NULL || (v != buf + q.off && v[-1] != '&')) {
            not_found(c, 1);
            return SIM_EP_NONE;
        }
    }
    return ep;
}

/* The Azure form of the Files and Batches APIs: api-version in the query
 * (else 404, as for a deployment path) and the key in the api-key header
 * (a key sent as a Bearer token is no Entra token: 401). Returns 1, or 0
 * with an answer built. */
static int azure_batch_ok(struct sim_conn *c)
{
    struct sim_span q = c->req.query;
    const char *buf = c->in.data;
    const char *v = q.len ? memmem(buf + q.off, q.len, "api-version=", 12) : NULL;
    if (v == NULL || (v != buf + q.off && v[-1] != '&')) {
        not_found(c, 1);
        return 0;
    }
    if (c->req.api_key.len == 0) {
        c->ex.outcome = SIM_OUT_UNAUTHORIZED;
        sim_reply_azure_error(c->srv, &c->ex, 401,
                              "Access denied due to missing subscription key. Make sure to "
                              "include subscription key when making requests to an API.",
                              NULL);
        return 0;
    }
    return 1;
}

/* Builds the answer of an admitted request. Returns its delay in ms. */
static int64_t answer(struct sim_conn *c, struct sim_call *call, const struct sim_rl_info *rl)
{
    struct sim_server *srv = c->srv;
    struct sim_exchange *ex = &c->ex;
    ex->prompt_tokens = call->prompt_tokens;
    ex->completion_tokens = call->completion_total;
    ex->charged_tokens = call->reserve_tokens;
    int64_t delay = answer_delay(srv);
    /* OpenAI's openai-processing-ms: the time it took after counting the
     * request, so a client can tell its own lateness (the time to the first
     * byte less this) from the API's work. */
    ex->processing_ms = call->stream && srv->cfg.stream_gap_ms <= 0 ? 0 : delay;
    if (srv->cfg.reset_pct > 0.0 &&
        (double)(llmq_rng_next(&srv->rng) >> 11) * (100.0 / 9007199254740992.0) <
            srv->cfg.reset_pct) {
        /* After the latency the first line of an answer, then an RST: a reset
         * before any byte would be resent silently by libcurl on a reused
         * connection and never reach the client under test. */
        ex->reset = 1;
        ex->outcome = SIM_OUT_RESET;
        ex->status = 0;
        ex->completion_tokens = 0;
        sim_buf_adds(&ex->out, "HTTP/1.1 200 OK\r\n");
        sim_mark(ex);
        sim_mark(ex);
        return delay;
    }
    ex->stream = call->stream;
    ex->include_usage = call->include_usage;
    if (call->stream) {
        call->stream_error =
            srv->cfg.stream_error_pct > 0.0 && sim_draw_pct(srv) < srv->cfg.stream_error_pct;
        if (srv->cfg.stream_gap_ms > 0) {
            /* paced: the first event after the latency, then one per gap */
            ex->first_s = (double)delay / 1000.0;
            delay = delay > 0 ? delay : 1;
        }
    }
    if (call->ep == SIM_EP_CHAT && call->stream)
        sim_stream_chat(srv, ex, call, rl);
    else if (call->ep == SIM_EP_COMPLETIONS && call->stream)
        sim_stream_completions(srv, ex, call, rl);
    else if (call->ep == SIM_EP_RESPONSES && call->stream)
        sim_stream_responses(srv, ex, call, rl);
    else if (call->ep == SIM_EP_COMPLETIONS)
        sim_body_completions(srv, ex, call, rl);
    else if (call->ep == SIM_EP_CHAT)
        sim_body_chat(srv, ex, call, rl);
    else if (call->ep == SIM_EP_EMBEDDINGS)
        sim_body_embeddings(srv, ex, call, rl);
    else
        sim_body_responses(srv, ex, call, rl);
    return delay;
}

int64_t sim_api_handle(struct sim_conn *c)
{
    struct sim_server *srv = c->srv;
    struct sim_exchange *ex = &c->ex;
    exchange_begin(c);
    copy_span(c, c->req.client_request_id, ex->client_id, sizeof(ex->client_id));
    copy_span(c, c->req.path, ex->path, sizeof(ex->path));
    if (srv->cfg.static_mode) {
        sim_buf_add(&ex->out, srv->static_resp.data, srv->static_resp.len);
        ex->status = 200;
        sim_mark(ex);
        return 0;
    }
    struct sim_call call;
    memset(&call, 0, sizeof(call));
    json_t *root = NULL;
    int64_t delay = 0;
    int batch_azure = 0;
    if (sim_batch_route(c, &batch_azure)) {
        if (batch_azure && !azure_batch_ok(c))
            goto done;
        if (authenticate(c, batch_azure) == 0)
            delay = sim_batch_handle(c);
        goto done;
    }
    call.ep = route_checked(c, &call.azure);
    if (call.ep == SIM_EP_NONE || authenticate(c, call.azure) != 0 ||
        sim_call_parse(c, &call, &root) != 0 || sim_fault_before(c, &call))
        goto done;
    struct sim_rl_info rl;
    ex->prompt_tokens = call.prompt_tokens;
    if (sim_window_admit(c, &call, &rl) != 0)
        goto done;
    delay = answer(c, &call, &rl);
done:
    json_decref(root);
    if (ex->out.oom) {
        /* Out of memory while building: answer nothing and drop the connection. */
        sim_buf_reset(&ex->out);
        ex->reset = 1;
        ex->n_marks = 0;
        sim_mark(ex);
    }
    return delay;
}

void sim_api_settle(struct sim_server *srv, struct sim_exchange *ex)
{
    if (ex->bucket == NULL)
        return;
    /* OpenAI keeps the admission charge for the whole window: only the
     * usage mode gives the unused reservation back. */
    if (srv->cfg.charge == SIM_CHARGE_USAGE)
        sim_window_settle(&ex->bucket->win, ex->seq, ex->prompt_tokens + ex->completion_tokens);
    ex->bucket = NULL;
}
