/* Where the tokenizer finds its vocabularies: $LLMQ_DATA_DIR first, then the
 * installed and source directories; a file that fails its SHA-256 check is an
 * error, not a reason to look further. Its own executable, because each
 * vocabulary is loaded once per process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "llmq/tokens.h"

static void test_env_dir_first(void **state)
{
    (void)state;
    char dir[] = "/tmp/llmq-tok-XXXXXX";
    char path[512];
    assert_non_null(mkdtemp(dir));
    /* A corrupt cl100k_base in $LLMQ_DATA_DIR; no o200k_base there. */
    snprintf(path, sizeof(path), "%s/cl100k_base.tiktoken", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("IQ== 0\n", f);
    fclose(f);
    setenv("LLMQ_DATA_DIR", dir, 1);

    struct llmq_error err = {0};
    assert_int_equal(llmq_tokens_load(LLMQ_ENCODING_CL100K_BASE, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "SHA-256"));
    size_t n = 0;
    /* The failure is remembered, and reported to every later call. */
    assert_int_equal(llmq_tokens_count(LLMQ_ENCODING_CL100K_BASE, "hi", 2, &n, &err), LLMQ_EINVAL);
    /* Not in $LLMQ_DATA_DIR: found further down the search path. */
    assert_int_equal(llmq_tokens_count(LLMQ_ENCODING_O200K_BASE, "hi there", 8, &n, &err), LLMQ_OK);
    assert_int_equal(n, 2);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_dir_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
