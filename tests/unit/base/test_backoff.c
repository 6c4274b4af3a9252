/* Unit tests for common/base/backoff.c: full-jitter bounds per attempt, the cap,
 * the server-hint floor, determinism for a seed, reconnect steps (the RNG
 * itself: test_rng.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/backoff.h"

static void test_bounds_per_attempt(void **state)
{
    (void)state;
    struct llmq_backoff_policy p = {.base_ms = 100, .cap_ms = 5000};
    uint64_t rng;
    llmq_rng_seed(&rng, 1);
    const int64_t ceil_of[] = {0, 100, 200, 400, 800, 1600, 3200, 5000, 5000};
    for (int attempt = 1; attempt <= 8; attempt++) {
        int64_t max_seen = 0;
        for (int i = 0; i < 2000; i++) {
            int64_t d = llmq_backoff_delay_ms(&p, attempt, -1, &rng);
            assert_true(d >= 0 && d <= ceil_of[attempt]);
            if (d > max_seen)
                max_seen = d;
        }
        /* Full jitter reaches near the ceiling. */
        assert_true(max_seen >= ceil_of[attempt] * 9 / 10);
    }
    /* Huge attempt numbers saturate at the cap, no overflow. */
    for (int i = 0; i < 1000; i++) {
        int64_t d = llmq_backoff_delay_ms(&p, 1 << 30, -1, &rng);
        assert_true(d >= 0 && d <= 5000);
    }
    /* attempt < 1 is attempt 1. */
    for (int i = 0; i < 1000; i++)
        assert_true(llmq_backoff_delay_ms(&p, -3, -1, &rng) <= 100);
}

static void test_hint_floor(void **state)
{
    (void)state;
    struct llmq_backoff_policy p = {.base_ms = 100, .cap_ms = 1000};
    uint64_t rng;
    llmq_rng_seed(&rng, 7);
    for (int i = 0; i < 1000; i++) {
        /* A hint above the cap still wins. */
        assert_int_equal(llmq_backoff_delay_ms(&p, 3, 20000, &rng), 20000);
        int64_t d = llmq_backoff_delay_ms(&p, 5, 300, &rng);
        assert_true(d >= 300 && d <= 1000);
    }
    p.hint_jitter_ms = 50;
    int spread = 0;
    for (int i = 0; i < 1000; i++) {
        int64_t d = llmq_backoff_delay_ms(&p, 1, 20000, &rng);
        assert_true(d >= 20000 && d <= 20050);
        spread |= d != 20000;
    }
    assert_true(spread);
    /* Absurd inputs stay bounded. */
    assert_true(llmq_backoff_delay_ms(&p, 1, INT64_MAX, &rng) >= 1000000000000LL);
    p.base_ms = INT64_MAX;
    p.cap_ms = INT64_MAX;
    assert_true(llmq_backoff_delay_ms(&p, 100, -1, &rng) >= 0);
}

static void test_defaults_and_due(void **state)
{
    (void)state;
    uint64_t rng;
    llmq_rng_seed(&rng, 3);
    for (int i = 0; i < 1000; i++) {
        assert_true(llmq_backoff_delay_ms(NULL, 1, -1, &rng) <= 500);
        assert_true(llmq_backoff_delay_ms(NULL, 40, -1, &rng) <= 60000);
    }
    int64_t due = llmq_backoff_due_ms(NULL, 1, 250, 1000000, &rng);
    assert_true(due >= 1000250 && due <= 1000500);
}

static void test_deterministic(void **state)
{
    (void)state;
    uint64_t a, b;
    llmq_rng_seed(&a, 99);
    llmq_rng_seed(&b, 99);
    for (int i = 0; i < 100; i++)
        assert_int_equal(llmq_backoff_delay_ms(NULL, i % 10 + 1, -1, &a),
                         llmq_backoff_delay_ms(NULL, i % 10 + 1, -1, &b));
}

/* Reconnect steps: each delay in [step/2, step], the step doubling to the
 * cap and staying there; a step below 1 ms counts as 1. */
static void test_reconnect_steps(void **state)
{
    (void)state;
    uint64_t rng;
    llmq_rng_seed(&rng, 7);
    for (int run = 0; run < 200; run++) {
        int64_t step = 100, expect = 100;
        for (int i = 0; i < 10; i++) {
            int64_t d = llmq_backoff_reconnect_ms(&step, 5000, &rng);
            assert_true(d >= expect / 2 && d <= expect);
            expect = expect * 2 > 5000 ? 5000 : expect * 2;
            assert_int_equal(step, expect);
        }
    }
    int64_t step = 0;
    int64_t d = llmq_backoff_reconnect_ms(&step, 0, &rng);
    assert_true(d >= 0 && d <= 1);
    assert_int_equal(step, 1);
    step = INT64_MAX;
    d = llmq_backoff_reconnect_ms(&step, INT64_MAX, &rng);
    assert_true(d > 0 && step > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_per_attempt), cmocka_unit_test(test_hint_floor),
        cmocka_unit_test(test_defaults_and_due),   cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_reconnect_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
