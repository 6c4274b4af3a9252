/* The stored-value codec (jobs/job_pack.h): every text of
 * tests/data/job_pack/valid comes back byte for byte and is packed exactly
 * when that makes it shorter; the committed packed values (*.packed) still
 * unpack to their texts, so the format and its dictionary cannot change
 * unnoticed; every damaged value of tests/data/job_pack/invalid is refused
 * with a message; unpacked values pass through; the length bound holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "data_files.h"
#include "jobs/job_pack.h"

#define MAX_TEXT (64u << 20)

static void round_trip(const char *name, const char *text, size_t len)
{
    char *packed = NULL, *back = NULL;
    size_t plen = 0, blen = 0;
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_pack(text, len, &packed, &plen, &err), LLMQ_OK);
    if (packed != NULL) {
        assert_true(len >= LLMQ_JOB_PACK_MIN_BYTES);
        assert_true(plen < len);
        assert_true(llmq_job_packed(packed, plen));
        assert_int_equal(llmq_job_unpack(packed, plen, MAX_TEXT, &back, &blen, &err), LLMQ_OK);
        printf("%s: %zu -> %zu bytes\n", name, len, plen);
    } else {
        /* kept as it is: short, or packing would not shorten it */
        assert_int_equal(llmq_job_unpack(text, len, MAX_TEXT, &back, &blen, &err), LLMQ_OK);
        printf("%s: %zu bytes, kept\n", name, len);
    }
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    assert_int_equal(back[blen], '\0');
    free(packed);
    free(back);
}

static void test_valid_round_trip(void **state)
{
    (void)state;
    struct llmq_test_files f;
    llmq_test_data_files(&f, "job_pack/valid", ".json");
    assert_true(f.n >= 5);
    size_t packed_ones = 0;
    for (size_t i = 0; i < f.n; i++) {
        size_t len = 0;
        char *text = llmq_test_read_file(f.paths[i], &len);
        assert_non_null(text);
        round_trip(f.names[i], text, len);
        char *p = NULL;
        size_t plen = 0;
        assert_int_equal(llmq_job_pack(text, len, &p, &plen, NULL), LLMQ_OK);
        packed_ones += p != NULL;
        free(p);
        free(text);
    }
    assert_true(packed_ones >= 3); /* the request and result texts of kilobytes */
    llmq_test_files_free(&f);
}

/* A chat request body shrinks to well under its size (the dictionary). */
static void test_chat_body_shrinks(void **state)
{
    (void)state;
    char path[1024];
    size_t len = 0;
    char *text = llmq_test_read_file(
        llmq_test_source_path(path, sizeof(path), "tests/data/job_pack/valid/chat_4k.json"), &len);
    assert_non_null(text);
    char *p = NULL;
    size_t plen = 0;
    assert_int_equal(llmq_job_pack(text, len, &p, &plen, NULL), LLMQ_OK);
    assert_non_null(p);
    assert_true(plen * 2 < len);
    free(p);
    free(text);
}

static void test_golden_packed(void **state)
{
    (void)state;
    struct llmq_test_files f;
    llmq_test_data_files(&f, "job_pack/valid", ".packed");
    assert_true(f.n >= 2);
    for (size_t i = 0; i < f.n; i++) {
        size_t plen = 0, tlen = 0, blen = 0;
        char *packed = llmq_test_read_file(f.paths[i], &plen);
        char tpath[1100];
        snprintf(tpath, sizeof(tpath), "%.*s.json", (int)(strlen(f.paths[i]) - 7), f.paths[i]);
        char *text = llmq_test_read_file(tpath, &tlen);
        assert_non_null(packed);
        assert_non_null(text);
        char *back = NULL;
        struct llmq_error err = {0};
        assert_int_equal(llmq_job_unpack(packed, plen, MAX_TEXT, &back, &blen, &err), LLMQ_OK);
        assert_int_equal(blen, tlen);
        assert_memory_equal(back, text, tlen);
        free(back);
        free(packed);
        free(text);
    }
    llmq_test_files_free(&f);
}

static void test_invalid_refused(void **state)
{
    (void)state;
    struct llmq_test_files f;
    llmq_test_data_files(&f, "job_pack/invalid", ".bin");
    assert_true(f.n >= 5);
    for (size_t i = 0; i < f.n; i++) {
        size_t len = 0;
        char *v = llmq_test_read_file(f.paths[i], &len);
        assert_non_null(v);
        char *out = (char *)1;
        size_t olen = 1;
        struct llmq_error err = {0};
        enum llmq_rc rc = llmq_job_unpack(v, len, MAX_TEXT, &out, &olen, &err);
        printf("%s: %s\n", f.names[i], err.msg);
        assert_int_equal(rc, LLMQ_EINVAL);
        assert_null(out);
        assert_int_equal(olen, 0);
        assert_true(strncmp(err.msg, "packed value: ", 14) == 0);
        free(v);
    }
    llmq_test_files_free(&f);
}

/* A packed value that says it is longer than the bound is refused before
 * anything is allocated; so is a plain value over it. */
static void test_length_bound(void **state)
{
    (void)state;
    char text[1000];
    for (size_t i = 0; i < sizeof(text); i++)
        text[i] = "{\"a\":1}"[i % 7];
    char *p = NULL, *out = NULL;
    size_t plen = 0, olen = 0;
    assert_int_equal(llmq_job_pack(text, sizeof(text), &p, &plen, NULL), LLMQ_OK);
    assert_non_null(p);
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_unpack(p, plen, sizeof(text) - 1, &out, &olen, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "over 999"));
    assert_int_equal(llmq_job_unpack(p, plen, sizeof(text), &out, &olen, &err), LLMQ_OK);
    free(out);
    assert_int_equal(llmq_job_unpack(text, sizeof(text), 10, &out, &olen, &err), LLMQ_EINVAL);
    assert_null(out);
    free(p);
}

/* Texts below the threshold and an empty one are stored as they are. */
static void test_short_kept(void **state)
{
    (void)state;
    char *p = (char *)1, *out = NULL;
    size_t plen = 1, olen = 1;
    assert_int_equal(llmq_job_pack("{\"model\":\"m\"}", 13, &p, &plen, NULL), LLMQ_OK);
    assert_null(p);
    assert_int_equal(plen, 0);
    assert_int_equal(llmq_job_unpack("", 0, 10, &out, &olen, NULL), LLMQ_OK);
    assert_int_equal(olen, 0);
    assert_string_equal(out, "");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_round_trip), cmocka_unit_test(test_chat_body_shrinks),
        cmocka_unit_test(test_golden_packed),    cmocka_unit_test(test_invalid_refused),
        cmocka_unit_test(test_length_bound),     cmocka_unit_test(test_short_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
