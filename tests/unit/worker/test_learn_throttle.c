/* worker/learn_throttle.c: which responses' x-ratelimit-* headers go to
 * the settle. Sent: the first of an (account, model), one with a remaining
 * count at 0, a 429; a burst within LEARN_HEADERS_EVERY_MS is skipped, and
 * the next response after the interval is sent. Headers parsed from real
 * header lines; the clock is the test's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "learn_throttle.h"

/* Headers of a response saying rem_tok tokens and rem_req requests remain. */
static struct llmq_ratelimit_headers headers(int rem_req, int rem_tok)
{
    struct llmq_ratelimit_headers h;
    char text[512];
    int n = snprintf(text, sizeof(text),
                     "HTTP/1.1 200 OK\r\n"
                     "x-ratelimit-limit-requests: 500\r\n"
                     "x-ratelimit-limit-tokens: 30000\r\n"
                     "x-ratelimit-remaining-requests: %d\r\n"
                     "x-ratelimit-remaining-tokens: %d\r\n"
                     "x-ratelimit-reset-requests: 120ms\r\n"
                     "x-ratelimit-reset-tokens: 6ms\r\n\r\n",
                     rem_req, rem_tok);
    llmq_ratelimit_headers_init(&h);
    llmq_ratelimit_headers_feed_block(&h, text, (size_t)n, 0);
    assert_true(llmq_ratelimit_headers_get(&h, LLMQ_RLH_REMAINING_TOKENS, NULL));
    return h;
}

static void test_first_sent_burst_skipped_then_sent_again(void **state)
{
    (void)state;
    int64_t sent = -1;
    struct llmq_ratelimit_headers h = headers(499, 29000);
    int64_t t0 = 1000000;
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &h, t0), 1); /* first since start */
    assert_int_equal(sent, t0);
    /* A burst of responses within the interval: skipped. */
    int skipped = 0;
    for (int64_t t = t0 + 1; t < t0 + LEARN_HEADERS_EVERY_MS; t += 3)
        skipped += llmq_worker_learn_send(&sent, 200, &h, t) == 0;
    assert_int_equal(skipped, (LEARN_HEADERS_EVERY_MS - 1 + 2) / 3);
    assert_int_equal(sent, t0); /* a skipped one does not move the interval */
    /* The first response once the interval has passed is sent. */
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &h, t0 + LEARN_HEADERS_EVERY_MS), 1);
    assert_int_equal(sent, t0 + LEARN_HEADERS_EVERY_MS);
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &h, t0 + LEARN_HEADERS_EVERY_MS + 1), 0);
}

static void test_zero_remaining_and_429_always_sent(void **state)
{
    (void)state;
    int64_t sent = -1;
    struct llmq_ratelimit_headers h = headers(499, 29000);
    struct llmq_ratelimit_headers no_tokens = headers(499, 0);
    struct llmq_ratelimit_headers no_requests = headers(0, 29000);
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &h, 5000), 1);
    /* Within the interval, each of these is sent, and restarts it. */
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &no_tokens, 5001), 1);
    assert_int_equal(sent, 5001);
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &no_requests, 5002), 1);
    assert_int_equal(llmq_worker_learn_send(&sent, 429, &h, 5003), 1);
    assert_int_equal(llmq_worker_learn_send(&sent, 429, &h, 5003), 1);
    assert_int_equal(sent, 5003);
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &h, 5004), 0);
    /* A 500 carrying headers is throttled like a 200. */
    assert_int_equal(llmq_worker_learn_send(&sent, 500, &h, 5005), 0);
}

static void test_no_headers_nothing_to_send(void **state)
{
    (void)state;
    int64_t sent = -1;
    struct llmq_ratelimit_headers none;
    llmq_ratelimit_headers_init(&none);
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &none, 10), 0);
    assert_int_equal(llmq_worker_learn_send(&sent, 429, &none, 10), 0);
    assert_int_equal(sent, -1); /* the first response with headers is still sent */
    struct llmq_ratelimit_headers h = headers(1, 1);
    assert_int_equal(llmq_worker_learn_send(&sent, 200, &h, 11), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_sent_burst_skipped_then_sent_again),
        cmocka_unit_test(test_zero_remaining_and_429_always_sent),
        cmocka_unit_test(test_no_headers_nothing_to_send),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
