/* Classification of one API call's outcome; see classify.h. Pure: reads the
 * borrowed response, writes *out, allocates only inside jansson. */
#include "classify.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *const cause_names[] = {
    [LLMQ_CALL_CAUSE_OK] = "ok",
    [LLMQ_CALL_CAUSE_INVALID_RESPONSE] = "invalid_response",
    [LLMQ_CALL_CAUSE_RATE_LIMIT] = "rate_limit",
    [LLMQ_CALL_CAUSE_QUOTA] = "insufficient_quota",
    [LLMQ_CALL_CAUSE_SERVER] = "server_error",
    [LLMQ_CALL_CAUSE_CLIENT] = "client_error",
    [LLMQ_CALL_CAUSE_AUTH] = "auth",
    [LLMQ_CALL_CAUSE_TRANSPORT] = "transport",
    [LLMQ_CALL_CAUSE_TOO_BIG] = "response_too_big",
    [LLMQ_CALL_CAUSE_CANCELLED] = "cancelled",
    [LLMQ_CALL_CAUSE_STALE] = "stale_grant",
};

const char *llmq_call_cause_name(enum llmq_call_cause cause)
{
    if ((unsigned)cause >= sizeof(cause_names) / sizeof(cause_names[0]))
        return "unknown";
    return cause_names[cause];
}

/* The array member a 2xx body of the endpoint at path must carry, or NULL
 * when any JSON object will do. */
static const char *required_member(const char *path)
{
    static const struct {
        const char *tail;
        const char *member;
    } shapes[] = {
        {"/chat/completions", "choices"},
        {"/completions", "choices"},
        {"/embeddings", "data"},
        {"/responses", "output"},
    };
    if (path == NULL)
        return NULL;
    size_t plen = strcspn(path, "?");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        size_t tlen = strlen(shapes[i].tail);
        if (plen >= tlen && strncmp(path + plen - tlen, shapes[i].tail, tlen) == 0)
            return shapes[i].member;
    }
    return NULL;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* 1 when body[0..len) starts (after blanks) like a server-sent-event stream. */
static int looks_like_sse(const char *body, size_t len)
{
    size_t i = 0;
    while (i < len && is_blank(body[i]))
        i++;
    static const char *const starts[] = {"data:", "event:", "id:", "retry:", ":"};
    for (size_t k = 0; k < sizeof(starts) / sizeof(starts[0]); k++) {
        size_t n = strlen(starts[k]);
        if (len - i >= n && memcmp(body + i, starts[k], n) == 0)
            return 1;
    }
    return 0;
}

/* 1 when the SSE stream text[0..len) ended as a finished stream does: its
 * last data event is "[DONE]", or an event of type response.completed. */
static int sse_finished(const char *text, size_t len)
{
    const char *last = NULL;
    size_t last_len = 0;
    size_t i = 0;
    while (i < len) {
        const char *line = text + i;
        const char *nl = memchr(line, '\n', len - i);
        size_t n = nl ? (size_t)(nl - line) : len - i;
        i += n + (nl ? 1 : 0);
        if (n >= 5 && memcmp(line, "data:", 5) == 0) {
            last = line + 5;
            last_len = n - 5;
            while (last_len > 0 && is_blank(*last)) {
                last++;
                last_len--;
            }
            while (last_len > 0 && is_blank(last[last_len - 1]))
                last_len--;
        }
    }
    if (last == NULL)
        return 0;
    if (last_len == 6 && memcmp(last, "[DONE]", 6) == 0)
        return 1;
    json_t *ev = json_loadb(last, last_len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    int done = type != NULL && strcmp(type, "response.completed") == 0;
    json_decref(ev);
    return done;
}

/* Checks a 2xx body against the endpoint; on failure writes why into
 * reason and returns 0. */
static int body_valid(const struct llmq_call_response *resp, char *why, size_t n)
{
    const char *body = resp->body ? resp->body : "";
    size_t len = resp->body ? resp->body_len : 0;
    if (len == 0) {
        snprintf(why, n, "empty body");
        return 0;
    }
    if (looks_like_sse(body, len)) {
        if (!sse_finished(body, len)) {
            snprintf(why, n, "event stream ended before its last event");
            return 0;
        }
        return 1;
    }
    json_t *j = json_loadb(body, len, 0, NULL);
    if (j == NULL) {
        snprintf(why, n, "body is not JSON");
        return 0;
    }
    int ok = 1;
    const char *member = required_member(resp->url_path);
    if (!json_is_object(j)) {
        snprintf(why, n, "body is not a JSON object");
        ok = 0;
    } else if (member != NULL && !json_is_array(json_object_get(j, member))) {
        snprintf(why, n, "JSON without the \"%s\" array this endpoint returns", member);
        ok = 0;
    }
    json_decref(j);
    return ok;
}

static void classify_transport(const struct llmq_call_response *resp, struct llmq_call_class *out)
{
    if (resp->outcome == LLMQ_HTTP_CANCELLED) {
        out->verdict = LLMQ_CALL_HANDBACK;
        out->cause = LLMQ_CALL_CAUSE_CANCELLED;
        out->refund = 1;
        snprintf(out->reason, sizeof(out->reason), "cancelled");
        return;
    }
    if (resp->outcome == LLMQ_HTTP_STALE) {
        /* Its grant outlived its lifetime before the request could go out:
         * sent now it might reach the API after the ledger let its window
         * go (lua/lib/limiter_window.lua, the arrival guard). */
        out->verdict = LLMQ_CALL_HANDBACK;
        out->cause = LLMQ_CALL_CAUSE_STALE;
        out->refund = 1;
        snprintf(out->reason, sizeof(out->reason), "stale_grant: not sent within its lifetime");
        return;
    }
    if (resp->outcome == LLMQ_HTTP_TOO_BIG) {
        out->verdict = LLMQ_CALL_DEAD;
        out->cause = LLMQ_CALL_CAUSE_TOO_BIG;
        snprintf(out->reason, sizeof(out->reason), "response_too_big");
        return; /* not refunded: the API produced (and billed) it */
    }
    out->verdict = LLMQ_CALL_RETRY;
    out->cause = LLMQ_CALL_CAUSE_TRANSPORT;
    out->refund = !resp->request_sent;
    snprintf(out->reason, sizeof(out->reason), "%s: %.120s", llmq_http_outcome_name(resp->outcome),
             resp->error ? resp->error : "");
}

/* The hint of a 429: retry-after(-ms), else the later of the reset headers. */
static int64_t rate_limit_hint_ms(const struct llmq_ratelimit_headers *h)
{
    if (h == NULL)
        return -1;
    int64_t hint = llmq_ratelimit_headers_retry_hint_ms(h);
    if (hint >= 0)
        return hint;
    int64_t rr = -1, rt = -1;
    llmq_ratelimit_headers_get(h, LLMQ_RLH_RESET_REQUESTS_MS, &rr);
    llmq_ratelimit_headers_get(h, LLMQ_RLH_RESET_TOKENS_MS, &rt);
    int64_t r = rr > rt ? rr : rt;
    return r > 0 ? r : -1;
}

void llmq_call_classify(const struct llmq_call_response *resp, struct llmq_call_class *out)
{
    memset(out, 0, sizeof(*out));
    out->hint_ms = -1;
    if (resp->outcome != LLMQ_HTTP_OK) {
        classify_transport(resp, out);
        return;
    }
    const char *body = resp->body ? resp->body : "";
    size_t len = resp->body ? resp->body_len : 0;
    int status = (int)resp->status;
    llmq_errorbody_classify(status, body, len, &out->eb);
    if (status >= 200 && status <= 299) {
        char why[128];
        if (!body_valid(resp, why, sizeof(why))) {
            out->verdict = LLMQ_CALL_RETRY;
            out->cause = LLMQ_CALL_CAUSE_INVALID_RESPONSE;
            snprintf(out->reason, sizeof(out->reason), "invalid_response: http %d, %s", status,
                     why);
            return; /* not refunded: the API may have done (and billed) the work */
        }
        out->verdict = LLMQ_CALL_DONE;
        out->cause = LLMQ_CALL_CAUSE_OK;
        out->has_usage = llmq_usage_parse(body, len, &out->usage) == LLMQ_OK;
        snprintf(out->reason, sizeof(out->reason), "http %d", status);
        return;
    }
    const struct llmq_errorbody *eb = &out->eb;
    snprintf(out->reason, sizeof(out->reason), "http %d%s%s", status, eb->code[0] ? " " : "",
             eb->code);
    if (status == 401 || status == 403) {
        out->verdict = LLMQ_CALL_AUTH;
        out->cause = LLMQ_CALL_CAUSE_AUTH;
        out->refund = 1;
        return;
    }
    int64_t should_retry = -1;
    if (resp->headers != NULL)
        llmq_ratelimit_headers_get(resp->headers, LLMQ_RLH_SHOULD_RETRY, &should_retry);
    int retryable = eb->kind == LLMQ_ERRORBODY_RATE_LIMIT || eb->kind == LLMQ_ERRORBODY_SERVER ||
                    status == 408 || status == 409;
    if (should_retry >= 0)
        retryable = (int)should_retry;
    if (eb->kind == LLMQ_ERRORBODY_INSUFFICIENT_QUOTA && should_retry != 1)
        retryable = 0;
    out->cause = eb->kind == LLMQ_ERRORBODY_INSUFFICIENT_QUOTA ? LLMQ_CALL_CAUSE_QUOTA
                 : eb->kind == LLMQ_ERRORBODY_RATE_LIMIT       ? LLMQ_CALL_CAUSE_RATE_LIMIT
                 : eb->kind == LLMQ_ERRORBODY_SERVER || status == 408 || status == 409
                     ? LLMQ_CALL_CAUSE_SERVER
                     : LLMQ_CALL_CAUSE_CLIENT;
    if (!retryable) {
        out->verdict = LLMQ_CALL_DEAD;
        out->refund = 1;
        if (eb->kind == LLMQ_ERRORBODY_INSUFFICIENT_QUOTA)
            snprintf(out->reason, sizeof(out->reason), "insufficient_quota");
        return;
    }
    out->verdict = LLMQ_CALL_RETRY;
    if (eb->kind == LLMQ_ERRORBODY_RATE_LIMIT) {
        out->refund = 1; /* a 429 was not served */
        out->hint_ms = rate_limit_hint_ms(resp->headers);
    }
}
