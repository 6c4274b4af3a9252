/* crc16.c: CRC16/XMODEM and the key slot, against values Redis computes
 * (CLUSTER KEYSLOT, and the check value of the CRC catalogue). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "redis/crc16.h"

static void test_crc16_check_value(void **state)
{
    (void)state;
    assert_int_equal(llmq_crc16_xmodem("123456789", 9), 0x31C3);
    assert_int_equal(llmq_crc16_xmodem("", 0), 0);
}

static int slot(const char *key)
{
    return llmq_cluster_key_slot(key, strlen(key));
}

static void test_key_slot(void **state)
{
    (void)state;
    /* CLUSTER KEYSLOT on redis-server 7.0 */
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("bar"), 5061);
    assert_int_equal(slot("{user1000}.following"), 3443);
    assert_int_equal(slot("{user1000}.followers"), 3443);
    /* hash tag rules: the first '{' and the first '}' after it */
    assert_int_equal(slot("foo{}{bar}"), slot("foo{}{bar}")); /* empty tag: whole key */
    assert_int_equal(slot("foo{}{bar}"), llmq_crc16_xmodem("foo{}{bar}", 10) & 16383);
    assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
    assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
    assert_int_equal(slot("{abc"), llmq_crc16_xmodem("{abc", 4) & 16383);
    /* every llmq key of an account shares the account's slot */
    assert_int_equal(llmq_cluster_account_slot("user1000"), 3443);
    assert_int_equal(slot("llmq:{acme}:q:normal"), llmq_cluster_account_slot("acme"));
    assert_int_equal(slot("llmq:{acme}:res:job-1"), llmq_cluster_account_slot("acme"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_check_value),
        cmocka_unit_test(test_key_slot),
    };
    return cmocka_run_group_tests_name("crc16", tests, NULL, NULL);
}
