/* The stream relay's messages (jobs/stream_relay.h): frames written by the
 * encoder read back whole with their attempt, several in one message,
 * payloads with any bytes; a head without an attempt (an earlier worker's)
 * reads as attempt 0-0; attempts ordered by their entry ids; what a decoder
 * refuses (a bad kind, sender, id, attempt, number, a payload longer than
 * the message), and cancels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/stream_relay.h"

/* Appends a frame to m at *len. */
static void add(char *m, size_t *len, char kind, long long seq, const char *id, const char *pl,
                size_t pn)
{
    int k = llmq_relay_frame_head(m + *len, 4096 - *len, kind, seq, id, "1733500000000-2", pn);
    assert_true(k > 0);
    *len += (size_t)k;
    memcpy(m + *len, pl, pn);
    *len += pn;
}

static void test_round_trip(void **state)
{
    (void)state;
    char m[4096];
    size_t len = (size_t)snprintf(m, sizeof(m), "host-12\n");
    const char nul_pl[] = "data: {\"a\":\"x\\n\"}\n\n\0data: [DONE]\n\n";
    add(m, &len, 's', 0, "job-a", "", 0);
    add(m, &len, 'd', 1, "job-a", nul_pl, sizeof(nul_pl) - 1);
    add(m, &len, 'e', 7, "batch_x.line%201", "tail\n\n", 6);
    const char *name;
    size_t name_len;
    long off = llmq_relay_sender(m, len, &name, &name_len);
    assert_int_equal(off, 8);
    assert_int_equal(name_len, 7);
    assert_memory_equal(name, "host-12", 7);
    size_t o = (size_t)off;
    struct llmq_relay_frame f;
    assert_int_equal(llmq_relay_frame_next(m, len, &o, &f), 1);
    assert_int_equal(f.kind, 's');
    assert_int_equal(f.seq, 0);
    assert_int_equal(f.attempt.ms, 1733500000000LL);
    assert_int_equal(f.attempt.n, 2);
    assert_int_equal(f.job_id_len, 5);
    assert_memory_equal(f.job_id, "job-a", 5);
    assert_int_equal(f.payload_len, 0);
    assert_int_equal(llmq_relay_frame_next(m, len, &o, &f), 1);
    assert_int_equal(f.kind, 'd');
    assert_int_equal(f.seq, 1);
    assert_int_equal(f.payload_len, sizeof(nul_pl) - 1);
    assert_memory_equal(f.payload, nul_pl, sizeof(nul_pl) - 1);
    assert_int_equal(llmq_relay_frame_next(m, len, &o, &f), 1);
    assert_int_equal(f.kind, 'e');
    assert_int_equal(f.seq, 7);
    assert_memory_equal(f.job_id, "batch_x.line%201", f.job_id_len);
    assert_memory_equal(f.payload, "tail\n\n", 6);
    assert_int_equal(llmq_relay_frame_next(m, len, &o, &f), 0);
}

static int frame_of(const char *text)
{
    size_t o = 0;
    struct llmq_relay_frame f;
    return llmq_relay_frame_next(text, strlen(text), &o, &f);
}

static void test_refusals(void **state)
{
    (void)state;
    char h[LLMQ_RELAY_HEAD_MAX];
    assert_int_equal(llmq_relay_frame_head(h, sizeof(h), 'q', 0, "a", "1-0", 0), -1);
    assert_int_equal(llmq_relay_frame_head(h, sizeof(h), 'd', -1, "a", "1-0", 0), -1);
    assert_int_equal(llmq_relay_frame_head(h, sizeof(h), 'd', 0, "a b", "1-0", 0), -1);
    assert_int_equal(llmq_relay_frame_head(h, sizeof(h), 'd', 0, "", "1-0", 0), -1);
    assert_int_equal(llmq_relay_frame_head(h, 4, 'd', 0, "abc", "1-0", 0), -1);
    assert_int_equal(llmq_relay_frame_head(h, sizeof(h), 'd', 0, "a", NULL, 0), -1);
    assert_int_equal(llmq_relay_frame_head(h, sizeof(h), 'd', 0, "a", "", 0), -1);
    assert_int_equal(llmq_relay_frame_head(h, sizeof(h), 'd', 0, "a", "12", 0), -1);
    assert_int_equal(llmq_relay_frame_head(h, sizeof(h), 'd', 0, "a", "1-x", 0), -1);
    assert_int_equal(frame_of("d1 a 3\nabc"), 1);
    assert_int_equal(frame_of("d1 a 5-6 3\nabc"), 1);
    assert_int_equal(frame_of("d1 a 5- 3\nabc"), -1); /* attempt */
    assert_int_equal(frame_of("d1 a -6 3\nabc"), -1);
    assert_int_equal(frame_of("d1 a 56 3\nabc"), -1);
    assert_int_equal(frame_of("d1 a 5-6 x 3\nabc"), -1);
    assert_int_equal(frame_of("d1 a 5-6  3\nabc"), -1);
    assert_int_equal(frame_of("q1 a 3\nabc"), -1);  /* kind */
    assert_int_equal(frame_of("d-1 a 3\nabc"), -1); /* seq */
    assert_int_equal(frame_of("d a 3\nabc"), -1);
    assert_int_equal(frame_of("d1 a 4\nabc"), -1); /* longer than the message */
    assert_int_equal(frame_of("d1 a x\nabc"), -1);
    assert_int_equal(frame_of("d1 a{b 3\nabc"), -1); /* id */
    assert_int_equal(frame_of("d1  3\nabc"), -1);
    assert_int_equal(frame_of("d1 a 3"), -1);
    assert_int_equal(frame_of("d"), -1);
    assert_int_equal(frame_of("d1 a 99999999999999999999\nabc"), -1);
    const char *name;
    size_t nl;
    assert_int_equal(llmq_relay_sender("no newline", 10, &name, &nl), -1);
    assert_int_equal(llmq_relay_sender("\nd0 a 0\n", 8, &name, &nl), -1);
    assert_int_equal(llmq_relay_sender("a b\n", 4, &name, &nl), -1);
    char nul[] = "a\0b\n";
    assert_int_equal(llmq_relay_sender(nul, 4, &name, &nl), -1);
}

static void test_attempts(void **state)
{
    (void)state;
    size_t o = 0;
    struct llmq_relay_frame f;
    const char *old = "d3 job 9\n123456789";
    assert_int_equal(llmq_relay_frame_next(old, strlen(old), &o, &f), 1);
    assert_int_equal(f.attempt.ms, 0);
    assert_int_equal(f.attempt.n, 0);
    assert_int_equal(f.payload_len, 9);
    struct llmq_relay_attempt a, b;
    assert_int_equal(llmq_relay_attempt_parse("1733500000000-9", 15, &a), 0);
    assert_int_equal(llmq_relay_attempt_parse("1733500000001-0", 15, &b), 0);
    assert_true(llmq_relay_attempt_cmp(&a, &b) < 0);
    assert_true(llmq_relay_attempt_cmp(&b, &a) > 0);
    assert_int_equal(llmq_relay_attempt_cmp(&a, &a), 0);
    assert_int_equal(llmq_relay_attempt_parse("1733500000000-10", 16, &b), 0);
    assert_true(llmq_relay_attempt_cmp(&a, &b) < 0); /* by number, not text */
    assert_int_equal(llmq_relay_attempt_parse("1-2-3", 5, &a), -1);
    assert_int_equal(llmq_relay_attempt_parse("-", 1, &a), -1);
}

static void test_cancel(void **state)
{
    (void)state;
    char m[64];
    int k = llmq_relay_cancel_encode(m, sizeof(m), "job-9");
    assert_int_equal(k, 7);
    const char *id;
    size_t n;
    assert_int_equal(llmq_relay_cancel_decode(m, (size_t)k, &id, &n), 0);
    assert_int_equal(n, 5);
    assert_memory_equal(id, "job-9", 5);
    assert_int_equal(llmq_relay_cancel_decode("x job", 5, &id, &n), -1);
    assert_int_equal(llmq_relay_cancel_decode("c ", 2, &id, &n), -1);
    assert_int_equal(llmq_relay_cancel_decode("c a b", 5, &id, &n), -1);
    assert_int_equal(llmq_relay_cancel_encode(m, sizeof(m), "a b"), -1);
    assert_int_equal(llmq_relay_cancel_encode(m, 4, "job-9"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_attempts),
        cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
