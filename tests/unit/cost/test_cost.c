/* Tests of request cost (common/cost/cost.c) and image sizes and tokens
 * (common/cost/image_size*.c), against OpenAI's worked examples:
 *  - the cookbook's chat example ("How to count tokens with tiktoken"), whose
 *    prompt tokens the API reported as 129 (gpt-3.5-turbo, gpt-4) and 124
 *    (gpt-4o, gpt-4o-mini);
 *  - its tool-calling example: 105 (gpt-3.5-turbo, gpt-4) and 101 (gpt-4o);
 *  - the vision guide's image examples (765, 1105, 85 tokens; 1452 patches). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cost/image_size.h"
#include "data_files.h"
#include "llmq/cost.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (v == NULL)
        fail_msg("bad JSON in test: %s", e.text);
    return v;
}

static long long prompt_of(const char *url, const char *body_text)
{
    json_t *body = parse(body_text);
    long long n = -1;
    struct llmq_error err;
    if (llmq_cost_prompt_tokens(url, body, NULL, &n, &err) != LLMQ_OK)
        fail_msg("cost failed: %s", err.msg);
    json_decref(body);
    return n;
}

#define JARGON_MESSAGES                                                                            \
    "[{\"role\": \"system\", \"content\": \"You are a helpful, pattern-following assistant that "  \
    "translates corporate jargon into plain English.\"},"                                          \
    "{\"role\": \"system\", \"name\": \"example_user\", \"content\": \"New synergies will help "   \
    "drive top-line growth.\"},"                                                                   \
    "{\"role\": \"system\", \"name\": \"example_assistant\", \"content\": \"Things working well "  \
    "together will increase revenue.\"},"                                                          \
    "{\"role\": \"system\", \"name\": \"example_user\", \"content\": \"Let's circle back when we " \
    "have more bandwidth to touch base on opportunities for increased leverage.\"},"               \
    "{\"role\": \"system\", \"name\": \"example_assistant\", \"content\": \"Let's talk later "     \
    "when we're less busy about how to do better.\"},"                                             \
    "{\"role\": \"user\", \"content\": \"This late pivot means we don't have time to boil the "    \
    "ocean for the client deliverable.\"}]"

static void test_chat_cookbook_example(void **state)
{
    (void)state;
    const char *models[] = {"gpt-3.5-turbo", "gpt-4-0613", "gpt-4", "gpt-4o", "gpt-4o-mini"};
    const long long want[] = {129, 129, 129, 124, 124};
    char body[4096];
    for (size_t i = 0; i < 5; i++) {
        snprintf(body, sizeof(body), "{\"model\": \"%s\", \"messages\": %s}", models[i],
                 JARGON_MESSAGES);
        assert_int_equal(prompt_of("/v1/chat/completions", body), want[i]);
    }
}

#define WEATHER_TOOLS                                                                              \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_current_weather\", "                 \
    "\"description\": \"Get the current weather in a given location\", \"parameters\": "           \
    "{\"type\": \"object\", \"properties\": {\"location\": {\"type\": \"string\", "                \
    "\"description\": \"The city and state, e.g. San Francisco, CA\"}, \"unit\": {\"type\": "      \
    "\"string\", \"description\": \"The unit of temperature to return\", \"enum\": "               \
    "[\"celsius\", \"fahrenheit\"]}}, \"required\": [\"location\"]}}}]"
#define WEATHER_MESSAGES                                                                           \
    "[{\"role\": \"system\", \"content\": \"You are a helpful assistant that can answer to "       \
    "questions about the weather.\"}, {\"role\": \"user\", \"content\": \"What's the weather "     \
    "like in San Francisco?\"}]"

static void test_tools_cookbook_example(void **state)
{
    (void)state;
    const char *models[] = {"gpt-3.5-turbo", "gpt-4", "gpt-4o", "gpt-4o-mini"};
    const long long want[] = {105, 105, 101, 101};
    char body[4096];
    for (size_t i = 0; i < 4; i++) {
        snprintf(body, sizeof(body), "{\"model\": \"%s\", \"messages\": %s, \"tools\": %s}",
                 models[i], WEATHER_MESSAGES, WEATHER_TOOLS);
        assert_int_equal(prompt_of("/v1/chat/completions", body), want[i]);
    }
}

static void test_image_tile_formula(void **state)
{
    (void)state;
    assert_int_equal(llmq_image_tokens("gpt-4o", 1024, 1024, LLMQ_IMAGE_DETAIL_HIGH), 765);
    assert_int_equal(llmq_image_tokens("gpt-4o", 2048, 4096, LLMQ_IMAGE_DETAIL_HIGH), 1105);
    assert_int_equal(llmq_image_tokens("gpt-4o", 4096, 8192, LLMQ_IMAGE_DETAIL_LOW), 85);
    assert_int_equal(llmq_image_tokens("gpt-4o", 4096, 8192, LLMQ_IMAGE_DETAIL_AUTO), 1105);
    assert_int_equal(llmq_image_tokens("gpt-4.1", 512, 512, LLMQ_IMAGE_DETAIL_HIGH), 255);
    assert_int_equal(llmq_image_tokens("gpt-4o-mini", 1024, 1024, LLMQ_IMAGE_DETAIL_HIGH),
                     2833 + 4 * 5667);
    assert_int_equal(llmq_image_tokens("o1", 1024, 1024, LLMQ_IMAGE_DETAIL_HIGH), 75 + 4 * 150);
    assert_int_equal(llmq_image_tokens(NULL, 10, 10, LLMQ_IMAGE_DETAIL_HIGH), 255);
    /* Patch rule: 1024×1024 is 32×32 = 1024 patches; 1800×2400 shrinks to 1452. */
    assert_int_equal(llmq_image_tokens("gpt-4.1-mini", 1024, 1024, LLMQ_IMAGE_DETAIL_HIGH),
                     1659); /* ceil(1024 × 1.62) */
    assert_int_equal(llmq_image_tokens("gpt-4.1-nano", 1800, 2400, LLMQ_IMAGE_DETAIL_AUTO),
                     3572); /* ceil(1452 × 2.46) */
}

static char *b64(const unsigned char *d, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 5), *p = o;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = ((uint32_t)d[i] << 16) | ((uint32_t)d[i + 1] << 8) | d[i + 2];
        *p++ = a[v >> 18];
        *p++ = a[(v >> 12) & 63];
        *p++ = a[(v >> 6) & 63];
        *p++ = a[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
        *p++ = a[v >> 18];
        *p++ = a[(v >> 12) & 63];
        *p++ = i + 1 < n ? a[(v >> 6) & 63] : '=';
        *p++ = '=';
    }
    *p = '\0';
    return o;
}

static const unsigned char png_hdr[] = {0x89, 'P', 'N',  'G', '\r', '\n', 0x1A, '\n', 0,    0,
                                        0,    13,  'I',  'H', 'D',  'R',  0,    0,    0x08, 0,
                                        0,    0,   0x04, 0,   8,    6,    0,    0,    0};
static const unsigned char gif_hdr[] = {'G', 'I', 'F', '8', '9', 'a', 0x20, 0x03, 0x58, 0x02, 0};
static const unsigned char jpeg_hdr[] = {
    0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J',  'F',  'I',  'F',  0,    1,    1,    0,
    0,    1,    0,    1,    0,    0,    0xFF, 0xFF, 0xC2, 0x00, 0x11, 0x08, 0x02, 0xD0,
    0x05, 0x00, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01, 0xFF, 0xD9};
static const unsigned char webp_vp8x[] = {'R', 'I', 'F', 'F', 0,    0,    0,  0,    'W',  'E',
                                          'B', 'P', 'V', 'P', '8',  'X',  10, 0,    0,    0,
                                          0,   0,   0,   0,   0xFF, 0x0F, 0,  0x7F, 0x07, 0};
static const unsigned char webp_vp8l[] = {'R',  'I',  'F',  'F',  0,    0,   0, 0, 'W', 'E',
                                          'B',  'P',  'V',  'P',  '8',  'L', 5, 0, 0,   0,
                                          0x2F, 0x63, 0xC0, 0x3F, 0x00, 0,   0, 0, 0,   0};
static const unsigned char webp_vp8[] = {'R', 'I', 'F', 'F',  0,    0,    0,    0,    'W',  'E',
                                         'B', 'P', 'V', 'P',  '8',  ' ',  10,   0,    0,    0,
                                         0,   0,   0,   0x9D, 0x01, 0x2A, 0x80, 0x02, 0xE0, 0x01};

static void test_image_headers(void **state)
{
    (void)state;
    struct {
        const unsigned char *d;
        size_t n;
        unsigned w, h;
    } cases[] = {
        {png_hdr, sizeof(png_hdr), 2048, 1024},   {gif_hdr, sizeof(gif_hdr), 800, 600},
        {jpeg_hdr, sizeof(jpeg_hdr), 1280, 720},  {webp_vp8x, sizeof(webp_vp8x), 4096, 1920},
        {webp_vp8l, sizeof(webp_vp8l), 100, 256}, {webp_vp8, sizeof(webp_vp8), 640, 480},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned w = 0, h = 0;
        assert_int_equal(llmq_image_size_parse(cases[i].d, cases[i].n, &w, &h), LLMQ_OK);
        assert_int_equal(w, cases[i].w);
        assert_int_equal(h, cases[i].h);
        /* Every truncation is refused or read within bounds (ASan checks). */
        for (size_t cut = 0; cut < cases[i].n; cut++)
            (void)llmq_image_size_parse(cases[i].d, cut, &w, &h);
    }
    unsigned w, h;
    assert_int_equal(llmq_image_size_parse((const unsigned char *)"hello", 5, &w, &h), LLMQ_EINVAL);
    char *enc = b64(png_hdr, sizeof(png_hdr));
    char url[256];
    snprintf(url, sizeof(url), "data:image/png;base64,%s", enc);
    assert_int_equal(llmq_image_size_from_data_url(url, strlen(url), &w, &h, NULL), LLMQ_OK);
    assert_int_equal(w, 2048);
    assert_int_equal(h, 1024);
    assert_int_equal(llmq_image_size_from_data_url("data:image/png,xyz", 18, &w, &h, NULL),
                     LLMQ_EINVAL);
    assert_int_equal(llmq_image_size_from_data_url("data:image/png;base64,!!", 24, &w, &h, NULL),
                     LLMQ_EINVAL);
    free(enc);
}

/* Reads a whole file into a new buffer. */
static unsigned char *slurp(const char *path, size_t *len)
{
    char *buf = llmq_test_read_file(path, len);
    if (buf == NULL)
        fail_msg("cannot read %s", path);
    return (unsigned char *)buf;
}

/* tests/data/cost/images/valid/<name>_<W>x<H>.<ext> read as W×H (made by a
 * real encoder, see tests/tools/gen_image_cases.sh); invalid/ are refused. */
static void test_image_files(void **state)
{
    (void)state;
    const char *kinds[] = {"cost/images/valid", "cost/images/invalid"};
    size_t seen[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        struct llmq_test_files f;
        llmq_test_data_files(&f, kinds[k], NULL);
        for (size_t i = 0; i < f.n; i++) {
            size_t len;
            unsigned char *data = slurp(f.paths[i], &len);
            unsigned w = 0, h = 0, want_w = 0, want_h = 0;
            enum llmq_rc rc = llmq_image_size_parse(data, len, &w, &h);
            const char *us = strrchr(f.names[i], '_');
            if (k == 0) {
                assert_non_null(us);
                assert_int_equal(sscanf(us, "_%ux%u.", &want_w, &want_h), 2);
                if (rc != LLMQ_OK || w != want_w || h != want_h)
                    fail_msg("%s: rc %d, %ux%u", f.names[i], rc, w, h);
            } else if (rc != LLMQ_EINVAL) {
                fail_msg("%s: accepted as %ux%u", f.names[i], w, h);
            }
            free(data);
        }
        seen[k] = f.n;
        llmq_test_files_free(&f);
    }
    assert_true(seen[0] >= 8);
    assert_true(seen[1] >= 5);
}

/* A user message with a data: URL image: the image is priced by its header. */
static void test_chat_with_images(void **state)
{
    (void)state;
    char *enc = b64(jpeg_hdr, sizeof(jpeg_hdr)); /* 1280×720: 3×2 tiles, no upscaling */
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", \"content\": ["
             "{\"type\": \"text\", \"text\": \"hello world\"},"
             "{\"type\": \"image_url\", \"image_url\": {\"url\": \"data:image/jpeg;base64,%s\", "
             "\"detail\": \"high\"}},"
             "{\"type\": \"image_url\", \"image_url\": {\"url\": \"https://x/y.png\", \"detail\": "
             "\"low\"}},"
             "{\"type\": \"image_url\", \"image_url\": {\"url\": \"https://x/y.png\"}}]}]}",
             enc);
    /* 3 + user(1) + "hello world"(2) + (85 + 6 × 170) + 85 + 765 (remote default) + 3 */
    assert_int_equal(prompt_of("/v1/chat/completions", body), 3 + 1 + 2 + 1105 + 85 + 765 + 3);
    free(enc);
}

static void test_embeddings_and_completions(void **state)
{
    (void)state;
    /* "hello world" is 2 cl100k tokens. */
    assert_int_equal(prompt_of("/v1/embeddings", "{\"model\": \"text-embedding-3-small\", "
                                                 "\"input\": \"hello world\"}"),
                     2);
    assert_int_equal(prompt_of("/v1/embeddings", "{\"model\": \"text-embedding-3-small\", "
                                                 "\"input\": [\"hello world\", \"hello\"]}"),
                     3);
    assert_int_equal(prompt_of("/v1/embeddings", "{\"model\": \"text-embedding-3-small\", "
                                                 "\"input\": [[1, 2, 3], [4]]}"),
                     4);
    assert_int_equal(prompt_of("/v1/embeddings", "{\"model\": \"text-embedding-3-small\", "
                                                 "\"input\": [5, 6]}"),
                     2);
    assert_int_equal(prompt_of("/v1/completions", "{\"model\": \"gpt-3.5-turbo-instruct\", "
                                                  "\"prompt\": \"hello world\"}"),
                     2);
    struct llmq_cost c;
    json_t *b = parse("{\"model\": \"text-embedding-3-small\", \"input\": {\"x\": 1}}");
    struct llmq_error err;
    assert_int_equal(llmq_cost_estimate("/v1/embeddings", b, NULL, &c, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "input"));
    json_decref(b);
    b = parse("{\"model\": \"text-embedding-3-small\", \"input\": \"hello world\"}");
    assert_int_equal(llmq_cost_estimate("/v1/embeddings", b, NULL, &c, NULL), LLMQ_OK);
    assert_int_equal(c.completion_tokens, 0);
    assert_int_equal(c.total_tokens, 2); /* counted, not estimated: no margin */
    json_decref(b);
}

static void test_responses_input(void **state)
{
    (void)state;
    /* instructions (4 + 2) + input string (4 + 2) + priming 3 */
    assert_int_equal(prompt_of("/v1/responses", "{\"model\": \"gpt-4o\", \"instructions\": "
                                                "\"hello world\", \"input\": \"hello world\"}"),
                     15);
    /* one message item, like chat: 3 + user 1 + 2, priming 3 */
    assert_int_equal(prompt_of("/v1/responses",
                               "{\"model\": \"gpt-4o\", \"input\": [{\"role\": \"user\", "
                               "\"content\": [{\"type\": \"input_text\", \"text\": \"hello "
                               "world\"}]}]}"),
                     9);
}

static void test_reservation_and_margin(void **state)
{
    (void)state;
    struct llmq_cost_options opt;
    struct llmq_cost c;
    llmq_cost_options_default(&opt);
    assert_int_equal(opt.margin_pct, 10);
    json_t *b = parse("{\"model\": \"gpt-4o\", \"max_completion_tokens\": 100, \"n\": 3, "
                      "\"messages\": [{\"role\": \"user\", \"content\": \"hello world\"}]}");
    assert_int_equal(llmq_cost_estimate("/v1/chat/completions", b, &opt, &c, NULL), LLMQ_OK);
    assert_int_equal(c.prompt_tokens, 9);
    assert_int_equal(c.completion_tokens, 300);
    /* Tokenized text and the reservation are counted, not estimated: no margin. */
    assert_int_equal(c.estimated_tokens, 0);
    assert_int_equal(c.margin_tokens, 0);
    assert_int_equal(c.total_tokens, 309);
    /* OpenAI's admission rule: max(max_tokens × n, characters / 4 + margin). */
    opt.charge_model = LLMQ_CHARGE_CHARS;
    assert_int_equal(llmq_cost_estimate("/v1/chat/completions", b, &opt, &c, NULL), LLMQ_OK);
    assert_int_equal(c.prompt_tokens, 4); /* "user" + "hello world" = 15 chars */
    assert_int_equal(c.total_tokens, 300);
    json_decref(b);
    /* The characters' guess gets the margin when it is the larger part. */
    b = parse("{\"model\": \"gpt-4o\", \"max_tokens\": 1, \"messages\": [{\"role\": \"user\", "
              "\"content\": \"0123456789012345678901234567890123456789\"}]}");
    assert_int_equal(llmq_cost_estimate("/v1/chat/completions", b, &opt, &c, NULL), LLMQ_OK);
    assert_int_equal(c.prompt_tokens, 11);
    assert_int_equal(c.margin_tokens, 2); /* ceil(11 × 10%) */
    assert_int_equal(c.total_tokens, 13);
    json_decref(b);
    /* Tool schemas (the cookbook's approximation) and a remote image (its
     * size a guess) are estimated: the margin is 10% of them only. */
    opt.charge_model = LLMQ_CHARGE_EXACT;
    b = parse("{\"model\": \"gpt-4o\", \"max_tokens\": 10, \"tools\": " WEATHER_TOOLS ", "
              "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", "
              "\"image_url\": {\"url\": \"https://example.com/a.png\"}}]}]}");
    assert_int_equal(llmq_cost_estimate("/v1/chat/completions", b, &opt, &c, NULL), LLMQ_OK);
    assert_true(c.estimated_tokens >= 765 + 50);       /* the image + the tool */
    assert_true(c.estimated_tokens < c.prompt_tokens); /* the message framing is counted */
    assert_int_equal(c.margin_tokens, (c.estimated_tokens * 10 + 99) / 100);
    assert_int_equal(c.total_tokens, c.prompt_tokens + 10 + c.margin_tokens);
    json_decref(b);
    opt.charge_model = LLMQ_CHARGE_CHARS;
    b = parse("{\"model\": \"gpt-4o\", \"max_tokens\": 1, \"messages\": [{\"role\": \"user\", "
              "\"content\": \"0123456789012345678901234567890123456789\"}]}");
    opt.margin_pct = 0;
    assert_int_equal(llmq_cost_estimate("/v1/chat/completions", b, &opt, &c, NULL), LLMQ_OK);
    assert_int_equal(c.prompt_tokens, 11); /* 44 chars */
    assert_int_equal(c.total_tokens, 11);
    json_decref(b);
    b = parse("{\"model\": \"gpt-4o\", \"messages\": []}");
    llmq_cost_options_default(&opt);
    assert_int_equal(llmq_cost_estimate("/v1/chat/completions", b, &opt, &c, NULL), LLMQ_OK);
    assert_int_equal(c.completion_tokens, 1024);
    json_decref(b);
}

static void test_bad_bodies(void **state)
{
    (void)state;
    struct llmq_cost c;
    struct llmq_error err;
    const char *bad[] = {"{\"model\": \"gpt-4o\", \"messages\": \"hi\"}",
                         "{\"model\": \"gpt-4o\", \"messages\": [1]}", "[]"};
    for (size_t i = 0; i < 3; i++) {
        json_t *b = parse(bad[i]);
        assert_int_equal(llmq_cost_estimate("/v1/chat/completions", b, NULL, &c, &err),
                         LLMQ_EINVAL);
        assert_true(strlen(err.msg) > 0);
        json_decref(b);
    }
    json_t *b = parse("{\"model\": \"gpt-4o\", \"input\": 5}");
    assert_int_equal(llmq_cost_estimate("/v1/responses", b, NULL, &c, &err), LLMQ_EINVAL);
    json_decref(b);
    assert_int_equal(llmq_cost_estimate(NULL, NULL, NULL, &c, NULL), LLMQ_EINVAL);
}

/* The counts that size the reservation are refused out of OpenAI's bounds,
 * naming the field, and no cost wraps: an n of 2^61 with max_tokens 8 once
 * multiplied to 0 and passed any budget. */
static void test_count_bounds(void **state)
{
    (void)state;
    struct llmq_cost c;
    struct llmq_error err;
    const char *param;
    static const struct {
        const char *fields, *param;
    } bad[] = {
        {"\"n\": 2305843009213693952, \"max_tokens\": 8", "n"},
        {"\"n\": 129", "n"},
        {"\"n\": 0", "n"},
        {"\"n\": 1.5", "n"},
        {"\"max_tokens\": 9007199254740993", "max_tokens"},
        {"\"max_tokens\": 9223372036854775807", "max_tokens"},
        {"\"max_tokens\": -1", "max_tokens"},
        {"\"max_tokens\": \"8\"", "max_tokens"},
        {"\"max_completion_tokens\": 1048577", "max_completion_tokens"},
        {"\"max_output_tokens\": 0", "max_output_tokens"},
        {"\"best_of\": 21", "best_of"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", "
                 "\"content\": \"hi\"}], %s}",
                 bad[i].fields);
        json_t *b = parse(text);
        for (int chars = 0; chars < 2; chars++) {
            struct llmq_cost_options opt;
            llmq_cost_options_default(&opt);
            opt.charge_model = chars ? LLMQ_CHARGE_CHARS : LLMQ_CHARGE_EXACT;
            assert_int_equal(llmq_cost_estimate("/v1/chat/completions", b, &opt, &c, &err),
                             LLMQ_EINVAL);
            assert_non_null(strstr(err.msg, bad[i].param));
        }
        assert_int_equal(llmq_cost_check_params(b, &param, NULL), LLMQ_EINVAL);
        assert_string_equal(param, bad[i].param);
        json_decref(b);
    }
    /* The bounds themselves are accepted; the largest max field and the
     * larger of n and best_of are what the API may bill. */
    json_t *b = parse("{\"model\": \"gpt-4o\", \"prompt\": \"x\", \"n\": 128, "
                      "\"max_tokens\": 1048576, \"best_of\": 20, \"max_completion_tokens\": 5}");
    assert_int_equal(llmq_cost_check_params(b, &param, NULL), LLMQ_OK);
    assert_null(param);
    assert_int_equal(llmq_cost_estimate("/v1/completions", b, NULL, &c, NULL), LLMQ_OK);
    assert_int_equal(c.completion_tokens, 128LL * 1048576);
    assert_int_equal(c.total_tokens, c.prompt_tokens + 128LL * 1048576);
    json_decref(b);
    b = parse("{\"model\": \"gpt-4o\", \"prompt\": \"x\", \"n\": 2, \"best_of\": 5, "
              "\"max_tokens\": 10, \"max_completion_tokens\": null}");
    assert_int_equal(llmq_cost_estimate("/v1/completions", b, NULL, &c, NULL), LLMQ_OK);
    assert_int_equal(c.completion_tokens, 50);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_cookbook_example),
        cmocka_unit_test(test_tools_cookbook_example),
        cmocka_unit_test(test_image_tile_formula),
        cmocka_unit_test(test_image_headers),
        cmocka_unit_test(test_image_files),
        cmocka_unit_test(test_chat_with_images),
        cmocka_unit_test(test_embeddings_and_completions),
        cmocka_unit_test(test_responses_input),
        cmocka_unit_test(test_reservation_and_margin),
        cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_count_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
