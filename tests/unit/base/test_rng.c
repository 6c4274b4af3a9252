/* Unit tests for common/base/rng.c: one seed gives one stream, the bounded
 * draw stays in [0, n] and is roughly uniform, and n <= 0 gives 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/rng.h"

static void test_same_seed_same_stream(void **state)
{
    (void)state;
    uint64_t a, b, c;
    llmq_rng_seed(&a, 99);
    llmq_rng_seed(&b, 99);
    llmq_rng_seed(&c, 100);
    int differs = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = llmq_rng_next(&a);
        assert_true(x == llmq_rng_next(&b));
        differs |= x != llmq_rng_next(&c);
    }
    assert_true(differs);
}

static void test_uniform(void **state)
{
    (void)state;
    uint64_t rng;
    llmq_rng_seed(&rng, 12345);
    int bins[10] = {0};
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        int64_t v = llmq_rng_uniform(&rng, 9);
        assert_true(v >= 0 && v <= 9);
        bins[v]++;
    }
    for (int i = 0; i < 10; i++)
        assert_true(bins[i] > n / 10 * 95 / 100 && bins[i] < n / 10 * 105 / 100);
    assert_int_equal(llmq_rng_uniform(&rng, 0), 0);
    assert_int_equal(llmq_rng_uniform(&rng, -5), 0);
    assert_true(llmq_rng_uniform(&rng, INT64_MAX) >= 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_stream),
        cmocka_unit_test(test_uniform),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
