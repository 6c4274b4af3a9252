/* llmq_call_classify (worker/classify.c): one table row per status, header
 * and body case of an API call's outcome, with the verdict, cause, refund,
 * retry hint, reason and usage expected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "classify.h"

#define CHAT "/v1/chat/completions"
#define EMB "/v1/embeddings"
#define RESP "/v1/responses"
#define COMPL "/v1/completions"

#define CHAT_OK                                                                                    \
    "{\"id\":\"c1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":"         \
    "{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":\"stop\"}],"                    \
    "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}"
#define HTML "<!DOCTYPE html><html><body>Please sign in</body></html>"
#define SSE_CHUNK                                                                                  \
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}"  \
    "\n\n"
#define SSE_USAGE                                                                                  \
    "data: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,"   \
    "\"completion_tokens\":1,\"total_tokens\":4}}\n\n"
#define ERR(code, type)                                                                            \
    "{\"error\":{\"message\":\"m\",\"type\":\"" type "\",\"code\":\"" code "\"}}"

struct row {
    const char *name;
    enum llmq_http_outcome outcome;
    int sent;
    long status;
    const char *headers; /* header block text, or NULL */
    const char *body;
    const char *path;
    enum llmq_call_verdict verdict;
    enum llmq_call_cause cause;
    int refund;
    int64_t hint_ms;
    const char *reason_prefix;
    int64_t usage_total; /* -1: no usage expected */
};

static const struct row rows[] = {
    /* 2xx valid, per endpoint */
    {"chat ok", LLMQ_HTTP_OK, 1, 200, NULL, CHAT_OK, CHAT, LLMQ_CALL_DONE, LLMQ_CALL_CAUSE_OK, 0,
     -1, "http 200", 7},
    {"chat ok without usage", LLMQ_HTTP_OK, 1, 200, NULL, "{\"choices\":[]}", CHAT, LLMQ_CALL_DONE,
     LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", -1},
    {"embeddings ok", LLMQ_HTTP_OK, 1, 200, NULL,
     "{\"object\":\"list\",\"data\":[{\"embedding\":[0.1]}],\"usage\":{\"prompt_tokens\":2,"
     "\"total_tokens\":2}}",
     EMB, LLMQ_CALL_DONE, LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", 2},
    {"responses ok", LLMQ_HTTP_OK, 1, 200, NULL,
     "{\"object\":\"response\",\"output\":[],\"usage\":{\"input_tokens\":4,\"output_tokens\":6,"
     "\"total_tokens\":10}}",
     RESP, LLMQ_CALL_DONE, LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", 10},
    {"completions ok", LLMQ_HTTP_OK, 1, 200, NULL, "{\"choices\":[{\"text\":\"x\"}]}", COMPL,
     LLMQ_CALL_DONE, LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", -1},
    {"201 counts as 2xx", LLMQ_HTTP_OK, 1, 201, NULL, CHAT_OK, CHAT, LLMQ_CALL_DONE,
     LLMQ_CALL_CAUSE_OK, 0, -1, "http 201", 7},
    {"other endpoint: any object", LLMQ_HTTP_OK, 1, 200, NULL, "{\"results\":[]}",
     "/v1/moderations", LLMQ_CALL_DONE, LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", -1},
    {"azure deployment path", LLMQ_HTTP_OK, 1, 200, NULL, CHAT_OK,
     "/openai/deployments/d1/chat/completions?api-version=2024-06-01", LLMQ_CALL_DONE,
     LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", 7},
    {"x-should-retry false on a good 200", LLMQ_HTTP_OK, 1, 200, "x-should-retry: false\r\n",
     CHAT_OK, CHAT, LLMQ_CALL_DONE, LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", 7},
    {"chat stream finished", LLMQ_HTTP_OK, 1, 200, NULL, SSE_CHUNK SSE_USAGE "data: [DONE]\n\n",
     CHAT, LLMQ_CALL_DONE, LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", 4},
    {"responses stream completed", LLMQ_HTTP_OK, 1, 200, NULL,
     "event: response.created\ndata: {\"type\":\"response.created\"}\n\n"
     "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":"
     "{\"input_tokens\":1,\"output_tokens\":2,\"total_tokens\":3}}}\n\n",
     RESP, LLMQ_CALL_DONE, LLMQ_CALL_CAUSE_OK, 0, -1, "http 200", 3},
    /* 2xx invalid: retried (not refunded), reason invalid_response */
    {"chat 200 html", LLMQ_HTTP_OK, 1, 200, NULL, HTML, CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1, "invalid_response: http 200, body is not JSON", -1},
    {"chat 200 no choices", LLMQ_HTTP_OK, 1, 200, NULL, "{\"id\":\"x\",\"object\":\"unexpected\"}",
     CHAT, LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1,
     "invalid_response: http 200, JSON without the \"choices\" array", -1},
    {"chat 200 choices not an array", LLMQ_HTTP_OK, 1, 200, NULL, "{\"choices\":{}}", CHAT,
     LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1, "invalid_response", -1},
    {"embeddings 200 without data", LLMQ_HTTP_OK, 1, 200, NULL, "{\"choices\":[]}", EMB,
     LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1,
     "invalid_response: http 200, JSON without the \"data\" array", -1},
    {"responses 200 without output", LLMQ_HTTP_OK, 1, 200, NULL, "{\"choices\":[]}", RESP,
     LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1,
     "invalid_response: http 200, JSON without the \"output\" array", -1},
    {"completions 200 without choices", LLMQ_HTTP_OK, 1, 200, NULL, "{\"data\":[]}", COMPL,
     LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1, "invalid_response", -1},
    {"200 JSON array", LLMQ_HTTP_OK, 1, 200, NULL, "[1,2]", "/v1/moderations", LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1,
     "invalid_response: http 200, body is not a JSON object", -1},
    {"200 empty body", LLMQ_HTTP_OK, 1, 200, NULL, "", CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1, "invalid_response: http 200, empty body", -1},
    {"200 truncated JSON", LLMQ_HTTP_OK, 1, 200, NULL, "{\"choices\":[{\"message\":", CHAT,
     LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1, "invalid_response", -1},
    {"chat stream cut before [DONE]", LLMQ_HTTP_OK, 1, 200, NULL, SSE_CHUNK SSE_USAGE, CHAT,
     LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1,
     "invalid_response: http 200, event stream ended before its last event", -1},
    {"responses stream cut before completed", LLMQ_HTTP_OK, 1, 200, NULL,
     "event: response.created\ndata: {\"type\":\"response.created\"}\n\n", RESP, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1, "invalid_response", -1},
    {"invalid 200 despite x-should-retry false", LLMQ_HTTP_OK, 1, 200, "x-should-retry: false\r\n",
     HTML, CHAT, LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_INVALID_RESPONSE, 0, -1, "invalid_response", -1},
    /* 4xx: dead at once, refunded */
    {"400", LLMQ_HTTP_OK, 1, 400, NULL, ERR("invalid_value", "invalid_request_error"), CHAT,
     LLMQ_CALL_DEAD, LLMQ_CALL_CAUSE_CLIENT, 1, -1, "http 400 invalid_value", -1},
    {"404 model_not_found", LLMQ_HTTP_OK, 1, 404, NULL,
     ERR("model_not_found", "invalid_request_error"), CHAT, LLMQ_CALL_DEAD, LLMQ_CALL_CAUSE_CLIENT,
     1, -1, "http 404 model_not_found", -1},
    {"413 with an html body", LLMQ_HTTP_OK, 1, 413, NULL, HTML, CHAT, LLMQ_CALL_DEAD,
     LLMQ_CALL_CAUSE_CLIENT, 1, -1, "http 413", -1},
    {"400 with x-should-retry true", LLMQ_HTTP_OK, 1, 400, "x-should-retry: true\r\n",
     ERR("x", "invalid_request_error"), CHAT, LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_CLIENT, 0, -1,
     "http 400", -1},
    /* 401/403: the key, not the job */
    {"401", LLMQ_HTTP_OK, 1, 401, NULL, ERR("invalid_api_key", "invalid_request_error"), CHAT,
     LLMQ_CALL_AUTH, LLMQ_CALL_CAUSE_AUTH, 1, -1, "http 401 invalid_api_key", -1},
    {"403", LLMQ_HTTP_OK, 1, 403, NULL, "Forbidden", EMB, LLMQ_CALL_AUTH, LLMQ_CALL_CAUSE_AUTH, 1,
     -1, "http 403", -1},
    {"401 ignores x-should-retry", LLMQ_HTTP_OK, 1, 401, "x-should-retry: true\r\n",
     ERR("invalid_api_key", "invalid_request_error"), CHAT, LLMQ_CALL_AUTH, LLMQ_CALL_CAUSE_AUTH, 1,
     -1, "http 401", -1},
    /* 429 */
    {"429 rate limit with retry-after-ms", LLMQ_HTTP_OK, 1, 429,
     "retry-after: 2\r\nretry-after-ms: 1500\r\n", ERR("rate_limit_exceeded", "tokens"), CHAT,
     LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_RATE_LIMIT, 1, 1500, "http 429 rate_limit_exceeded", -1},
    {"429 rate limit with retry-after seconds", LLMQ_HTTP_OK, 1, 429, "retry-after: 3\r\n",
     ERR("rate_limit_exceeded", "requests"), CHAT, LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_RATE_LIMIT, 1,
     3000, "http 429", -1},
    {"429 hint from the later reset", LLMQ_HTTP_OK, 1, 429,
     "x-ratelimit-reset-requests: 200ms\r\nx-ratelimit-reset-tokens: 2s\r\n",
     ERR("rate_limit_exceeded", "tokens"), CHAT, LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_RATE_LIMIT, 1,
     2000, "http 429", -1},
    {"429 without any hint", LLMQ_HTTP_OK, 1, 429, NULL, "", CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_RATE_LIMIT, 1, -1, "http 429", -1},
    {"429 insufficient_quota", LLMQ_HTTP_OK, 1, 429, "retry-after: 1\r\n",
     ERR("insufficient_quota", "insufficient_quota"), CHAT, LLMQ_CALL_DEAD, LLMQ_CALL_CAUSE_QUOTA,
     1, -1, "insufficient_quota", -1},
    {"429 insufficient_quota, x-should-retry true", LLMQ_HTTP_OK, 1, 429,
     "x-should-retry: true\r\n", ERR("insufficient_quota", "insufficient_quota"), CHAT,
     LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_QUOTA, 0, -1, "http 429 insufficient_quota", -1},
    {"429 rate limit, x-should-retry false", LLMQ_HTTP_OK, 1, 429, "x-should-retry: false\r\n",
     ERR("rate_limit_exceeded", "tokens"), CHAT, LLMQ_CALL_DEAD, LLMQ_CALL_CAUSE_RATE_LIMIT, 1, -1,
     "http 429", -1},
    /* 5xx, 408, 409: retried without refund */
    {"500", LLMQ_HTTP_OK, 1, 500, NULL, ERR("server_error", "server_error"), CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_SERVER, 0, -1, "http 500", -1},
    {"503 html", LLMQ_HTTP_OK, 1, 503, NULL, HTML, CHAT, LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_SERVER, 0,
     -1, "http 503", -1},
    {"500 with x-should-retry false", LLMQ_HTTP_OK, 1, 500, "x-should-retry: false\r\n", "", CHAT,
     LLMQ_CALL_DEAD, LLMQ_CALL_CAUSE_SERVER, 1, -1, "http 500", -1},
    {"408", LLMQ_HTTP_OK, 1, 408, NULL, "", CHAT, LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_SERVER, 0, -1,
     "http 408", -1},
    {"409", LLMQ_HTTP_OK, 1, 409, NULL, "", CHAT, LLMQ_CALL_RETRY, LLMQ_CALL_CAUSE_SERVER, 0, -1,
     "http 409", -1},
    /* transport */
    {"timeout after sending", LLMQ_HTTP_TIMEOUT, 1, 0, NULL, "", CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_TRANSPORT, 0, -1, "timeout: ", -1},
    {"connect refused, never sent", LLMQ_HTTP_CONNECT_ERROR, 0, 0, NULL, "", CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_TRANSPORT, 1, -1, "connect_error: ", -1},
    {"reset mid-response", LLMQ_HTTP_RESET, 1, 200, NULL, "{\"choi", CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_TRANSPORT, 0, -1, "reset: ", -1},
    {"tls error", LLMQ_HTTP_TLS_ERROR, 0, 0, NULL, "", CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_TRANSPORT, 1, -1, "tls_error: ", -1},
    {"protocol error", LLMQ_HTTP_PROTOCOL_ERROR, 1, 0, NULL, "", CHAT, LLMQ_CALL_RETRY,
     LLMQ_CALL_CAUSE_TRANSPORT, 0, -1, "protocol_error: ", -1},
    {"too big", LLMQ_HTTP_TOO_BIG, 1, 200, NULL, "{", CHAT, LLMQ_CALL_DEAD, LLMQ_CALL_CAUSE_TOO_BIG,
     0, -1, "response_too_big", -1},
    {"cancelled at shutdown", LLMQ_HTTP_CANCELLED, 1, 0, NULL, "", CHAT, LLMQ_CALL_HANDBACK,
     LLMQ_CALL_CAUSE_CANCELLED, 1, -1, "cancelled", -1},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *t = &rows[i];
        struct llmq_ratelimit_headers h;
        llmq_ratelimit_headers_init(&h);
        if (t->headers != NULL)
            llmq_ratelimit_headers_feed_block(&h, t->headers, strlen(t->headers), 0);
        struct llmq_call_response in = {
            .outcome = t->outcome,
            .request_sent = t->sent,
            .error = t->outcome == LLMQ_HTTP_OK ? "" : "curl says so",
            .status = t->status,
            .headers = &h,
            .body = t->body,
            .body_len = strlen(t->body),
            .url_path = t->path,
        };
        struct llmq_call_class c;
        llmq_call_classify(&in, &c);
        print_message("case: %s -> %s (%s)\n", t->name, c.reason, llmq_call_cause_name(c.cause));
        assert_int_equal(c.verdict, t->verdict);
        assert_int_equal(c.cause, t->cause);
        assert_int_equal(c.refund, t->refund);
        assert_int_equal(c.hint_ms, t->hint_ms);
        assert_int_equal(strncmp(c.reason, t->reason_prefix, strlen(t->reason_prefix)), 0);
        if (t->usage_total >= 0) {
            assert_true(c.has_usage);
            assert_int_equal(c.usage.total_tokens, t->usage_total);
        } else if (t->verdict == LLMQ_CALL_DONE) {
            assert_false(c.has_usage);
        }
    }
}

/* Without headers or a body pointer (NULL, length 0) nothing crashes. */
static void test_null_parts(void **state)
{
    (void)state;
    struct llmq_call_response in = {.outcome = LLMQ_HTTP_OK, .status = 429};
    struct llmq_call_class c;
    llmq_call_classify(&in, &c);
    assert_int_equal(c.verdict, LLMQ_CALL_RETRY);
    assert_int_equal(c.hint_ms, -1);
    in.status = 200;
    llmq_call_classify(&in, &c);
    assert_int_equal(c.cause, LLMQ_CALL_CAUSE_INVALID_RESPONSE);
    in.outcome = LLMQ_HTTP_TIMEOUT;
    llmq_call_classify(&in, &c);
    assert_int_equal(c.verdict, LLMQ_CALL_RETRY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_null_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
