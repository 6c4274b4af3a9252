/* Allocation failures in the tokenizer, image and cost code: fail the Nth
 * allocation, for every N until the call succeeds, and check that each call
 * reports LLMQ_ENOMEM (never crashes, never leaks: ASan's leak check runs at
 * exit). malloc/calloc/realloc are wrapped at link time (tests/tokenizer.cmake),
 * which covers every call made from libllmq's objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/bpe.h"
#include "cost/image_size.h"
#include "llmq/tokens.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);

static long fail_at = -1; /* fail the allocation with this index; -1: never */
static long alloc_count;

static int should_fail(void)
{
    return fail_at >= 0 && alloc_count++ == fail_at;
}

void *__wrap_malloc(size_t n)
{
    return should_fail() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    return should_fail() ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : __real_realloc(p, n);
}

static void arm(long n)
{
    alloc_count = 0;
    fail_at = n;
}

static void test_bpe_load_fails_cleanly(void **state)
{
    (void)state;
    char path[1024];
    const char *src = getenv("LLMQ_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/data/cl100k_base.tiktoken", src ? src : ".");
    for (long n = 0;; n++) {
        struct llmq_bpe_vocab *v = NULL;
        arm(n);
        enum llmq_rc rc = llmq_bpe_load(path, NULL, &v, NULL);
        arm(-1);
        if (rc == LLMQ_OK) {
            llmq_bpe_free(v);
            assert_true(n > 3);
            break;
        }
        assert_int_equal(rc, LLMQ_ENOMEM);
    }
}

static void test_encode_fails_cleanly(void **state)
{
    (void)state;
    assert_int_equal(llmq_tokens_load(LLMQ_ENCODING_O200K_BASE, NULL), LLMQ_OK);
    /* A long piece (heap merge), invalid UTF-8 (repair copy), many ids (growth). */
    size_t len = 3000;
    char *text = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        text[i] = (char)("qwertyuiopasdfghjklzxcvbnm"[(i * 7) % 26]);
    text[100] = (char)0xFF;
    for (long n = 0;; n++) {
        uint32_t *ids = NULL;
        size_t count = 0;
        arm(n);
        enum llmq_rc rc =
            llmq_tokens_encode(LLMQ_ENCODING_O200K_BASE, text, len, &ids, &count, NULL);
        arm(-1);
        if (rc == LLMQ_OK) {
            assert_true(count > 100);
            free(ids);
            break;
        }
        assert_int_equal(rc, LLMQ_ENOMEM);
    }
    free(text);
}

static void test_image_fails_cleanly(void **state)
{
    (void)state;
    /* "data:image/gif;base64," + a GIF header of 800×600 */
    static const char url[] = "data:image/gif;base64,R0lGODlhIANYAgA=";
    unsigned w = 0, h = 0;
    arm(0);
    enum llmq_rc rc = llmq_image_size_from_data_url(url, strlen(url), &w, &h, NULL);
    arm(-1);
    assert_int_equal(rc, LLMQ_ENOMEM);
    assert_int_equal(llmq_image_size_from_data_url(url, strlen(url), &w, &h, NULL), LLMQ_OK);
    assert_int_equal(w, 800);
    assert_int_equal(h, 600);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_load_fails_cleanly),
        cmocka_unit_test(test_encode_fails_cleanly),
        cmocka_unit_test(test_image_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
