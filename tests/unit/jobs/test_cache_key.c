/* The response cache's key (jobs/cache_key.h) and its cached result lines
 * (jobs/cache_line.h): requests that differ only in member order, number
 * spelling or the fields that do not change the answer have one key; any
 * other difference (a word of the prompt, the model, the url, a nested
 * value) another; a cached line reads as the stored line with the job's
 * own custom_id, "cached": true and its age; damaged ones are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/cache_key.h"
#include "jobs/cache_line.h"
#include "jobs/job_pack.h"

#define CHAT "/v1/chat/completions"

static void key_of(const char *url, const char *body, char *out)
{
    json_t *b = json_loads(body, 0, NULL);
    assert_non_null(b);
    struct llmq_error err = {0};
    assert_int_equal(llmq_cache_key(url, b, out, &err), LLMQ_OK);
    assert_int_equal(strlen(out), LLMQ_CACHE_KEY_HEX);
    json_decref(b);
}

static void same(const char *a, const char *b)
{
    char ka[LLMQ_CACHE_KEY_HEX + 1], kb[LLMQ_CACHE_KEY_HEX + 1];
    key_of(CHAT, a, ka);
    key_of(CHAT, b, kb);
    if (strcmp(ka, kb) != 0)
        fail_msg("expected one key:\n  %s\n  %s", a, b);
}

static void differ(const char *a, const char *b)
{
    char ka[LLMQ_CACHE_KEY_HEX + 1], kb[LLMQ_CACHE_KEY_HEX + 1];
    key_of(CHAT, a, ka);
    key_of(CHAT, b, kb);
    if (strcmp(ka, kb) == 0)
        fail_msg("expected two keys:\n  %s\n  %s", a, b);
}

static void test_one_key_for_the_same_request(void **state)
{
    (void)state;
    same("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
         "{\"messages\":[{\"content\":\"hi\",\"role\":\"user\"}],\"model\":\"m\"}");
    same("{\"model\":\"m\",\"temperature\":1,\"max_tokens\":10}",
         "{\"model\":\"m\",\"temperature\":1.0,\"max_tokens\":1e1}");
    same("{\"model\":\"m\",\"x\":[0, 2.50]}", "{\"model\":\"m\",\"x\":[-0.0, 2.5]}");
    same("{\"model\":\"m\",\"s\":\"\\u00e9\\/\"}", "{\"model\":\"m\",\"s\":\"\xc3\xa9/\"}");
    same("{\"model\":\"m\"}", "{\"model\":\"m\",\"stream\":true,\"stream_options\":"
                              "{\"include_usage\":true},\"user\":\"u1\",\"metadata\":{\"a\":\"b\"},"
                              "\"llmq\":{\"cache\":\"use\"}}");
}

static void test_another_key_for_another_request(void **state)
{
    (void)state;
    differ("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
           "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi!\"}]}");
    differ("{\"model\":\"m\"}", "{\"model\":\"m2\"}");
    differ("{\"model\":\"m\",\"temperature\":0.5}", "{\"model\":\"m\",\"temperature\":0.50001}");
    differ("{\"model\":\"m\",\"x\":{\"stream\":true}}", "{\"model\":\"m\",\"x\":{}}");
    differ("{\"model\":\"m\",\"x\":[1,2]}", "{\"model\":\"m\",\"x\":[2,1]}");
    differ("{\"model\":\"m\",\"x\":\"1\"}", "{\"model\":\"m\",\"x\":1}");
    /* the system prompt is part of the request */
    differ("{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"a\"},"
           "{\"role\":\"user\",\"content\":\"q\"}]}",
           "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"b\"},"
           "{\"role\":\"user\",\"content\":\"q\"}]}");
    char a[LLMQ_CACHE_KEY_HEX + 1], b[LLMQ_CACHE_KEY_HEX + 1];
    key_of("/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\"}", a);
    key_of("/v1/responses", "{\"model\":\"m\",\"prompt\":\"x\"}", b);
    assert_string_not_equal(a, b);
}

static void test_canonical_text(void **state)
{
    (void)state;
    json_t *b = json_loads("{\"z\":1.0,\"a\":{\"y\":[3.25,true,null],\"b\":\"t\"},\"user\":\"u\"}",
                           0, NULL);
    char *t = llmq_cache_key_canonical(b, NULL);
    assert_string_equal(t, "{\"a\":{\"b\":\"t\",\"y\":[3.25,true,null]},\"z\":1}");
    free(t);
    /* the caller's body is unchanged */
    assert_non_null(json_object_get(b, "user"));
    assert_true(json_is_real(json_object_get(b, "z")));
    json_decref(b);
    json_t *arr = json_loads("[1]", 0, NULL);
    struct llmq_error err = {0};
    char key[LLMQ_CACHE_KEY_HEX + 1];
    assert_int_equal(llmq_cache_key(CHAT, arr, key, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "object"));
    json_decref(arr);
}

/* A cached line as lua/lib/cache.lua writes it around stored line inner. */
static char *cached_line(const char *header, const char *inner, size_t inner_len, size_t *len)
{
    size_t hl = strlen(header);
    char *s = malloc(2 + hl + inner_len);
    s[0] = LLMQ_CACHE_LINE_TAG;
    memcpy(s + 1, header, hl);
    s[1 + hl] = '\n';
    memcpy(s + 2 + hl, inner, inner_len);
    *len = 2 + hl + inner_len;
    return s;
}

#define LINE                                                                                       \
    "{\"id\":\"batch_req_abc\",\"custom_id\":\"leader\",\"response\":{\"status_code\":200,"        \
    "\"request_id\":\"req_1\",\"body\":{\"object\":\"chat.completion\",\"choices\":[]}},"          \
    "\"error\":null}"

static void test_cached_line_reads_as_the_jobs_own(void **state)
{
    (void)state;
    char *packed = NULL;
    size_t plen = 0;
    assert_int_equal(llmq_job_pack(LINE, strlen(LINE), &packed, &plen, NULL), LLMQ_OK);
    assert_non_null(packed);
    const char *inners[] = {LINE, packed};
    const size_t lens[] = {strlen(LINE), plen};
    for (int i = 0; i < 2; i++) {
        size_t len = 0, out_len = 0;
        char *v = cached_line("{\"job\":\"w%2F1\",\"age_ms\":2500}", inners[i], lens[i], &len);
        char *out = NULL;
        struct llmq_error err = {0};
        assert_int_equal(llmq_cache_line_read(v, len, 1 << 20, &out, &out_len, &err), LLMQ_OK);
        json_t *o = json_loads(out, 0, NULL);
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "custom_id")), "w/1");
        assert_true(json_is_true(json_object_get(o, "cached")));
        assert_int_equal(json_integer_value(json_object_get(o, "cache_age_s")), 2);
        assert_string_equal(json_string_value(json_object_get(o, "id")), "batch_req_abc");
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(o, "response"), "status_code")),
            200);
        json_decref(o);
        free(out);
        free(v);
    }
    free(packed);
    /* a line that is not cached passes through unpacked */
    char *out = NULL;
    size_t out_len = 0;
    assert_int_equal(llmq_cache_line_read(LINE, strlen(LINE), 1 << 20, &out, &out_len, NULL),
                     LLMQ_OK);
    assert_string_equal(out, LINE);
    free(out);
}

static void test_damaged_cached_lines_are_refused(void **state)
{
    (void)state;
    const char *headers[] = {"",
                             "{}",
                             "{\"job\":\"a\"}",
                             "{\"job\":\"a b\",\"age_ms\":1}",
                             "{\"job\":\"a\",\"age_ms\":-1}",
                             "[1]",
                             "{\"job\":1,\"age_ms\":1}"};
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        size_t len = 0, out_len = 0;
        char *v = cached_line(headers[i], LINE, strlen(LINE), &len);
        char *out = NULL;
        struct llmq_error err = {0};
        assert_int_equal(llmq_cache_line_read(v, len, 1 << 20, &out, &out_len, &err), LLMQ_EINVAL);
        assert_null(out);
        assert_non_null(strstr(err.msg, "cached line"));
        free(v);
    }
    /* no newline after the header; a line inside that is no object; nested */
    const char *bad[] = {"\002{\"job\":\"a\",\"age_ms\":1}",
                         "\002{\"job\":\"a\",\"age_ms\":1}\n[1]",
                         "\002{\"job\":\"a\",\"age_ms\":1}\n\002{\"job\":\"b\",\"age_ms\":1}\n{}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = NULL;
        size_t out_len = 0;
        struct llmq_error err = {0};
        assert_int_equal(
            llmq_cache_line_read(bad[i], strlen(bad[i]), 1 << 20, &out, &out_len, &err),
            LLMQ_EINVAL);
        assert_null(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_key_for_the_same_request),
        cmocka_unit_test(test_another_key_for_another_request),
        cmocka_unit_test(test_canonical_text),
        cmocka_unit_test(test_cached_line_reads_as_the_jobs_own),
        cmocka_unit_test(test_damaged_cached_lines_are_refused),
    };
    return cmocka_run_group_tests_name("cache_key", tests, NULL, NULL);
}
