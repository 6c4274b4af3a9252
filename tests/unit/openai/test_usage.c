/* Unit tests for common/openai/usage.c: data-driven bodies in tests/data/usage/
 * (valid/<name>.{json,sse} with <name>.expect = "input=N output=N total=N
 * cached=N reasoning=N [derived]", every count not listed must be absent;
 * every invalid/ file must give no usage), plus API edge cases and random truncations. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "data_files.h"
#include "json_alloc.h"
#include "openai/usage.h"

static const struct {
    const char *name;
    unsigned bit;
    size_t off;
} counts[] = {
    {"input", LLMQ_USAGE_INPUT, offsetof(struct llmq_usage, input_tokens)},
    {"output", LLMQ_USAGE_OUTPUT, offsetof(struct llmq_usage, output_tokens)},
    {"total", LLMQ_USAGE_TOTAL, offsetof(struct llmq_usage, total_tokens)},
    {"cached", LLMQ_USAGE_CACHED, offsetof(struct llmq_usage, cached_tokens)},
    {"reasoning", LLMQ_USAGE_REASONING, offsetof(struct llmq_usage, reasoning_tokens)},
};

static void check_expect(const char *path, const struct llmq_usage *u, char *exp)
{
    unsigned seen = 0;
    for (char *tok = exp, *next; tok != NULL && *tok != '\0'; tok = next) {
        size_t l = strcspn(tok, " \n");
        next = tok[l] ? tok + l + 1 : NULL;
        tok[l] = '\0';
        if (l == 0)
            continue;
        if (strcmp(tok, "derived") == 0) {
            seen |= LLMQ_USAGE_TOTAL_DERIVED;
            continue;
        }
        char *eq = strchr(tok, '=');
        size_t i;
        for (i = 0; eq && i < sizeof(counts) / sizeof(counts[0]); i++)
            if (strlen(counts[i].name) == (size_t)(eq - tok) &&
                memcmp(counts[i].name, tok, (size_t)(eq - tok)) == 0)
                break;
        if (eq == NULL || i == sizeof(counts) / sizeof(counts[0]))
            fail_msg("%s: bad expect token '%s'", path, tok);
        int64_t got = *(const int64_t *)(const void *)((const char *)u + counts[i].off);
        int64_t want = strtoll(eq + 1, NULL, 10);
        if (!(u->present & counts[i].bit) || got != want)
            fail_msg("%s: %s = %" PRId64 " (present %d), want %" PRId64, path, counts[i].name, got,
                     !!(u->present & counts[i].bit), want);
        seen |= counts[i].bit;
    }
    if (u->present != seen)
        fail_msg("%s: present 0x%x, expected exactly 0x%x", path, u->present, seen);
}

static void run_valid(const char *dir, const char *name)
{
    char path[2048], exp_path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    size_t stem = strlen(name) - strlen(strrchr(name, '.'));
    snprintf(exp_path, sizeof(exp_path), "%s/%.*s.expect", dir, (int)stem, name);
    size_t len, elen;
    char *body = llmq_test_read_file(path, &len);
    char *exp = llmq_test_read_file(exp_path, &elen);
    if (body == NULL || exp == NULL)
        fail_msg("cannot read %s or its .expect", path);
    struct llmq_usage u;
    if (llmq_usage_parse(body, len, &u) != LLMQ_OK)
        fail_msg("%s: no usage found", path);
    check_expect(path, &u, exp);
    /* The explicit parser for the file's kind agrees. */
    struct llmq_usage v;
    int sse = strcmp(name + stem, ".sse") == 0;
    enum llmq_rc rc =
        sse ? llmq_usage_parse_sse(body, len, &v) : llmq_usage_parse_json(body, len, &v);
    assert_int_equal(rc, LLMQ_OK);
    assert_memory_equal(&u, &v, sizeof(u));
    /* Every truncation is handled without a crash (ASan watches the bounds). */
    for (size_t cut = 0; cut < len; cut += 1 + len / 64) {
        char *part = malloc(cut ? cut : 1);
        memcpy(part, body, cut);
        llmq_usage_parse(part, cut, &v);
        free(part);
    }
    free(body);
    free(exp);
}

static void run_invalid(const char *dir, const char *name)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    size_t len;
    char *body = llmq_test_read_file(path, &len);
    if (body == NULL)
        fail_msg("cannot read %s", path);
    struct llmq_usage u;
    enum llmq_rc rc = llmq_usage_parse(body, len, &u);
    if (rc == LLMQ_OK || u.present != 0)
        fail_msg("%s: usage found (rc %d, present 0x%x)", path, rc, u.present);
    free(body);
}

static void run_dir(const char *sub, int valid)
{
    struct llmq_test_files f;
    llmq_test_data_files(&f, sub, NULL);
    int n = 0;
    for (size_t i = 0; i < f.n; i++) {
        const char *dot = strrchr(f.names[i], '.');
        if (dot == NULL || strcmp(dot, ".expect") == 0)
            continue;
        if (valid)
            run_valid(f.dir, f.names[i]);
        else
            run_invalid(f.dir, f.names[i]);
        n++;
    }
    llmq_test_files_free(&f);
    assert_true(n > 0);
}

static void test_valid_files(void **state)
{
    (void)state;
    run_dir("usage/valid", 1);
}

static void test_invalid_files(void **state)
{
    (void)state;
    run_dir("usage/invalid", 0);
}

static void test_return_codes(void **state)
{
    (void)state;
    struct llmq_usage u;
    assert_int_equal(llmq_usage_parse_json("{}", 2, &u), LLMQ_ENOTFOUND);
    assert_int_equal(llmq_usage_parse_json("nope", 4, &u), LLMQ_EINVAL);
    assert_int_equal(llmq_usage_parse_json(NULL, 0, &u), LLMQ_EINVAL);
    assert_int_equal(llmq_usage_parse_sse(NULL, 0, &u), LLMQ_ENOTFOUND);
    assert_int_equal(llmq_usage_parse_sse("", 0, &u), LLMQ_ENOTFOUND);
    assert_int_equal(u.present, 0);
    /* The last usage in a stream wins. */
    const char *s = "data: {\"usage\":{\"total_tokens\":1}}\n\n"
                    "data: {\"usage\":{\"total_tokens\":2}}\n\ndata: [DONE]\n\n";
    assert_int_equal(llmq_usage_parse(s, strlen(s), &u), LLMQ_OK);
    assert_int_equal(u.total_tokens, 2);
    assert_int_equal(u.present, LLMQ_USAGE_TOTAL);
    /* Leading blanks before a JSON body. */
    const char *j = "\r\n  {\"usage\":{\"input_tokens\":4}}";
    assert_int_equal(llmq_usage_parse(j, strlen(j), &u), LLMQ_OK);
    assert_int_equal(u.input_tokens, 4);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    const char *json = "{\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,"
                       "\"prompt_tokens_details\":{\"cached_tokens\":1}}}";
    const char *sse = "data: {\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":"
                      "{\"input_tokens\":2,\"output_tokens\":1}}\n\ndata: [DONE]\n\n";
    int succeeded = 0;
    for (int n = 0; n < 200 && !succeeded; n++) {
        struct llmq_usage a, b;
        llmq_test_json_alloc_fail_after(n);
        enum llmq_rc ra = llmq_usage_parse(json, strlen(json), &a);
        llmq_test_json_alloc_fail_after(n);
        enum llmq_rc rb = llmq_usage_parse(sse, strlen(sse), &b);
        /* Failure means "no usage", never a crash, a leak or a wrong count. */
        assert_true(ra == LLMQ_OK ? a.total_tokens == 7 : a.present == 0);
        assert_true(rb == LLMQ_OK ? b.total_tokens == 3 : b.present == 0);
        succeeded = ra == LLMQ_OK && rb == LLMQ_OK;
    }
    llmq_test_json_alloc_reset();
    assert_true(succeeded);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_files),
        cmocka_unit_test(test_invalid_files),
        cmocka_unit_test(test_return_codes),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
