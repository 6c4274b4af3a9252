/* openai-sim's request-head parser (http.c): valid heads and their spans,
 * incomplete heads, and each kind of malformed head with its status; then
 * seeded random bytes, which must never crash it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "../http.h"

static enum sim_http_rc parse(const char *s, struct sim_http_req *r, int *status)
{
    const char *why = NULL;
    return sim_http_parse_head(s, strlen(s), 65536, 1000, r, status, &why);
}

static void test_valid_head(void **state)
{
    (void)state;
    struct sim_http_req r;
    int st = 0;
    const char *s = "POST /openai/deployments/d/chat/completions?api-version=1 HTTP/1.1\r\n"
                    "Host: x\r\nauthorization:  Bearer sk-1 \r\nAPI-Key: k\r\n"
                    "X-Client-Request-Id: job-7\r\nContent-Length: 12\r\n"
                    "Content-Length: 12\r\n\r\n{\"a\":1}";
    assert_int_equal(parse(s, &r, &st), SIM_HTTP_HEAD_OK);
    assert_true(sim_span_eq(s, r.method, "POST"));
    assert_true(sim_span_eq(s, r.path, "/openai/deployments/d/chat/completions"));
    assert_true(sim_span_eq(s, r.query, "api-version=1"));
    assert_true(sim_span_eq(s, r.auth, "Bearer sk-1"));
    assert_true(sim_span_eq(s, r.api_key, "k"));
    assert_true(sim_span_eq(s, r.client_request_id, "job-7"));
    assert_int_equal(r.content_length, 12);
    assert_int_equal(r.keep_alive, 1);
    assert_int_equal(s[r.head_len], '{');
}

static void test_keep_alive_rules(void **state)
{
    (void)state;
    struct sim_http_req r;
    int st = 0;
    assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", &r, &st), SIM_HTTP_HEAD_OK);
    assert_int_equal(r.keep_alive, 0);
    assert_int_equal(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r, &st),
                     SIM_HTTP_HEAD_OK);
    assert_int_equal(r.keep_alive, 1);
    assert_int_equal(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", &r, &st),
                     SIM_HTTP_HEAD_OK);
    assert_int_equal(r.keep_alive, 0);
    assert_int_equal(r.content_length, -1);
}

static void test_incomplete_and_bad_heads(void **state)
{
    (void)state;
    struct sim_http_req r;
    int st = 0;
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: x\r\n", &r, &st), SIM_HTTP_NEED_MORE);
    assert_int_equal(parse("", &r, &st), SIM_HTTP_NEED_MORE);
    static const struct {
        const char *head;
        int status;
    } bad[] = {
        {"\r\n\r\n", 400},
        {"POST\r\n\r\n", 400},
        {"POST x HTTP/1.1\r\n\r\n", 400},
        {"POST / HTTP/1.1 \r\n\r\n", 400},
        {"POST / HTTP/2.0\r\n\r\n", 400},
        {"POST / HTTP/1.2\r\n\r\n", 505},
        {"POST / HTTP/1.1\r\n folded\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nNoColon\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nBad Name: 1\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nX: a\x01"
         "b\r\n\r\n",
         400},
        {"POST / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411},
        {"POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n", 417},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        st = 0;
        assert_int_equal(parse(bad[i].head, &r, &st), SIM_HTTP_ERROR);
        assert_int_equal(st, bad[i].status);
    }
    static char big[70000];
    memset(big, 'a', sizeof(big) - 1);
    assert_int_equal(parse(big, &r, &st), SIM_HTTP_ERROR);
    assert_int_equal(st, 431);
}

static void test_random_bytes_never_crash(void **state)
{
    (void)state;
    static const char seed[] = "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n"
                               "Authorization: Bearer k\r\n\r\nhello";
    char buf[sizeof(seed)];
    uint32_t x = 2463534242u;
    struct sim_http_req r;
    for (int round = 0; round < 20000; round++) {
        memcpy(buf, seed, sizeof(seed));
        for (int k = 0; k < 4; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            buf[x % (sizeof(seed) - 1)] = (char)(x >> 24);
        }
        size_t n = (x >> 8) % sizeof(seed);
        int st = 0;
        const char *why = NULL;
        enum sim_http_rc rc = sim_http_parse_head(buf, n, 65536, 1000, &r, &st, &why);
        if (rc == SIM_HTTP_HEAD_OK)
            assert_true(r.head_len <= n);
        if (rc == SIM_HTTP_ERROR)
            assert_true(st >= 400 && st < 600);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_head),
        cmocka_unit_test(test_keep_alive_rules),
        cmocka_unit_test(test_incomplete_and_bad_heads),
        cmocka_unit_test(test_random_bytes_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
