/* The in-memory sliding window (common/limiter/window.c) driven by a fake clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>

#include "limiter/window.h"

static void test_requests_exact_expiry(void **state)
{
    (void)state;
    struct llmq_window w;
    llmq_window_init(&w, 2, -1, 1000);
    assert_int_equal(llmq_window_wait_ms(&w, 0, 100), 0);
    llmq_window_add(&w, 1, 0, 100);
    assert_int_equal(llmq_window_wait_ms(&w, 0, 300), 0);
    llmq_window_add(&w, 2, 0, 300);
    /* Full: the first admission (t=100) stops counting at exactly t=1100. */
    assert_int_equal(llmq_window_wait_ms(&w, 0, 400), 700);
    assert_int_equal(llmq_window_wait_ms(&w, 0, 1099), 1);
    assert_int_equal(llmq_window_wait_ms(&w, 0, 1100), 0);
    llmq_window_clear(&w);
}

static void test_tokens_wait_for_enough_to_free(void **state)
{
    (void)state;
    struct llmq_window w;
    llmq_window_init(&w, -1, 100, 1000);
    llmq_window_add(&w, 1, 30, 0);
    llmq_window_add(&w, 2, 30, 10);
    llmq_window_add(&w, 3, 30, 20);
    /* 90 used; 50 needs 40 freed: entries 1 and 2 (60) free at t=1010. */
    assert_int_equal(llmq_window_wait_ms(&w, 50, 500), 510);
    assert_int_equal(llmq_window_wait_ms(&w, 10, 500), 0);
    /* Never fits above the limit; an idle window takes up to the whole limit. */
    assert_int_equal(llmq_window_wait_ms(&w, 101, 500), -1);
    assert_int_equal(llmq_window_wait_ms(&w, 100, 5000), 0);
    llmq_window_clear(&w);
}

static void test_adjust_and_remove(void **state)
{
    (void)state;
    struct llmq_window w;
    llmq_window_init(&w, -1, 100, 1000);
    llmq_window_add(&w, 7, 80, 0);
    assert_int_equal(llmq_window_wait_ms(&w, 30, 1), 999);
    assert_int_equal(llmq_window_adjust(&w, 7, 20), 1); /* settle down */
    assert_int_equal(llmq_window_wait_ms(&w, 30, 1), 0);
    llmq_window_add(&w, 8, 30, 2);
    assert_int_equal(llmq_window_adjust(&w, 7, -1), 1); /* refund */
    assert_int_equal(w.tokens_sum, 30);
    assert_int_equal(w.count, 1);
    assert_int_equal(llmq_window_adjust(&w, 99, 5), 0);
    llmq_window_clear(&w);
}

/* Random admissions against a brute-force check: no window of one period ever
 * holds more than the limit, and a 0 wait always means it fits. */
static void test_random_never_over_limit(void **state)
{
    (void)state;
    struct llmq_window w;
    const int64_t period = 250, limit = 1000;
    llmq_window_init(&w, 20, limit, period);
    int64_t times[4000], costs[4000];
    int n = 0;
    unsigned int seed = 42;
    for (int64_t now = 0; now < 5000 && n < 4000; now += rand_r(&seed) % 5) {
        int64_t cost = rand_r(&seed) % 120;
        int64_t wait = llmq_window_wait_ms(&w, cost, now);
        assert_true(wait >= 0);
        if (wait == 0) {
            assert_int_equal(llmq_window_add(&w, (uint64_t)n, cost, now), 0);
            times[n] = now;
            costs[n++] = cost;
        }
    }
    assert_true(n > 100);
    for (int i = 0; i < n; i++) {
        int64_t tok = 0, req = 0;
        for (int j = i; j < n && times[j] < times[i] + period; j++) {
            tok += costs[j];
            req++;
        }
        assert_true(tok <= limit);
        assert_true(req <= 20);
    }
    llmq_window_clear(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_exact_expiry),
        cmocka_unit_test(test_tokens_wait_for_enough_to_free),
        cmocka_unit_test(test_adjust_and_remove),
        cmocka_unit_test(test_random_never_over_limit),
    };
    return cmocka_run_group_tests_name("window", tests, NULL, NULL);
}
