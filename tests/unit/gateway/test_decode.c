/* llmq-gateway's request decoders (gateway/decode.c): routes, bearer
 * headers, list queries, call and batch bodies, result lines. Each rejection
 * is checked for its status, param and code (OpenAI's shape). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decode.h"
#include "jobs/job.h"

static enum gw_route route(const char *method, const char *path, char *id)
{
    struct gw_route_match m;
    gw_route_decode(method, path, &m);
    if (id != NULL)
        memcpy(id, m.id, sizeof(m.id));
    return m.route;
}

static void test_routes(void **state)
{
    (void)state;
    char id[GW_ID_MAX + 1];
    assert_int_equal(route("POST", "/v1/chat/completions", NULL), GW_ROUTE_CALL);
    assert_int_equal(route("POST", "/v1/embeddings", NULL), GW_ROUTE_CALL);
    assert_int_equal(route("GET", "/v1/chat/completions", NULL), GW_ROUTE_METHOD_NOT_ALLOWED);
    assert_int_equal(route("POST", "/v1/files", NULL), GW_ROUTE_FILE_CREATE);
    assert_int_equal(route("GET", "/v1/files", NULL), GW_ROUTE_FILE_LIST);
    assert_int_equal(route("GET", "/v1/files/file-1", id), GW_ROUTE_FILE_GET);
    assert_string_equal(id, "file-1");
    assert_int_equal(route("DELETE", "/v1/files/file-1", NULL), GW_ROUTE_FILE_DELETE);
    assert_int_equal(route("GET", "/v1/files/file-1/content", NULL), GW_ROUTE_FILE_CONTENT);
    assert_int_equal(route("GET", "/v1/files/file-1/other", NULL), GW_ROUTE_NOT_FOUND);
    assert_int_equal(route("POST", "/v1/batches", NULL), GW_ROUTE_BATCH_CREATE);
    assert_int_equal(route("GET", "/v1/batches", NULL), GW_ROUTE_BATCH_LIST);
    assert_int_equal(route("GET", "/v1/batches/batch_1", NULL), GW_ROUTE_BATCH_GET);
    assert_int_equal(route("POST", "/v1/batches/batch_1/cancel", id), GW_ROUTE_BATCH_CANCEL);
    assert_string_equal(id, "batch_1");
    assert_int_equal(route("GET", "/v1/batches/batch_1/cancel", NULL), GW_ROUTE_METHOD_NOT_ALLOWED);
    assert_int_equal(route("GET", "/v1/files/a{b}", id), GW_ROUTE_NOT_FOUND);
    assert_string_equal(id, "");
    assert_int_equal(route("GET", "/v1/filesx", NULL), GW_ROUTE_NOT_FOUND);
    assert_int_equal(route("GET", "/v1/models", NULL), GW_ROUTE_MODEL_LIST);
    assert_int_equal(route("GET", "/v1/models/gpt-4o-mini", id), GW_ROUTE_MODEL_GET);
    assert_string_equal(id, "gpt-4o-mini");
    assert_int_equal(route("POST", "/v1/models", NULL), GW_ROUTE_METHOD_NOT_ALLOWED);
    assert_int_equal(route("GET", "/v1/models/a/b", NULL), GW_ROUTE_NOT_FOUND);
    assert_true(gw_route_needs_key(GW_ROUTE_MODEL_LIST));
    assert_int_equal(route("GET", "/healthz", NULL), GW_ROUTE_HEALTHZ);
    assert_int_equal(route("POST", "/metrics", NULL), GW_ROUTE_METHOD_NOT_ALLOWED);
    assert_false(gw_route_needs_key(GW_ROUTE_HEALTHZ));
    assert_true(gw_route_needs_key(GW_ROUTE_CALL));
}

static void test_bearer(void **state)
{
    (void)state;
    const char *k = NULL;
    size_t n = 0;
    assert_true(gw_bearer_decode("Bearer llmqgw-1", &k, &n));
    assert_int_equal(n, 8);
    assert_memory_equal(k, "llmqgw-1", 8);
    assert_true(gw_bearer_decode("  bearer   abc  ", &k, &n));
    assert_int_equal(n, 3);
    assert_false(gw_bearer_decode("Basic abc", &k, &n));
    assert_false(gw_bearer_decode("Bearer", &k, &n));
    assert_false(gw_bearer_decode("Bearer a b", &k, &n));
    assert_false(gw_bearer_decode("Bearerabc", &k, &n));
    assert_false(gw_bearer_decode(NULL, &k, &n));
}

static void test_list_query(void **state)
{
    (void)state;
    struct gw_list_query q;
    struct gw_error e;
    assert_int_equal(gw_list_query_decode(NULL, NULL, 20, 100, &q, &e), 0);
    assert_int_equal(q.limit, 20);
    assert_int_equal(gw_list_query_decode("batch_1", "100", 20, 100, &q, &e), 0);
    assert_string_equal(q.after, "batch_1");
    assert_int_equal(q.limit, 100);
    assert_int_equal(gw_list_query_decode(NULL, "0", 20, 100, &q, &e), -1);
    assert_string_equal(e.param, "limit");
    assert_int_equal(gw_list_query_decode(NULL, "5x", 20, 100, &q, &e), -1);
    assert_int_equal(gw_list_query_decode("a b", NULL, 20, 100, &q, &e), -1);
    assert_string_equal(e.param, "after");
    assert_int_equal(e.status, 400);
}

static void test_call(void **state)
{
    (void)state;
    struct gw_call c;
    struct gw_error e;
    const char *ok = "{\"model\":\"gpt-4o-mini\",\"user\":\"alice\",\"messages\":[]}";
    assert_int_equal(gw_call_decode(NULL, ok, strlen(ok), &c, &e), 0);
    assert_string_equal(c.model, "gpt-4o-mini");
    assert_string_equal(c.user, "alice");
    gw_call_clear(&c);
    const char *spaced = "{\"model\":\"m\",\"user\":\"Alice Smith\"}";
    assert_int_equal(gw_call_decode(NULL, spaced, strlen(spaced), &c, &e), 0);
    assert_int_equal(strlen(c.user), 34); /* "u-" + 32 hex of its SHA-256 */
    assert_memory_equal(c.user, "u-", 2);
    gw_call_clear(&c);
    struct {
        const char *body, *param, *code;
    } bad[] = {
        {"{\"model\":", NULL, NULL},
        {"[]", NULL, NULL},
        {"{}", "model", NULL},
        {"{\"model\":\"a b\"}", "model", "invalid_value"},
        {"{\"model\":\"m\",\"stream\":1}", "stream", "invalid_type"},
        {"{\"model\":\"m\",\"user\":[]}", "user", "invalid_type"},
        {"{\"model\":\"m\",\"model\":\"n\"}", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gw_call_decode(NULL, bad[i].body, strlen(bad[i].body), &c, &e), -1);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.type, "invalid_request_error");
        if (bad[i].param)
            assert_string_equal(e.param, bad[i].param);
        else
            assert_null(e.param);
        if (bad[i].code)
            assert_string_equal(e.code, bad[i].code);
        else
            assert_null(e.code);
    }
    /* the endpoint's prompt field is a required parameter, named */
    const char *no_messages = "{\"model\":\"m\"}";
    assert_int_equal(
        gw_call_decode("/v1/chat/completions", no_messages, strlen(no_messages), &c, &e), -1);
    assert_string_equal(e.param, "messages");
    assert_string_equal(e.code, "missing_required_parameter");
    assert_int_equal(gw_call_decode("/v1/embeddings", no_messages, strlen(no_messages), &c, &e),
                     -1);
    assert_string_equal(e.param, "input");
    assert_int_equal(gw_call_decode("/v1/chat/completions", ok, strlen(ok), &c, &e), 0);
    gw_call_clear(&c);
    const char *stream_false = "{\"model\":\"m\",\"stream\":false}";
    assert_int_equal(gw_call_decode(NULL, stream_false, strlen(stream_false), &c, &e), 0);
    assert_int_equal(c.stream, 0);
    gw_call_clear(&c);
    /* stream: true where the API streams; refused where it does not */
    const char *chat_stream = "{\"model\":\"m\",\"stream\":true,\"messages\":[]}";
    assert_int_equal(
        gw_call_decode("/v1/chat/completions", chat_stream, strlen(chat_stream), &c, &e), 0);
    assert_int_equal(c.stream, 1);
    gw_call_clear(&c);
    const char *resp_stream = "{\"model\":\"m\",\"stream\":true,\"input\":\"x\"}";
    assert_int_equal(gw_call_decode("/v1/responses", resp_stream, strlen(resp_stream), &c, &e), 0);
    assert_int_equal(c.stream, 1);
    gw_call_clear(&c);
    assert_int_equal(gw_call_decode("/v1/embeddings", resp_stream, strlen(resp_stream), &c, &e),
                     -1);
    assert_string_equal(e.param, "stream");
    assert_string_equal(e.code, "unsupported_value");
}

/* A call's job is built from the decode's own parse (gw_call.body, the
 * body parsed once): the same job llmq_job_from_request makes from the text,
 * and the same refusal of a body over the size limit. */
static void test_call_body_builds_the_job(void **state)
{
    (void)state;
    const char *url = "/v1/chat/completions";
    const char *text = "{\"model\": \"gpt-4o-mini\",\n \"messages\": [{\"role\": \"user\", "
                       "\"content\": \"hello there, how are you\"}], \"max_tokens\": 7}";
    struct gw_call c;
    struct gw_error e;
    assert_int_equal(gw_call_decode(url, text, strlen(text), &c, &e), 0);
    assert_true(json_is_object(c.body));
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_job_options o = {.job_id = "c1", .user = "alice"};
    struct llmq_job a, b;
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_from_request_json(url, c.body, &o, &d, &a, &err), LLMQ_OK);
    assert_int_equal(llmq_job_from_request(url, text, &o, &d, &b, &err), LLMQ_OK);
    assert_string_equal(a.id, "c1");
    assert_string_equal(a.id, b.id);
    assert_string_equal(a.model, b.model);
    assert_string_equal(a.body, b.body); /* compact, as stored */
    assert_string_equal(a.user, b.user);
    assert_int_equal(a.cost.prompt_tokens, b.cost.prompt_tokens);
    assert_int_equal(a.cost.total_tokens, b.cost.total_tokens);
    assert_true(a.cost.total_tokens > 7);
    llmq_job_clear(&a);
    llmq_job_clear(&b);
    d.max_body_bytes = 40; /* the compact body is longer */
    assert_int_equal(llmq_job_from_request_json(url, c.body, &o, &d, &a, &err), LLMQ_ETOOBIG);
    assert_int_equal(llmq_job_from_request_json("/v1/nope", c.body, &o, &d, &a, &err), LLMQ_EINVAL);
    gw_call_clear(&c);
    gw_call_clear(&c); /* twice is fine */
}

static void test_batch_request(void **state)
{
    (void)state;
    struct gw_batch_request b;
    struct gw_error e;
    long long max = 168LL * 3600 * 1000;
    const char *ok = "{\"input_file_id\":\"file-1\",\"endpoint\":\"/v1/embeddings\","
                     "\"completion_window\":\"90m\",\"metadata\":{\"k\":\"v\"}}";
    assert_int_equal(gw_batch_request_decode(ok, strlen(ok), max, &b, &e), 0);
    assert_string_equal(b.input_file_id, "file-1");
    assert_string_equal(b.endpoint, "/v1/embeddings");
    assert_int_equal(b.window_ms, 90 * 60 * 1000);
    assert_string_equal(b.metadata, "{\"k\":\"v\"}");
    free(b.metadata);
    struct {
        const char *body, *param;
    } bad[] = {
        {"{\"endpoint\":\"/v1/embeddings\",\"completion_window\":\"24h\"}", "input_file_id"},
        {"{\"input_file_id\":\"f\",\"endpoint\":\"/v1/x\",\"completion_window\":\"24h\"}",
         "endpoint"},
        {"{\"input_file_id\":\"f\",\"endpoint\":\"/v1/embeddings\",\"completion_window\":\"8d\"}",
         "completion_window"},
        {"{\"input_file_id\":\"f\",\"endpoint\":\"/v1/embeddings\",\"completion_window\":\"0h\"}",
         "completion_window"},
        {"{\"input_file_id\":\"f\",\"endpoint\":\"/v1/embeddings\",\"completion_window\":\"24h\","
         "\"metadata\":{\"k\":1}}",
         "metadata"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gw_batch_request_decode(bad[i].body, strlen(bad[i].body), max, &b, &e),
                         -1);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.param, bad[i].param);
    }
}

static void test_results(void **state)
{
    (void)state;
    struct gw_result r;
    const char *done = "{\"id\":\"batch_req_1\",\"custom_id\":\"batch_ab.req-1\",\"response\":{"
                       "\"status_code\":200,\"request_id\":\"req_1\",\"body\":{\"a\":1}},"
                       "\"error\":null}";
    assert_int_equal(gw_result_decode(done, strlen(done), &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.request_id, "req_1");
    assert_string_equal(r.body, "{\"a\":1}");
    assert_null(r.error_code);
    gw_result_clear(&r);
    const char *dead = "{\"custom_id\":\"x\",\"response\":null,\"error\":{\"code\":\"expired\","
                       "\"message\":\"m\"}}";
    assert_int_equal(gw_result_decode(dead, strlen(dead), &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.error_code, "expired");
    gw_result_clear(&r);
    assert_int_equal(gw_result_decode("{}", 2, &r), -1);
    gw_result_clear(&r);
    int is_error = -1;
    char *line = gw_result_line_for_file(done, strlen(done), &is_error);
    assert_non_null(strstr(line, "\"custom_id\":\"req-1\""));
    assert_int_equal(is_error, 0);
    free(line);
    line = gw_result_line_for_file(dead, strlen(dead), &is_error);
    assert_int_equal(is_error, 1);
    free(line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_list_query),
        cmocka_unit_test(test_call),
        cmocka_unit_test(test_call_body_builds_the_job),
        cmocka_unit_test(test_batch_request),
        cmocka_unit_test(test_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
