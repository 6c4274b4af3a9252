/* worker/stream_assemble.c: where events end, what each is, and the whole
 * answer they add up to (chat with content, refusal and tool calls,
 * completions, responses whole and cut short), usage, errors and hostile
 * events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "stream_assemble.h"

/* Feeds every complete event of text; returns the number of events of kind. */
static int feed(struct llmq_stream_asm *a, const char *text, enum llmq_stream_event_kind kind)
{
    size_t len = strlen(text), off = 0, n;
    int count = 0;
    while ((n = llmq_sse_event_len(text + off, len - off)) > 0) {
        if (llmq_stream_asm_event(a, text + off, n) == kind)
            count++;
        off += n;
    }
    return count;
}

static json_t *result(struct llmq_stream_asm *a)
{
    size_t len;
    char *t = llmq_stream_asm_result(a, &len);
    assert_non_null(t);
    json_t *j = json_loadb(t, len, 0, NULL);
    free(t);
    assert_non_null(j);
    return j;
}

static void test_event_len(void **state)
{
    (void)state;
    assert_int_equal(llmq_sse_event_len("data: x\n\ndata: y\n\n", 18), 9);
    assert_int_equal(llmq_sse_event_len("data: x\r\n\r\n", 11), 11);
    assert_int_equal(llmq_sse_event_len("data: x\n", 8), 0);
    assert_int_equal(llmq_sse_event_len("", 0), 0);
    assert_int_equal(llmq_stream_api_of("/v1/chat/completions"), LLMQ_STREAM_CHAT);
    assert_int_equal(llmq_stream_api_of("/v1/responses"), LLMQ_STREAM_RESPONSES);
    assert_int_equal(llmq_stream_api_of("/v1/embeddings"), -1);
}

static const char chat[] =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m\","
    "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
    "data: {\"id\":\"c1\",\"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"Hel\"}},{\"index\":1,\"delta\":{\"content\":\"B\"}}]}\n\n"
    ": a comment\n\n"
    "data: {\"id\":\"c1\",\"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"lo\"}}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":1,\"delta\":{\"tool_calls\":[{\"index\":0,"
    "\"id\":\"call_1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":1,\"delta\":{\"tool_calls\":[{\"index\":0,"
    "\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"},"
    "{\"index\":1,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4,"
    "\"total_tokens\":9}}\n\n"
    "data: [DONE]\n\n";

static void test_chat(void **state)
{
    (void)state;
    struct llmq_stream_asm *a = llmq_stream_asm_new(LLMQ_STREAM_CHAT);
    assert_int_equal(feed(a, chat, LLMQ_STREAM_EV_CONTENT), 4);
    assert_int_equal(llmq_stream_asm_deltas(a), 4);
    struct llmq_usage u;
    assert_true(llmq_stream_asm_usage(a, &u));
    assert_int_equal(u.total_tokens, 9);
    json_t *j = result(a);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "chat.completion");
    assert_int_equal(json_integer_value(json_object_get(j, "created")), 7);
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    json_t *c1 = json_array_get(json_object_get(j, "choices"), 1);
    json_t *m0 = json_object_get(c0, "message");
    assert_string_equal(json_string_value(json_object_get(m0, "content")), "Hello");
    assert_string_equal(json_string_value(json_object_get(m0, "role")), "assistant");
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "stop");
    json_t *tc = json_array_get(json_object_get(json_object_get(c1, "message"), "tool_calls"), 0);
    assert_string_equal(json_string_value(json_object_get(tc, "id")), "call_1");
    json_t *fn = json_object_get(tc, "function");
    assert_string_equal(json_string_value(json_object_get(fn, "arguments")), "{\"a\":1}");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")), 4);
    json_decref(j);
    llmq_stream_asm_free(a);
}

static void test_chat_kinds_and_error(void **state)
{
    (void)state;
    struct llmq_stream_asm *a = llmq_stream_asm_new(LLMQ_STREAM_CHAT);
    assert_int_equal(feed(a, chat, LLMQ_STREAM_EV_USAGE), 1);
    llmq_stream_asm_free(a);
    a = llmq_stream_asm_new(LLMQ_STREAM_CHAT);
    assert_int_equal(feed(a, chat, LLMQ_STREAM_EV_DONE), 1);
    assert_string_equal(llmq_stream_asm_error_code(a), "");
    const char *err = "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\","
                      "\"code\":null}}\n\n";
    assert_int_equal(feed(a, err, LLMQ_STREAM_EV_ERROR), 1);
    assert_string_equal(llmq_stream_asm_error_code(a), "server_error");
    assert_string_equal(llmq_stream_asm_error_message(a), "boom");
    llmq_stream_asm_free(a);
}

static void test_completions(void **state)
{
    (void)state;
    struct llmq_stream_asm *a = llmq_stream_asm_new(LLMQ_STREAM_COMPLETIONS);
    feed(a,
         "data: {\"id\":\"x\",\"object\":\"text_completion\",\"model\":\"m\",\"choices\":"
         "[{\"text\":\"ab\",\"index\":0,\"finish_reason\":null}]}\n\n"
         "data: {\"id\":\"x\",\"choices\":[{\"text\":\"c\",\"index\":0,\"finish_reason\":"
         "\"length\"}]}\n\ndata: [DONE]\n\n",
         LLMQ_STREAM_EV_CONTENT);
    json_t *j = result(a);
    assert_string_equal(json_string_value(json_object_get(j, "object")), "text_completion");
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "text")), "abc");
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "length");
    assert_true(json_is_null(json_object_get(j, "usage")));
    json_decref(j);
    llmq_stream_asm_free(a);
}

static const char responses[] =
    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,"
    "\"response\":{\"id\":\"r1\",\"object\":\"response\",\"status\":\"in_progress\","
    "\"output\":[],\"usage\":null}}\n\n"
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
    "\"sequence_number\":1,\"delta\":\"Hi \"}\n\n"
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
    "\"sequence_number\":2,\"delta\":\"there\"}\n\n";

static void test_responses(void **state)
{
    (void)state;
    struct llmq_stream_asm *a = llmq_stream_asm_new(LLMQ_STREAM_RESPONSES);
    assert_int_equal(feed(a, responses, LLMQ_STREAM_EV_CONTENT), 2);
    /* cut short: what came, marked incomplete */
    json_t *j = result(a);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "incomplete");
    json_t *part = json_array_get(
        json_object_get(json_array_get(json_object_get(j, "output"), 0), "content"), 0);
    assert_string_equal(json_string_value(json_object_get(part, "text")), "Hi there");
    json_decref(j);
    assert_int_equal(
        feed(a,
             "event: response.completed\ndata: {\"type\":\"response.completed\","
             "\"sequence_number\":3,\"response\":{\"id\":\"r1\",\"object\":\"response\","
             "\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":3,"
             "\"output_tokens\":2,\"total_tokens\":5}}}\n\n",
             LLMQ_STREAM_EV_FINAL),
        1);
    assert_int_equal(llmq_stream_asm_last_seq(a), 3);
    struct llmq_usage u;
    assert_true(llmq_stream_asm_usage(a, &u));
    assert_int_equal(u.total_tokens, 5);
    j = result(a);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "completed");
    assert_string_equal(json_string_value(json_object_get(j, "id")), "r1");
    json_decref(j);
    assert_int_equal(feed(a,
                          "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\","
                          "\"message\":\"m\",\"sequence_number\":4}\n\n",
                          LLMQ_STREAM_EV_ERROR),
                     1);
    assert_string_equal(llmq_stream_asm_error_code(a), "server_error");
    llmq_stream_asm_free(a);
}

static void test_hostile(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "data: {\"choices\":[{\"index\":-1,\"delta\":{\"content\":\"x\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":99999,\"delta\":{\"content\":\"x\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1000}]}}]}\n\n",
        "data: {\"choices\":\"no\"}\n\n",
        "data: [1,2]\n\n",
        "data: {not json\n\n",
        "event: \n\n",
        "data:\n\n",
        "event: response.completed\ndata: {\"response\":7}\n\n",
    };
    for (int api = 0; api < 3; api++) {
        struct llmq_stream_asm *a = llmq_stream_asm_new((enum llmq_stream_api)api);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
            (void)feed(a, bad[i], LLMQ_STREAM_EV_CONTENT);
        json_t *j = result(a);
        json_decref(j);
        llmq_stream_asm_free(a);
    }
    llmq_stream_asm_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_len),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_chat_kinds_and_error),
        cmocka_unit_test(test_completions),
        cmocka_unit_test(test_responses),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
