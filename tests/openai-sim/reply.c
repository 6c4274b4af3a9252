/* Status lines, headers and error bodies of openai-sim.
 *
 * Header policy: every answer carries x-request-id; answers about a limited
 * (key, model) carry x-ratelimit-{limit,remaining,reset}-{requests,tokens}
 * (only remaining-* in Azure style, and as --ratelimit-headers says);
 * 429s carry retry-after (whole seconds, rounded up) and retry-after-ms
 * unless --no-retry-after; x-should-retry only with --should-retry.
 * x-ratelimit-reset-* is the time until the window is back to its initial
 * state (OpenAI's documented meaning); retry-after is the exact time until
 * the denied request would fit. */
#include <stdio.h>
#include <string.h>

#include "api.h"

static const char *status_text(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 417:
        return "Expectation Failed";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

void sim_duration(int64_t ms, char *out, size_t n)
{
    if (ms < 0)
        ms = 0;
    if (ms < 1000) {
        snprintf(out, n, "%lldms", (long long)ms);
        return;
    }
    int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, frac = ms % 1000;
    char sec[24];
    if (frac == 0) {
        snprintf(sec, sizeof(sec), "%llds", (long long)s);
    } else {
        char f[4];
        snprintf(f, sizeof(f), "%03lld", (long long)frac);
        for (int i = 2; i > 0 && f[i] == '0'; i--)
            f[i] = '\0'; /* Go prints 1.5s, not 1.500s */
        snprintf(sec, sizeof(sec), "%lld.%ss", (long long)s, f);
    }
    if (h > 0)
        snprintf(out, n, "%lldh%lldm%s", (long long)h, (long long)m, sec);
    else if (m > 0)
        snprintf(out, n, "%lldm%s", (long long)m, sec);
    else
        snprintf(out, n, "%s", sec);
}

static void rl_pair(struct sim_buf *b, const char *what, const char *suffix, int64_t limit,
                    int64_t remaining, int64_t reset_ms, int remaining_only)
{
    char dur[32];
    sim_duration(reset_ms, dur, sizeof(dur));
    if (!remaining_only)
        sim_buf_addf(b, "x-ratelimit-limit-%s%s: %lld\r\n", what, suffix, (long long)limit);
    sim_buf_addf(b, "x-ratelimit-remaining-%s%s: %lld\r\n", what, suffix, (long long)remaining);
    if (!remaining_only)
        sim_buf_addf(b, "x-ratelimit-reset-%s%s: %s\r\n", what, suffix, dur);
}

static void rl_headers(const struct sim_config *cfg, struct sim_buf *b,
                       const struct sim_rl_info *rl, int azure)
{
    if (rl == NULL || cfg->rl_mode == SIM_RL_NONE)
        return;
    if (cfg->rl_mode == SIM_RL_NEGATIVE || cfg->rl_mode == SIM_RL_ZERO) {
        const char *v = cfg->rl_mode == SIM_RL_NEGATIVE ? "-1" : "0";
        sim_buf_addf(b,
                     "x-ratelimit-limit-requests: %s\r\nx-ratelimit-limit-tokens: %s\r\n"
                     "x-ratelimit-remaining-requests: %s\r\nx-ratelimit-remaining-tokens: %s\r\n"
                     "x-ratelimit-reset-requests: %s\r\nx-ratelimit-reset-tokens: %s\r\n",
                     v, v, v, v, v, v);
        return;
    }
    if (rl->have_req)
        rl_pair(b, "requests", "", rl->limit_req, rl->remaining_req, rl->reset_req_ms, azure);
    if (rl->have_tok)
        rl_pair(b, "tokens", cfg->rl_mode == SIM_RL_USAGE_BASED ? "_usage_based" : "",
                rl->limit_tok, rl->remaining_tok, rl->reset_tok_ms, azure);
}

void sim_reply_head(struct sim_server *srv, struct sim_exchange *ex, int status,
                    int64_t content_length, const struct sim_rl_info *rl, int azure,
                    const char *extra)
{
    struct sim_buf *b = &ex->out;
    ex->status = status;
    sim_buf_addf(b, "HTTP/1.1 %d %s\r\n", status, status_text(status));
    if (content_length >= 0)
        sim_buf_addf(b, "Content-Type: application/json\r\nContent-Length: %lld\r\n",
                     (long long)content_length);
    else
        sim_buf_adds(b, "Content-Type: text/event-stream; charset=utf-8\r\n"
                        "Transfer-Encoding: chunked\r\n");
    sim_buf_adds(b, "x-request-id: ");
    sim_buf_adds(b, ex->request_id);
    if (azure) {
        sim_buf_adds(b, "\r\napim-request-id: ");
        sim_buf_adds(b, ex->request_id);
    } else {
        sim_buf_adds(b, "\r\nopenai-version: 2020-10-01");
        if (!srv->cfg.no_processing_ms) {
            sim_buf_adds(b, "\r\nopenai-processing-ms: ");
            sim_buf_addi(b, ex->processing_ms);
        }
    }
    sim_buf_adds(b, "\r\n");
    rl_headers(&srv->cfg, b, rl, azure);
    if (extra != NULL)
        sim_buf_adds(b, extra);
    if (ex->close_after)
        sim_buf_adds(b, "Connection: close\r\n");
    sim_buf_adds(b, "\r\n");
}

void sim_reply_json(struct sim_server *srv, struct sim_exchange *ex, int status,
                    const struct sim_rl_info *rl, int azure, const char *extra)
{
    sim_reply_head(srv, ex, status, (int64_t)srv->scratch.len, rl, azure, extra);
    sim_buf_add(&ex->out, srv->scratch.data, srv->scratch.len);
    sim_mark(ex);
}

static void json_str_or_null(struct sim_buf *b, const char *s)
{
    if (s == NULL) {
        sim_buf_adds(b, "null");
        return;
    }
    sim_buf_adds(b, "\"");
    sim_buf_add_json_esc(b, s, strlen(s));
    sim_buf_adds(b, "\"");
}

/* x-should-retry for an error status when --should-retry is set. */
static const char *should_retry(const struct sim_server *srv, const struct sim_exchange *ex)
{
    if (!srv->cfg.should_retry)
        return NULL;
    int yes = (ex->status == 429 && ex->outcome != SIM_OUT_INSUFFICIENT_QUOTA) || ex->status >= 500;
    return yes ? "x-should-retry: true\r\n" : "x-should-retry: false\r\n";
}

void sim_reply_error(struct sim_server *srv, struct sim_exchange *ex, int status, const char *type,
                     const char *param, const char *code, const char *msg,
                     const struct sim_rl_info *rl, int azure)
{
    struct sim_buf *b = &srv->scratch;
    sim_buf_reset(b);
    sim_buf_adds(b, "{\"error\":{\"message\":");
    json_str_or_null(b, msg);
    sim_buf_adds(b, ",\"type\":");
    json_str_or_null(b, type);
    sim_buf_adds(b, ",\"param\":");
    json_str_or_null(b, param);
    sim_buf_adds(b, ",\"code\":");
    json_str_or_null(b, code);
    sim_buf_adds(b, "}}\n");
    ex->status = status;
    sim_reply_json(srv, ex, status, rl, azure, should_retry(srv, ex));
}

void sim_reply_azure_error(struct sim_server *srv, struct sim_exchange *ex, int status,
                           const char *msg, const struct sim_rl_info *rl)
{
    struct sim_buf *b = &srv->scratch;
    sim_buf_reset(b);
    sim_buf_addf(b, "{\"error\":{\"code\":\"%d\",\"message\":", status);
    json_str_or_null(b, msg);
    sim_buf_adds(b, "}}\n");
    ex->status = status;
    sim_reply_json(srv, ex, status, rl, 1, should_retry(srv, ex));
}

static const char *azure_operation(enum sim_endpoint ep)
{
    return ep == SIM_EP_EMBEDDINGS  ? "Embeddings_Create"
           : ep == SIM_EP_RESPONSES ? "Responses_Create"
                                    : "ChatCompletions_Create";
}

void sim_reply_429(struct sim_server *srv, struct sim_exchange *ex, const struct sim_call *call,
                   const char *kind, int64_t limit, int64_t used, int64_t requested,
                   int64_t wait_ms, const struct sim_rl_info *rl)
{
    char extra[160] = "", dur[32], msg[512];
    int64_t secs = (wait_ms + 999) / 1000;
    ex->status = 429;
    if (!srv->cfg.no_retry_after)
        snprintf(extra, sizeof(extra), "retry-after: %lld\r\nretry-after-ms: %lld\r\n",
                 (long long)secs, (long long)wait_ms);
    const char *sr = should_retry(srv, ex);
    if (sr != NULL)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "%s", sr);
    if (call->azure) {
        snprintf(msg, sizeof(msg),
                 "Requests to the %s Operation under Azure OpenAI API version 2024-10-21 have "
                 "exceeded %s rate limit of your current OpenAI S0 pricing tier. Please retry "
                 "after %lld seconds. Please go here: https://aka.ms/oai/quotaincrease if you "
                 "would like to further increase the default rate limit.",
                 azure_operation(call->ep), strcmp(kind, "tokens") == 0 ? "token" : "call",
                 (long long)(secs > 0 ? secs : 1));
        struct sim_buf *b = &srv->scratch;
        sim_buf_reset(b);
        sim_buf_adds(b, "{\"error\":{\"code\":\"429\",\"message\":");
        json_str_or_null(b, msg);
        sim_buf_adds(b, "}}\n");
        sim_reply_json(srv, ex, 429, rl, 1, extra);
        return;
    }
    sim_duration(wait_ms, dur, sizeof(dur));
    int tok = strcmp(kind, "tokens") == 0;
    snprintf(msg, sizeof(msg),
             "Rate limit reached for %s in organization org-sim on %s per min (%s): Limit %lld, "
             "Used %lld, Requested %lld. Please try again in %s. Visit "
             "https://platform.openai.com/account/rate-limits to learn more.",
             ex->model, kind, tok ? "TPM" : "RPM", (long long)limit, (long long)used,
             (long long)requested, dur);
    struct sim_buf *b = &srv->scratch;
    sim_buf_reset(b);
    sim_buf_adds(b, "{\"error\":{\"message\":");
    json_str_or_null(b, msg);
    sim_buf_addf(b, ",\"type\":\"%s\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}\n", kind);
    sim_reply_json(srv, ex, 429, rl, 0, extra);
}
