/* Unit test of worker/pbatch/pbatch_file.c: the provider batch's input
 * lines, upload body, output and error lines (what each means for its job)
 * and the result line llmq stores. Pure: no Redis, no HTTP. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "pbatch/pbatch_file.h"

static void input_lines_are_batch_lines(void **state)
{
    (void)state;
    struct llmq_pbatch_buf b = {0};
    const char *body = "{\"model\":\"m\",\"messages\":[]}";
    assert_int_equal(
        llmq_pbatch_input_line(&b, "job-1", "/v1/chat/completions", body, strlen(body)), LLMQ_OK);
    assert_int_equal(llmq_pbatch_input_line(&b, "job-2", "/v1/embeddings", body, strlen(body)),
                     LLMQ_OK);
    assert_int_equal(llmq_pbatch_input_line(&b, "bad\"id", "/v1/embeddings", body, strlen(body)),
                     LLMQ_EINVAL);
    const char *nl = strchr(b.data, '\n');
    assert_non_null(nl);
    json_t *l = json_loadb(b.data, (size_t)(nl - b.data), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(l, "custom_id")), "job-1");
    assert_string_equal(json_string_value(json_object_get(l, "method")), "POST");
    assert_string_equal(json_string_value(json_object_get(l, "url")), "/v1/chat/completions");
    assert_string_equal(json_string_value(json_object_get(json_object_get(l, "body"), "model")),
                        "m");
    json_decref(l);
    assert_int_equal(b.data[b.len - 1], '\n');
    llmq_pbatch_buf_free(&b);
}

static void multipart_boundary_not_in_data(void **state)
{
    (void)state;
    struct llmq_pbatch_buf out;
    char ctype[128];
    const char *data = "line with --llmq-pbatch-5bd1e995 inside\n";
    assert_int_equal(
        llmq_pbatch_multipart("pb-1.jsonl", data, strlen(data), &out, ctype, sizeof(ctype)),
        LLMQ_OK);
    const char *bnd = strstr(ctype, "boundary=") + 9;
    assert_null(strstr(data, bnd));
    assert_non_null(strstr(out.data, "name=\"purpose\"\r\n\r\nbatch\r\n"));
    assert_non_null(strstr(out.data, "filename=\"pb-1.jsonl\""));
    assert_non_null(strstr(out.data, data));
    llmq_pbatch_buf_free(&out);
}

static void line_verdicts(void **state)
{
    (void)state;
    struct {
        const char *line;
        enum llmq_rc rc;
        enum llmq_pbatch_verdict v;
        const char *reason;
    } cases[] = {
        {"{\"custom_id\":\"a\",\"response\":{\"status_code\":200,\"request_id\":\"req_1\","
         "\"body\":{\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}},\"error\":null}",
         LLMQ_OK, LLMQ_PBATCH_DONE, ""},
        {"{\"custom_id\":\"b\",\"response\":{\"status_code\":400,\"body\":{\"error\":{\"message\":"
         "\"bad n\",\"code\":\"invalid_value\"}}},\"error\":null}",
         LLMQ_OK, LLMQ_PBATCH_DEAD, "invalid_value: bad n"},
        {"{\"custom_id\":\"c\",\"response\":{\"status_code\":500,\"body\":{\"error\":{\"message\":"
         "\"oops\",\"type\":\"server_error\"}}},\"error\":null}",
         LLMQ_OK, LLMQ_PBATCH_RETRY, "server_error: oops"},
        {"{\"custom_id\":\"d\",\"response\":{\"status_code\":429,\"body\":{}},\"error\":null}",
         LLMQ_OK, LLMQ_PBATCH_RETRY, "http_429: provider batch line failed"},
        {"{\"custom_id\":\"e\",\"response\":null,\"error\":{\"code\":\"batch_expired\","
         "\"message\":\"This request could not be executed before the completion window "
         "expired.\"}}",
         LLMQ_OK, LLMQ_PBATCH_BACK, "batch_expired: This request"},
        {"{\"custom_id\":\"f\",\"response\":null,\"error\":{\"code\":\"batch_cancelled\","
         "\"message\":\"cancelled\"}}",
         LLMQ_OK, LLMQ_PBATCH_BACK, "batch_cancelled: cancelled"},
        {"{\"custom_id\":\"g\",\"response\":null,\"error\":{\"code\":\"server_error\","
         "\"message\":\"oops\"}}",
         LLMQ_OK, LLMQ_PBATCH_RETRY, "server_error: oops"},
        {"not json", LLMQ_EINVAL, LLMQ_PBATCH_DONE, NULL},
        {"{\"response\":{}}", LLMQ_EINVAL, LLMQ_PBATCH_DONE, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct llmq_pbatch_line pl;
        assert_int_equal(llmq_pbatch_line_parse(cases[i].line, strlen(cases[i].line), &pl),
                         cases[i].rc);
        if (cases[i].rc != LLMQ_OK)
            continue;
        assert_int_equal(pl.verdict, cases[i].v);
        assert_non_null(strstr(pl.reason, cases[i].reason));
    }
    struct llmq_pbatch_line pl;
    llmq_pbatch_line_parse(cases[0].line, strlen(cases[0].line), &pl);
    assert_string_equal(pl.job_id, "a");
    assert_int_equal(pl.usage.input_tokens, 7);
    assert_int_equal(pl.usage.output_tokens, 3);
}

static void result_line_is_a_live_line_plus_offloaded(void **state)
{
    (void)state;
    const char *line = "{\"id\":\"batch_req_x\",\"custom_id\":\"job-1\",\"response\":{"
                       "\"status_code\":200,\"request_id\":\"req_abc\",\"body\":{\"choices\":[]}},"
                       "\"error\":null}";
    struct llmq_pbatch_line pl;
    assert_int_equal(llmq_pbatch_line_parse(line, strlen(line), &pl), LLMQ_OK);
    char *text = llmq_pbatch_result_line(&pl, line, strlen(line), "batch_123");
    json_t *r = json_loads(text, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(r, "id")), "batch_req_abc");
    assert_string_equal(json_string_value(json_object_get(r, "custom_id")), "job-1");
    assert_true(json_is_null(json_object_get(r, "error")));
    assert_true(json_is_true(json_object_get(r, "offloaded")));
    assert_string_equal(json_string_value(json_object_get(r, "provider_batch_id")), "batch_123");
    assert_int_equal(json_object_size(r), 6);
    json_decref(r);
    free(text);
    const char *dead = "{\"custom_id\":\"job-2\",\"response\":{\"status_code\":400,\"body\":{"
                       "\"error\":{\"message\":\"no\",\"code\":\"bad\"}}},\"error\":null}";
    llmq_pbatch_line_parse(dead, strlen(dead), &pl);
    text = llmq_pbatch_result_line(&pl, dead, strlen(dead), "batch_123");
    r = json_loads(text, 0, NULL);
    json_t *e = json_object_get(r, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "bad");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "no");
    json_decref(r);
    free(text);
}

static void poll_delay_grows_to_ten_times(void **state)
{
    (void)state;
    assert_int_equal(llmq_pbatch_poll_delay_ms(1000, 1), 1000);
    assert_int_equal(llmq_pbatch_poll_delay_ms(1000, 10), 1000);
    assert_int_equal(llmq_pbatch_poll_delay_ms(1000, 11), 2000);
    assert_int_equal(llmq_pbatch_poll_delay_ms(1000, 1000), 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(input_lines_are_batch_lines),
        cmocka_unit_test(multipart_boundary_not_in_data),
        cmocka_unit_test(line_verdicts),
        cmocka_unit_test(result_line_is_a_live_line_plus_offloaded),
        cmocka_unit_test(poll_delay_grows_to_ten_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
