/* Differential test of the hand-written pre-tokenizer (common/tokenizer/pretok.c)
 * against PCRE2 running tiktoken's own split patterns.
 *
 * Random strings over an alphabet that stresses every alternative and every
 * backtracking case (case runs, marks, contractions in all cases and with
 * U+017F, CR/LF and other whitespace runs, slashes, digits) must split into
 * the same pieces. The alphabet holds only characters whose classes are the
 * same in Unicode 14 (Debian's PCRE2) and Unicode 16 (our tables and
 * tiktoken), so any difference is a scanner bug, not a table version. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/pretok.h"

static const char *const cl100k_pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const o200k_pattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char *const alphabet[] = {
    "a",
    "b",
    "z",
    "A",
    "B",
    "Z",
    "\xC3\xA9",
    "\xC3\x89",
    "\xC3\x9F",
    "\xC7\x85",
    "\xCA\xB0",
    "\xE4\xB8\xAD",
    "\xD7\x90",
    "\xE0\xA4\x95",
    "\xE0\xA4\xBF",
    "\xCC\x81",
    "\xE2\x83\x9D",
    "0",
    "7",
    "\xD9\xA3",
    "\xC2\xBD",
    "\xE2\x85\xAB",
    " ",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "\xC2\xA0",
    "\xE3\x80\x80",
    "\x0B",
    "'",
    "'s",
    "'S",
    "'t",
    "'LL",
    "'rE",
    "'Ve",
    "'m",
    "'D",
    "\xC5\xBF",
    "'\xC5\xBF",
    ".",
    ",",
    "!",
    "/",
    "//",
    "-",
    "(",
    "\"",
    "\xF0\x9F\x98\x80",
    "\xE2\x80\x8D",
    "\xEF\xB8\x8F",
    "\xE2\x82\xAC",
    "\xEF\xBF\xBD",
    "\xEE\x80\x80",
    "\x01",
};

static pcre2_code *compile(const char *pattern)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &code, &off, NULL);
    if (re == NULL) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof(msg));
        fail_msg("pcre2_compile at %zu: %s", (size_t)off, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: fall back to the interpreter */
    return re;
}

/* Compares the two splitters on s; returns 1 when they agree. */
static int same_split(enum llmq_pretok_pattern p, pcre2_code *re, pcre2_match_data *md,
                      const unsigned char *s, size_t len)
{
    size_t pos = 0;
    while (pos < len) {
        int rc = pcre2_match(re, s, len, pos, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md, NULL);
        size_t want = rc > 0 ? pcre2_get_ovector_pointer(md)[1] : pos;
        size_t got = llmq_pretok_next(p, s, len, pos);
        if (rc <= 0 || want != got) {
            fprintf(stderr, "split differs at byte %zu (pcre2 end %zu, ours %zu) in:", pos, want,
                    got);
            for (size_t i = 0; i < len; i++)
                fprintf(stderr, " %02x", s[i]);
            fprintf(stderr, "\n");
            return 0;
        }
        pos = got;
    }
    return 1;
}

static void run_random(enum llmq_pretok_pattern p, const char *pattern)
{
    pcre2_code *re = compile(pattern);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    unsigned seed = 42u + (unsigned)p;
    unsigned char buf[512];
    int bad = 0;
    const size_t n_alpha = sizeof(alphabet) / sizeof(alphabet[0]);
    for (int round = 0; round < 20000 && bad < 3; round++) {
        size_t len = 0;
        seed = seed * 1103515245u + 12345u;
        int parts = 1 + (int)((seed >> 16) % 24);
        for (int i = 0; i < parts; i++) {
            seed = seed * 1103515245u + 12345u;
            const char *a = alphabet[(seed >> 16) % n_alpha];
            size_t al = strlen(a);
            memcpy(buf + len, a, al);
            len += al;
        }
        bad += !same_split(p, re, md, buf, len);
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    assert_int_equal(bad, 0);
}

static void test_cl100k_matches_pcre2(void **state)
{
    (void)state;
    run_random(LLMQ_PRETOK_CL100K, cl100k_pattern);
}

static void test_o200k_matches_pcre2(void **state)
{
    (void)state;
    run_random(LLMQ_PRETOK_O200K, o200k_pattern);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cl100k_matches_pcre2),
        cmocka_unit_test(test_o200k_matches_pcre2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
