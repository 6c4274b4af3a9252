/* openai-sim's sliding window (window.c) on a fake clock: exact expiry at
 * one period, the wait of a denial, settlement, requests that never fit, and
 * a ring that wraps and grows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "../window.h"

static void test_requests_expire_after_exactly_one_period(void **state)
{
    (void)state;
    struct sim_window w = {0};
    uint64_t seq;
    int64_t wait = 0;
    for (int64_t t = 0; t < 300; t += 100) {
        sim_window_expire(&w, t, 1000);
        assert_int_equal(sim_window_check(&w, t, 1000, 3, 0, 1, &wait), SIM_WINDOW_ADMIT);
        assert_int_equal(sim_window_add(&w, t, 1, &seq), 0);
    }
    sim_window_expire(&w, 300, 1000);
    assert_int_equal(sim_window_check(&w, 300, 1000, 3, 0, 1, &wait), SIM_WINDOW_DENY_REQUESTS);
    assert_int_equal(wait, 700);
    sim_window_expire(&w, 999, 1000);
    assert_int_equal(sim_window_check(&w, 999, 1000, 3, 0, 1, &wait), SIM_WINDOW_DENY_REQUESTS);
    assert_int_equal(wait, 1);
    sim_window_expire(&w, 1000, 1000);
    assert_int_equal(w.len, 2);
    assert_int_equal(sim_window_check(&w, 1000, 1000, 3, 0, 1, &wait), SIM_WINDOW_ADMIT);
    assert_int_equal(sim_window_reset_ms(&w, 1000, 1000), 200);
    sim_window_free(&w);
    sim_window_free(NULL);
}

static void test_tokens_wait_and_settle(void **state)
{
    (void)state;
    struct sim_window w = {0};
    uint64_t a, b;
    int64_t wait = 0;
    assert_int_equal(sim_window_add(&w, 0, 60, &a), 0);
    assert_int_equal(sim_window_add(&w, 500, 30, &b), 0);
    assert_int_equal(sim_window_check(&w, 600, 1000, 0, 100, 50, &wait), SIM_WINDOW_DENY_TOKENS);
    assert_int_equal(wait, 400); /* after the 60 at t=0 expires, 30 + 50 fits */
    assert_int_equal(sim_window_check(&w, 600, 1000, 0, 100, 101, &wait), SIM_WINDOW_TOO_LARGE);
    sim_window_settle(&w, a, 20); /* real usage was lower */
    assert_int_equal(w.used_tokens, 50);
    assert_int_equal(sim_window_check(&w, 600, 1000, 0, 100, 50, &wait), SIM_WINDOW_ADMIT);
    sim_window_expire(&w, 1000, 1000);
    assert_int_equal(w.used_tokens, 30);
    sim_window_settle(&w, a, 99); /* expired: no effect */
    assert_int_equal(w.used_tokens, 30);
    sim_window_settle(&w, b, 10);
    assert_int_equal(w.used_tokens, 10);
    assert_int_equal(sim_window_reset_tokens_ms(&w, 1000, 1000), 500);
    sim_window_free(&w);
}

static void test_ring_wraps_and_grows(void **state)
{
    (void)state;
    struct sim_window w = {0};
    uint64_t seq, first = 0;
    int64_t t = 0, live = 0;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 37 + round * 3; i++, t++) {
            assert_int_equal(sim_window_add(&w, t, 2, &seq), 0);
            if (round == 0 && i == 0)
                first = seq;
        }
        sim_window_expire(&w, t, 40);
        live = (int64_t)w.len;
        assert_true(live <= 40);
        assert_int_equal(w.used_tokens, 2 * live);
        sim_window_settle(&w, seq, 1);
        assert_int_equal(w.used_tokens, 2 * live - 1);
        sim_window_settle(&w, seq, 2);
    }
    sim_window_settle(&w, first, 100); /* long gone */
    assert_int_equal(w.used_tokens, 2 * live);
    sim_window_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_expire_after_exactly_one_period),
        cmocka_unit_test(test_tokens_wait_and_settle),
        cmocka_unit_test(test_ring_wraps_and_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
