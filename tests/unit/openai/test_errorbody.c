/* Unit tests for common/openai/errorbody.c: status + body → kind, strings bounded
 * and sanitised, hostile bodies harmless. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "json_alloc.h"
#include "openai/errorbody.h"

static void classify(int status, const char *body, struct llmq_errorbody *out)
{
    llmq_errorbody_classify(status, body, body ? strlen(body) : 0, out);
}

static void test_kinds(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *body;
        enum llmq_errorbody_kind kind;
        int retryable;
        const char *code;
    } cases[] = {
        {200, "{\"id\":1}", LLMQ_ERRORBODY_OK, 0, ""},
        {429,
         "{\"error\":{\"message\":\"Rate limit reached for gpt-4o\",\"type\":\"requests\","
         "\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
         LLMQ_ERRORBODY_RATE_LIMIT, 1, "rate_limit_exceeded"},
        {429,
         "{\"error\":{\"code\":\"429\",\"message\":\"Requests to the ChatCompletions_Create "
         "Operation have exceeded call rate limit. Please retry after 1 second.\"}}",
         LLMQ_ERRORBODY_RATE_LIMIT, 1, "429"},
        {429,
         "{\"error\":{\"message\":\"You exceeded your current quota\",\"type\":"
         "\"insufficient_quota\",\"param\":null,\"code\":\"insufficient_quota\"}}",
         LLMQ_ERRORBODY_INSUFFICIENT_QUOTA, 0, "insufficient_quota"},
        {429, "{\"error\":{\"message\":\"q\",\"type\":\"insufficient_quota\",\"code\":null}}",
         LLMQ_ERRORBODY_INSUFFICIENT_QUOTA, 0, ""},
        {429, "{\"error\":{\"code\":\"billing_hard_limit_reached\"}}",
         LLMQ_ERRORBODY_INSUFFICIENT_QUOTA, 0, "billing_hard_limit_reached"},
        {429, "", LLMQ_ERRORBODY_RATE_LIMIT, 1, ""},
        {429, "<html>Too Many</html>", LLMQ_ERRORBODY_RATE_LIMIT, 1, ""},
        {500, "{\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}",
         LLMQ_ERRORBODY_SERVER, 1, ""},
        {502, "<html>bad gateway</html>", LLMQ_ERRORBODY_SERVER, 1, ""},
        {503, NULL, LLMQ_ERRORBODY_SERVER, 1, ""},
        {400,
         "{\"error\":{\"message\":\"Invalid 'messages'\",\"type\":\"invalid_request_error\","
         "\"param\":\"messages\",\"code\":null}}",
         LLMQ_ERRORBODY_CLIENT, 0, ""},
        {401, "{\"error\":{\"message\":\"Incorrect API key\",\"code\":\"invalid_api_key\"}}",
         LLMQ_ERRORBODY_CLIENT, 0, "invalid_api_key"},
        {404, "{\"error\":{\"code\":404,\"message\":\"model not found\"}}", LLMQ_ERRORBODY_CLIENT,
         0, "404"},
        {408, NULL, LLMQ_ERRORBODY_CLIENT, 1, ""},
        {409, NULL, LLMQ_ERRORBODY_CLIENT, 1, ""},
        {413, "{}", LLMQ_ERRORBODY_CLIENT, 0, ""},
        {0, NULL, LLMQ_ERRORBODY_CLIENT, 0, ""},
        {999, NULL, LLMQ_ERRORBODY_CLIENT, 0, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct llmq_errorbody b;
        classify(cases[i].status, cases[i].body, &b);
        if (b.kind != cases[i].kind || b.retryable != cases[i].retryable ||
            strcmp(b.code, cases[i].code) != 0)
            fail_msg("case %zu (status %d): kind %s retryable %d code '%s'", i, cases[i].status,
                     llmq_errorbody_kind_name(b.kind), b.retryable, b.code);
        assert_int_equal(b.status, cases[i].status);
    }
}

static void test_strings(void **state)
{
    (void)state;
    struct llmq_errorbody b;
    classify(400,
             "{\"error\":{\"message\":\"bad\\nline\\u0001\",\"type\":\"invalid_request_error\","
             "\"param\":\"model\",\"code\":\"model_not_found\"}}",
             &b);
    assert_true(b.parsed);
    assert_string_equal(b.message, "bad?line?");
    assert_string_equal(b.type, "invalid_request_error");
    assert_string_equal(b.param, "model");
    assert_string_equal(b.code, "model_not_found");
    /* A string error value. */
    classify(500, "{\"error\":\"upstream timeout\"}", &b);
    assert_true(b.parsed);
    assert_string_equal(b.message, "upstream timeout");
    /* Long message: truncated, NUL-terminated, not cut inside a UTF-8 sequence. */
    size_t n = 2000;
    char *big = malloc(n + 64);
    memcpy(big, "{\"error\":{\"message\":\"", 21);
    size_t p = 21;
    for (size_t i = 0; i < 600; i++) {
        memcpy(big + p, "\xc3\xa9", 2); /* é */
        p += 2;
    }
    memcpy(big + p, "a\"}}", 5);
    classify(400, big, &b);
    size_t ml = strlen(b.message);
    assert_true(ml < LLMQ_ERRORBODY_MSG_MAX);
    assert_true(ml % 2 == 0); /* whole é characters only */
    free(big);
    assert_string_equal(llmq_errorbody_kind_name(LLMQ_ERRORBODY_INSUFFICIENT_QUOTA),
                        "insufficient_quota");
    assert_string_equal(llmq_errorbody_kind_name((enum llmq_errorbody_kind)99), "unknown");
}

static void test_hostile(void **state)
{
    (void)state;
    static const char *bodies[] = {
        "{\"error\":[1,2,3]}",
        "{\"error\":{\"code\":{\"nested\":true}}}",
        "[[[[[[[[[[",
        "{\"error\":{\"message\":null}}",
        "\"just a string\"",
        "{\"error\":{\"code\":1e999}}",
        "{\"error\":{\"code\":\"insufficient_quota\"",
        "null",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct llmq_errorbody b;
        classify(429, bodies[i], &b);
        assert_true(b.kind == LLMQ_ERRORBODY_RATE_LIMIT);
        assert_true(strlen(b.code) < sizeof(b.code));
    }
    /* Deep nesting must not blow the stack. */
    size_t depth = 100000;
    char *deep = malloc(depth + 1);
    memset(deep, '[', depth);
    deep[depth] = '\0';
    struct llmq_errorbody b;
    llmq_errorbody_classify(500, deep, depth, &b);
    assert_int_equal(b.kind, LLMQ_ERRORBODY_SERVER);
    free(deep);
}

/* Allocation failures inside jansson degrade to "kind by status alone". */
static void test_alloc_failures(void **state)
{
    (void)state;
    const char *body = "{\"error\":{\"message\":\"quota\",\"type\":\"insufficient_quota\","
                       "\"code\":\"insufficient_quota\"}}";
    int parsed = 0;
    for (int n = 0; n < 200 && !parsed; n++) {
        struct llmq_errorbody b;
        llmq_test_json_alloc_fail_after(n);
        classify(429, body, &b);
        parsed = b.parsed;
        assert_int_equal(b.kind,
                         parsed ? LLMQ_ERRORBODY_INSUFFICIENT_QUOTA : LLMQ_ERRORBODY_RATE_LIMIT);
    }
    llmq_test_json_alloc_reset();
    assert_true(parsed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
