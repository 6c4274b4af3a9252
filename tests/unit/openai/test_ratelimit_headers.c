/* Unit tests for common/openai/ratelimit_headers.c: table-driven duration and date
 * cases, the data-driven header files in tests/data/ratelimit_headers/
 * (valid/ and invalid/: header lines, then "--- expect", then field=value
 * lines; every field not listed must be absent), and random garbage. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "data_files.h"
#include "openai/ratelimit_headers.h"

#define NOW_MS 784111777000LL /* Sun, 06 Nov 1994 08:49:37 GMT */

static void test_durations(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int64_t ms; /* -1: must be rejected */
    } cases[] = {
        {"1s", 1000},     {"6m0s", 360000},
        {"20ms", 20},     {"1h2m3.5s", 3723500},
        {"0.5s", 500},    {"0s", 0},
        {"0", 0},         {"2", 2000},
        {"1.5", 1500},    {"59m59.999s", 3599999},
        {"1ns", 1},       {"999us", 1},
        {"1000us", 1},    {"1001us", 2},
        {"3h", 10800000}, {"1m1ms", 60001},
        {"", -1},         {"s", -1},
        {"-1s", -1},      {"1", 1000},
        {"1 s", -1},      {"1.s", 1000},
        {".5s", 500},     {"1h-1m", -1},
        {"5d", -1},       {"1e3s", -1},
        {"1s ", -1},      {"10000000000000h", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ms = -7;
        int rc = llmq_ratelimit_parse_duration_ms(cases[i].in, strlen(cases[i].in), &ms);
        if (cases[i].ms < 0) {
            if (rc != -1)
                fail_msg("duration '%s' accepted as %" PRId64, cases[i].in, ms);
        } else if (rc != 0 || ms != cases[i].ms) {
            fail_msg("duration '%s': rc %d ms %" PRId64 ", want %" PRId64, cases[i].in, rc, ms,
                     cases[i].ms);
        }
    }
}

static void test_http_date(void **state)
{
    (void)state;
    int64_t ms;
    const char *d = "Sun, 06 Nov 1994 08:49:37 GMT";
    assert_int_equal(llmq_ratelimit_parse_http_date(d, strlen(d), &ms), 0);
    assert_int_equal(ms, NOW_MS);
    d = "Thu, 01 Jan 1970 00:00:00 GMT";
    assert_int_equal(llmq_ratelimit_parse_http_date(d, strlen(d), &ms), 0);
    assert_int_equal(ms, 0);
    d = "Mon, 29 Feb 2044 23:59:59 GMT";
    assert_int_equal(llmq_ratelimit_parse_http_date(d, strlen(d), &ms), 0);
    assert_int_equal(ms, 2340403199000LL);
    const char *bad[] = {"Sun, 06 Nov 1994 08:49:37",     "Sun 06 Nov 1994 08:49:37 GMT",
                         "Sun, 06 Xyz 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT ",
                         "Sun, 06 Nov 1994 25:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                         "Sun, 0a Nov 1994 08:49:37 GMT", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (llmq_ratelimit_parse_http_date(bad[i], strlen(bad[i]), &ms) != -1)
            fail_msg("date '%s' accepted", bad[i]);
}

static void test_block_and_hint(void **state)
{
    (void)state;
    struct llmq_ratelimit_headers h;
    llmq_ratelimit_headers_init(&h);
    assert_int_equal(llmq_ratelimit_headers_retry_hint_ms(&h), -1);
    const char *block = "retry-after: 3\r\nx-ratelimit-limit-tokens: 10\r\n\r\n"
                        "x-ratelimit-limit-requests: 5\r\n";
    llmq_ratelimit_headers_feed_block(&h, block, strlen(block), NOW_MS);
    int64_t v;
    assert_true(llmq_ratelimit_headers_get(&h, LLMQ_RLH_LIMIT_TOKENS, &v));
    assert_int_equal(v, 10);
    assert_false(llmq_ratelimit_headers_get(&h, LLMQ_RLH_LIMIT_REQUESTS, &v)); /* after blank */
    assert_int_equal(llmq_ratelimit_headers_retry_hint_ms(&h), 3000);
    const char *ms = "retry-after-ms: 250\n";
    llmq_ratelimit_headers_feed_block(&h, ms, strlen(ms), NOW_MS);
    assert_int_equal(llmq_ratelimit_headers_retry_hint_ms(&h), 250); /* the exact one wins */
    /* Not NUL-terminated input: only len bytes are read. */
    char raw[] = {'x', '-', 'r', 'e', 'q', 'u', 'e', 's', 't', '-', 'i', 'd', ':', ' ', 'a', 'b'};
    llmq_ratelimit_headers_feed_line(&h, raw, sizeof(raw), NOW_MS);
    assert_string_equal(h.request_id, "ab");
    assert_false(llmq_ratelimit_headers_get(&h, LLMQ_RLH_FIELD_COUNT, &v));
    assert_false(llmq_ratelimit_headers_get(NULL, LLMQ_RLH_LIMIT_TOKENS, &v));
    assert_null(llmq_ratelimit_headers_field_name(LLMQ_RLH_FIELD_COUNT));
    for (int f = 0; f < LLMQ_RLH_FIELD_COUNT; f++)
        assert_non_null(llmq_ratelimit_headers_field_name((enum llmq_rlh_field)f));
}

static void test_request_id_truncated(void **state)
{
    (void)state;
    char line[400] = "x-request-id: ";
    size_t n = strlen(line);
    memset(line + n, 'r', 300);
    line[n + 300] = '\0';
    struct llmq_ratelimit_headers h;
    llmq_ratelimit_headers_init(&h);
    llmq_ratelimit_headers_feed_line(&h, line, strlen(line), NOW_MS);
    assert_int_equal(strlen(h.request_id), LLMQ_RLH_REQUEST_ID_MAX - 1);
}

/* ---- data-driven files ---- */

static int field_by_name(const char *name, size_t len)
{
    for (int f = 0; f < LLMQ_RLH_FIELD_COUNT; f++) {
        const char *fn = llmq_ratelimit_headers_field_name((enum llmq_rlh_field)f);
        if (strlen(fn) == len && memcmp(fn, name, len) == 0)
            return f;
    }
    return -1;
}

/* Checks one expectation "field=value"; marks the field in *seen. */
static void check_expect(const char *file, const struct llmq_ratelimit_headers *h, const char *line,
                         uint32_t *seen)
{
    const char *eq = strchr(line, '=');
    if (eq == NULL)
        fail_msg("%s: bad expect line '%s'", file, line);
    int f = field_by_name(line, (size_t)(eq - line));
    if (f < 0)
        fail_msg("%s: unknown field in '%s'", file, line);
    *seen |= LLMQ_RLH_BIT(f);
    if (!llmq_ratelimit_headers_get(h, (enum llmq_rlh_field)f, NULL))
        fail_msg("%s: %s absent", file, llmq_ratelimit_headers_field_name(f));
    if (f == LLMQ_RLH_REQUEST_ID) {
        if (strcmp(h->request_id, eq + 1) != 0)
            fail_msg("%s: request_id '%s', want '%s'", file, h->request_id, eq + 1);
        return;
    }
    int64_t want = strtoll(eq + 1, NULL, 10);
    if (h->value[f] != want)
        fail_msg("%s: %s = %" PRId64 ", want %" PRId64, file, llmq_ratelimit_headers_field_name(f),
                 h->value[f], want);
}

static void run_case(const char *path)
{
    size_t len;
    char *text = llmq_test_read_file(path, &len);
    if (text == NULL)
        fail_msg("cannot read %s", path);
    struct llmq_ratelimit_headers h;
    llmq_ratelimit_headers_init(&h);
    int64_t now = NOW_MS;
    int expecting = 0;
    uint32_t seen = 0;
    for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (line[0] == '\0')
            continue;
        if (strcmp(line, "--- expect") == 0)
            expecting = 1;
        else if (line[0] == '#')
            continue;
        else if (strncmp(line, "@now ", 5) == 0)
            now = strtoll(line + 5, NULL, 10);
        else if (expecting)
            check_expect(path, &h, line, &seen);
        else
            llmq_ratelimit_headers_feed_line(&h, line, strlen(line), now);
    }
    if (!expecting)
        fail_msg("%s: no '--- expect' line", path);
    if (h.present & ~seen)
        fail_msg("%s: unexpected fields present (mask 0x%x)", path, h.present & ~seen);
    free(text);
}

static void run_dir(const char *sub)
{
    struct llmq_test_files f;
    llmq_test_data_files(&f, sub, NULL);
    for (size_t i = 0; i < f.n; i++)
        run_case(f.paths[i]);
    assert_true(f.n > 0);
    llmq_test_files_free(&f);
}

static void test_valid_files(void **state)
{
    (void)state;
    run_dir("ratelimit_headers/valid");
}

static void test_invalid_files(void **state)
{
    (void)state;
    run_dir("ratelimit_headers/invalid");
}

/* Random bytes around known names: must never crash or read out of bounds
 * (ASan checks), and every set field must be in range. */
static void test_random_garbage(void **state)
{
    (void)state;
    static const char *names[] = {"x-ratelimit-reset-tokens: ",
                                  "retry-after: ",
                                  "x-ratelimit-limit-requests: ",
                                  "retry-after-ms: ",
                                  "x-request-id: ",
                                  "x-ratelimit-remaining-tokens_usage_based: "};
    const char alphabet[] = "0123456789.hmsunµ:- ,GMTabc\r\n\t";
    uint64_t r = 42;
    for (int i = 0; i < 20000; i++) {
        char line[96];
        const char *nm = names[i % 6];
        size_t n = strlen(nm);
        memcpy(line, nm, n);
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t extra = (r >> 33) % 30;
        for (size_t k = 0; k < extra; k++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            line[n + k] = alphabet[(r >> 33) % (sizeof(alphabet) - 1)];
        }
        char *exact = malloc(n + extra); /* exact size: ASan sees any over-read */
        memcpy(exact, line, n + extra);
        struct llmq_ratelimit_headers h;
        llmq_ratelimit_headers_init(&h);
        llmq_ratelimit_headers_feed_line(&h, exact, n + extra, NOW_MS);
        free(exact);
        for (int f = 0; f < LLMQ_RLH_INT_FIELD_COUNT; f++)
            if (h.present & LLMQ_RLH_BIT(f))
                assert_true(h.value[f] >= 0 && h.value[f] <= 1000000000000000LL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),      cmocka_unit_test(test_http_date),
        cmocka_unit_test(test_block_and_hint), cmocka_unit_test(test_request_id_truncated),
        cmocka_unit_test(test_valid_files),    cmocka_unit_test(test_invalid_files),
        cmocka_unit_test(test_random_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
