/* Gateway keys (common/auth/gw_key.c): the text's form, randomness between
 * keys, and the hash Redis knows a key by (SHA-256, lower-case hex). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "auth/gw_key.h"

static void test_generate_form(void **state)
{
    (void)state;
    char a[LLMQ_GW_KEY_LEN + 1], b[LLMQ_GW_KEY_LEN + 1];
    assert_int_equal(llmq_gw_key_generate(a, sizeof(a), NULL), LLMQ_OK);
    assert_int_equal(llmq_gw_key_generate(b, sizeof(b), NULL), LLMQ_OK);
    assert_int_equal(strlen(a), LLMQ_GW_KEY_LEN);
    assert_memory_equal(a, "llmqgw-", 7);
    assert_int_equal(strspn(a + 7, "0123456789abcdef"), 48);
    assert_string_not_equal(a, b);
    assert_int_equal(strncmp(a, "sk-", 3) == 0, 0); /* never looks like an OpenAI key */
    char small[LLMQ_GW_KEY_LEN];
    assert_int_equal(llmq_gw_key_generate(small, sizeof(small), NULL), LLMQ_EINVAL);
}

static void test_hash_known_vector(void **state)
{
    (void)state;
    char h[LLMQ_GW_KEY_HASH_LEN + 1];
    llmq_gw_key_hash("abc", 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    llmq_gw_key_hash("abcdef", 3, h); /* only len bytes count */
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_form),
        cmocka_unit_test(test_hash_known_vector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
