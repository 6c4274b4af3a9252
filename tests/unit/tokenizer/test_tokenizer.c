/* Tests of the tokenizer (common/tokenizer/tokenizer.c, bpe*.c, pretok.c, unicode.c).
 *
 * The main test compares our ids with tiktoken's on the committed corpus
 * tests/data/tokenizer/reference.tsv (made by tests/tools/gen_tokenizer_corpus.mjs
 * from the npm `tiktoken` package): every string, both encodings. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/bpe.h"
#include "llmq/tokens.h"
#include "tokenizer/pretok.h"
#include "tokenizer/unicode.h"

static char *read_text(const char *rel, size_t *len)
{
    const char *src = getenv("LLMQ_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", src ? src : ".", rel);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int hexval(char c)
{
    return c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
}

/* Compares our ids for input (len bytes) with the space-separated list want. */
static int same_ids(enum llmq_encoding e, const unsigned char *input, size_t len, const char *want,
                    size_t want_len, int report)
{
    uint32_t *ids = NULL;
    size_t n = 0, k = 0;
    assert_int_equal(llmq_tokens_encode(e, (const char *)input, len, &ids, &n, NULL), LLMQ_OK);
    const char *p = want, *end = want + want_len;
    int ok = 1;
    while (p < end && ok) {
        char *q;
        unsigned long id = strtoul(p, &q, 10);
        if (k >= n || ids[k] != id)
            ok = 0;
        k++;
        p = q;
        while (p < end && *p == ' ')
            p++;
    }
    if (k != n)
        ok = 0;
    if (!ok && report) {
        fprintf(stderr, "%s mismatch on %zu bytes:", llmq_tokens_encoding_name(e), len);
        for (size_t i = 0; i < len && i < 80; i++)
            fprintf(stderr, " %02x", input[i]);
        fprintf(stderr, "\n  want %.*s\n  got ", (int)(want_len < 300 ? want_len : 300), want);
        for (size_t i = 0; i < n && i < 60; i++)
            fprintf(stderr, " %u", ids[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return ok;
}

static void test_reference_corpus(void **state)
{
    (void)state;
    size_t len;
    char *text = read_text("tests/data/tokenizer/reference.tsv", &len);
    int lines = 0, bad[LLMQ_ENCODING_COUNT] = {0};
    unsigned char *bytes = malloc(len / 2 + 1);
    assert_non_null(bytes);
    for (char *line = text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        char *t1 = strchr(line, '\t');
        char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        assert_non_null(nl);
        assert_non_null(t2);
        size_t nb = (size_t)(t1 - line) / 2;
        for (size_t i = 0; i < nb; i++)
            bytes[i] = (unsigned char)(hexval(line[2 * i]) * 16 + hexval(line[2 * i + 1]));
        if (!same_ids(LLMQ_ENCODING_O200K_BASE, bytes, nb, t1 + 1, (size_t)(t2 - t1 - 1),
                      bad[0] < 5))
            bad[0]++;
        if (!same_ids(LLMQ_ENCODING_CL100K_BASE, bytes, nb, t2 + 1, (size_t)(nl - t2 - 1),
                      bad[1] < 5))
            bad[1]++;
        lines++;
        line = nl + 1;
    }
    fprintf(stderr, "reference corpus: %d strings, mismatches o200k_base %d, cl100k_base %d\n",
            lines, bad[0], bad[1]);
    assert_true(lines >= 2000);
    assert_int_equal(bad[0], 0);
    assert_int_equal(bad[1], 0);
    free(bytes);
    free(text);
}

static void *count_thread(void *arg)
{
    size_t *n = arg;
    static const char text[] = "Hello, world! Concurrent first use.";
    if (llmq_tokens_count(LLMQ_ENCODING_CL100K_BASE, text, sizeof(text) - 1, n, NULL) != LLMQ_OK)
        *n = 0;
    return NULL;
}

/* Several threads racing to the first load all get the one vocabulary. */
static void test_concurrent_first_load(void **state)
{
    (void)state;
    pthread_t t[4];
    size_t n[4] = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, count_thread, &n[i]), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(n[i], n[0]);
    assert_true(n[0] > 5);
}

static void test_known_ids(void **state)
{
    (void)state;
    uint32_t *ids = NULL;
    size_t n = 0;
    /* tiktoken: cl100k_base "hello world" = [15339, 1917]; o200k_base = [24912, 2375]. */
    assert_int_equal(
        llmq_tokens_encode(LLMQ_ENCODING_CL100K_BASE, "hello world", 11, &ids, &n, NULL), LLMQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 15339);
    assert_int_equal(ids[1], 1917);
    free(ids);
    assert_int_equal(
        llmq_tokens_encode(LLMQ_ENCODING_O200K_BASE, "hello world", 11, &ids, &n, NULL), LLMQ_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 24912);
    assert_int_equal(ids[1], 2375);
    free(ids);
    assert_int_equal(llmq_tokens_encode(LLMQ_ENCODING_O200K_BASE, "", 0, &ids, &n, NULL), LLMQ_OK);
    assert_int_equal(n, 0);
    free(ids);
    size_t len = 0;
    const unsigned char *b = llmq_tokens_token_bytes(LLMQ_ENCODING_CL100K_BASE, 1917, &len);
    assert_non_null(b);
    assert_int_equal(len, 6);
    assert_memory_equal(b, " world", 6);
    assert_null(llmq_tokens_token_bytes(LLMQ_ENCODING_CL100K_BASE, 999999, &len));
    assert_true(llmq_tokens_memory_bytes(LLMQ_ENCODING_CL100K_BASE) > 1000000);
}

static void test_model_map(void **state)
{
    (void)state;
    struct {
        const char *model;
        enum llmq_encoding e;
    } cases[] = {
        {"gpt-4o", LLMQ_ENCODING_O200K_BASE},
        {"gpt-4o-mini-2024-07-18", LLMQ_ENCODING_O200K_BASE},
        {"gpt-4.1-nano", LLMQ_ENCODING_O200K_BASE},
        {"gpt-5", LLMQ_ENCODING_O200K_BASE},
        {"o1-preview", LLMQ_ENCODING_O200K_BASE},
        {"o3-mini", LLMQ_ENCODING_O200K_BASE},
        {"o4-mini", LLMQ_ENCODING_O200K_BASE},
        {"ft:gpt-4o:org::id", LLMQ_ENCODING_O200K_BASE},
        {"gpt-4", LLMQ_ENCODING_CL100K_BASE},
        {"gpt-4-turbo", LLMQ_ENCODING_CL100K_BASE},
        {"gpt-3.5-turbo", LLMQ_ENCODING_CL100K_BASE},
        {"text-embedding-3-small", LLMQ_ENCODING_CL100K_BASE},
        {"ft:gpt-3.5-turbo:x", LLMQ_ENCODING_CL100K_BASE},
        {"my-own-model", LLMQ_ENCODING_DEFAULT},
        {NULL, LLMQ_ENCODING_DEFAULT},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(llmq_tokens_encoding_for_model(cases[i].model), cases[i].e);
    enum llmq_encoding e;
    assert_int_equal(llmq_tokens_encoding_parse("cl100k_base", &e), LLMQ_OK);
    assert_int_equal(e, LLMQ_ENCODING_CL100K_BASE);
    assert_int_equal(llmq_tokens_encoding_parse("p50k_base", &e), LLMQ_EINVAL);
    assert_string_equal(llmq_tokens_encoding_name(LLMQ_ENCODING_O200K_BASE), "o200k_base");
}

static void test_utf8_sanitize(void **state)
{
    (void)state;
    struct {
        const char *in;
        size_t in_len;
        const char *out;
    } cases[] = {
        {"ok", 2, "ok"},
        {"\x80", 1, "\xEF\xBF\xBD"},
        {"\xE2\x82", 2, "\xEF\xBF\xBD"}, /* truncated: one U+FFFD */
        {"\xE2\x82x", 3, "\xEF\xBF\xBDx"},
        {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogate */
        {"\xF0\x9F\x98", 3, "\xEF\xBF\xBD"},
        {"\xC0\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"}, /* overlong */
        {"\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = 0;
        unsigned char *o =
            llmq_utf8_sanitize((const unsigned char *)cases[i].in, cases[i].in_len, &n);
        assert_non_null(o);
        assert_int_equal(n, strlen(cases[i].out));
        assert_memory_equal(o, cases[i].out, n);
        free(o);
    }
    assert_int_equal(llmq_utf8_valid_prefix((const unsigned char *)"ab\xC3\xA9\xFF", 5), 4);
}

/* The heap merge (long pieces) picks the same pairs as tiktoken's scan. */
static void test_merge_large_equals_small(void **state)
{
    (void)state;
    char path[1024];
    const char *src = getenv("LLMQ_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/data/cl100k_base.tiktoken", src ? src : ".");
    struct llmq_bpe_vocab *v = NULL;
    assert_int_equal(llmq_bpe_load(path, NULL, &v, NULL), LLMQ_OK);
    unsigned seed = 12345;
    unsigned char piece[LLMQ_BPE_SMALL_MAX];
    static const char alpha[] = "aaabcdeeeinorstlmp THEQU";
    for (int round = 0; round < 400; round++) {
        size_t len = 2 + (size_t)(round % (LLMQ_BPE_SMALL_MAX - 2));
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            piece[i] = (unsigned char)alpha[(seed >> 16) % (sizeof(alpha) - 1)];
        }
        struct llmq_bpe_out a = {.want_ids = 1}, b = {.want_ids = 1};
        assert_int_equal(llmq_bpe_encode_piece(v, piece, len, LLMQ_BPE_SMALL_MAX, &a), LLMQ_OK);
        assert_int_equal(llmq_bpe_encode_piece(v, piece, len, 0, &b), LLMQ_OK);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.ids, b.ids, a.n * sizeof(uint32_t));
        free(a.ids);
        free(b.ids);
    }
    llmq_bpe_free(v);
}

static void test_load_errors(void **state)
{
    (void)state;
    struct llmq_bpe_vocab *v = NULL;
    struct llmq_error err;
    char path[1024];
    const char *src = getenv("LLMQ_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/data/cl100k_base.tiktoken", src ? src : ".");
    assert_int_equal(llmq_bpe_load(path, "00", &v, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "SHA-256"));
    assert_int_equal(llmq_bpe_load("/nonexistent/x.tiktoken", NULL, &v, &err), LLMQ_ENOTFOUND);
    snprintf(path, sizeof(path), "%s/tests/data/tokenizer/reference.tsv", src ? src : ".");
    assert_int_equal(llmq_bpe_load(path, NULL, &v, &err), LLMQ_EINVAL);
    llmq_bpe_free(NULL);
}

/* A few pieces by hand, for the rules the regexes encode. */
static void test_pretok_pieces(void **state)
{
    (void)state;
    struct {
        enum llmq_pretok_pattern p;
        const char *in;
        const char *pieces; /* separated by '|' */
    } cases[] = {
        {LLMQ_PRETOK_CL100K, "I'm HERE'S 12345", "I|'m| HERE|'S| |123|45"},
        {LLMQ_PRETOK_O200K, "I'm HERE'S 12345", "I'm| HERE'S| |123|45"},
        {LLMQ_PRETOK_O200K, "HelloWorld ABCdef", "Hello|World| ABCdef"},
        {LLMQ_PRETOK_CL100K, "a  \n\n  b", "a|  \n\n| | b"},
        {LLMQ_PRETOK_CL100K, "x   ", "x|   "},
        {LLMQ_PRETOK_O200K, "a//b\n/c", "a|//|b|\n|/c"},
        {LLMQ_PRETOK_O200K, " !!/\n\nx", " !!/\n\n|x"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const unsigned char *s = (const unsigned char *)cases[i].in;
        size_t len = strlen(cases[i].in), pos = 0;
        char got[256];
        size_t g = 0;
        while (pos < len) {
            size_t end = llmq_pretok_next(cases[i].p, s, len, pos);
            assert_true(end > pos);
            if (pos > 0)
                got[g++] = '|';
            memcpy(got + g, s + pos, end - pos);
            g += end - pos;
            pos = end;
        }
        got[g] = '\0';
        assert_string_equal(got, cases[i].pieces);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_first_load),
        cmocka_unit_test(test_known_ids),
        cmocka_unit_test(test_model_map),
        cmocka_unit_test(test_utf8_sanitize),
        cmocka_unit_test(test_pretok_pieces),
        cmocka_unit_test(test_merge_large_equals_small),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_reference_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
