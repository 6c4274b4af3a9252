/* openai-sim over real sockets: injected fault rates (roughly as
 * configured), connection resets, the access log as a test audits it
 * (one line per request, key hashed, job ids, spurious 429s told apart from
 * limit 429s, every line there after SIGTERM), and survival of garbage
 * bytes. Rate bounds are wide (beyond 5 sigma): no flaky thresholds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "openai_sim_support.h"

static const char body[] =
    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

/* Counts access-log lines by outcome; checks every line's fields. */
struct log_counts {
    int lines, ok, fail_500, fail_503, spurious, limit_requests, reset, bad;
};

static void read_log(const char *path, const char *key, struct log_counts *n)
{
    unsigned char sha[32];
    char want_key[9];
    SHA256((const unsigned char *)key, strlen(key), sha);
    snprintf(want_key, sizeof(want_key), "%02x%02x%02x%02x", sha[0], sha[1], sha[2], sha[3]);
    memset(n, 0, sizeof(*n));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    while (fgets(line, sizeof(line), f) != NULL) {
        assert_null(strstr(line, key)); /* never the key itself */
        json_t *j = json_loads(line, 0, NULL);
        assert_non_null(j);
        n->lines++;
        const char *o = sim_jstr(j, "outcome");
        assert_non_null(o);
        assert_true(sim_jint(j, "t_ms") > 0);
        assert_true(sim_jint(j, "latency_ms") >= 0);
        assert_true(sim_jint(j, "prompt_tokens") >= 0 && sim_jint(j, "charged_tokens") >= 0);
        assert_non_null(sim_jstr(j, "path"));
        if (strcmp(o, "bad_request") != 0) {
            assert_string_equal(sim_jstr(j, "key"), want_key);
            assert_string_equal(sim_jstr(j, "model"), "m");
            assert_non_null(strstr(sim_jstr(j, "client_request_id"), "job-"));
        }
        n->ok += strcmp(o, "ok") == 0;
        n->fail_500 += strcmp(o, "fail_500") == 0;
        n->fail_503 += strcmp(o, "fail_503") == 0;
        n->spurious += strcmp(o, "spurious_429") == 0;
        n->limit_requests += strcmp(o, "limit_requests") == 0;
        n->reset += strcmp(o, "reset") == 0;
        n->bad += strcmp(o, "bad_request") == 0;
        if (strcmp(o, "ok") == 0) {
            assert_int_equal(sim_jint(j, "status"), 200);
            assert_true(sim_jint(j, "completion_tokens") > 0);
        }
        json_decref(j);
    }
    fclose(f);
}

static void send_jobs(const struct sim_proc *p, int count, int *by_status)
{
    for (int i = 0; i < count; i++) {
        char id[64];
        snprintf(id, sizeof(id), "X-Client-Request-Id: job-%d", i);
        const char *const h[] = {"Authorization: Bearer sk-fault-key", id, NULL};
        struct sim_resp r;
        sim_http(p, "/v1/chat/completions", body, h, &r);
        if (r.rc != CURLE_OK)
            by_status[0]++;
        else if (r.status >= 100 && r.status < 600)
            by_status[r.status]++;
        sim_resp_free(&r);
    }
}

static void test_fault_rates_and_log(void **state)
{
    (void)state;
    struct sim_proc p;
    static int by_status[600];
    const char *const args[] = {"--fail-500",     "20", "--fail-503", "10",
                                "--spurious-429", "10", "--rpm",      "1000000",
                                "--seed",         "7",  NULL};
    assert_int_equal(sim_proc_start(&p, args), 0);
    send_jobs(&p, 1000, by_status);
    assert_int_equal(sim_proc_stop(&p), 0);
    /* 500: 200 expected (sd 12.6); 503: 100 (sd 9.5); spurious: 10% of ~700 (sd 7.9) */
    assert_in_range(by_status[500], 130, 270);
    assert_in_range(by_status[503], 50, 150);
    assert_in_range(by_status[429], 30, 110);
    assert_int_equal(by_status[0], 0);
    struct log_counts n;
    read_log(p.log_file, "sk-fault-key", &n);
    assert_int_equal(n.lines, 1000);
    assert_int_equal(n.fail_500, by_status[500]);
    assert_int_equal(n.fail_503, by_status[503]);
    assert_int_equal(n.spurious, by_status[429]); /* told apart from limit 429s */
    assert_int_equal(n.limit_requests, 0);
    assert_int_equal(n.ok, by_status[200]);
    unlink(p.log_file);
}

static void test_limit_429s_in_log(void **state)
{
    (void)state;
    struct sim_proc p;
    static int by_status[600];
    const char *const args[] = {"--rpm", "10", "--spurious-429", "0", NULL};
    assert_int_equal(sim_proc_start(&p, args), 0);
    send_jobs(&p, 30, by_status);
    assert_int_equal(sim_proc_stop(&p), 0);
    assert_int_equal(by_status[200], 10);
    assert_int_equal(by_status[429], 20);
    struct log_counts n;
    read_log(p.log_file, "sk-fault-key", &n);
    assert_int_equal(n.limit_requests, 20);
    assert_int_equal(n.spurious, 0);
    unlink(p.log_file);
}

static void test_resets(void **state)
{
    (void)state;
    struct sim_proc p;
    static int by_status[600];
    const char *const args[] = {"--reset", "30", "--seed", "3", NULL};
    assert_int_equal(sim_proc_start(&p, args), 0);
    send_jobs(&p, 300, by_status); /* on one reused keep-alive connection */
    assert_int_equal(sim_proc_stop(&p), 0);
    assert_in_range(by_status[0], 50, 130); /* 90 expected, sd 7.9 */
    assert_int_equal(by_status[0] + by_status[200], 300);
    struct log_counts n;
    read_log(p.log_file, "sk-fault-key", &n);
    assert_int_equal(n.reset, by_status[0]);
    unlink(p.log_file);
}

/* Sends bytes on a fresh connection and reads what comes back (up to 4 KiB). */
static size_t raw_exchange(int port, const void *data, size_t n, char *reply, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)send(fd, data, n, MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < cap && (k = recv(fd, reply + got, cap - 1 - got, 0)) > 0)
        got += (size_t)k;
    reply[got] = '\0';
    close(fd);
    return got;
}

static void test_garbage_survival(void **state)
{
    (void)state;
    struct sim_proc p;
    char reply[4096];
    assert_int_equal(sim_proc_start(&p, NULL), 0);
/* A request sent whole must be answered; a half-sent one (the body shorter
 * than its Content-Length when the client closes) may get nothing. */
#define WHOLE(s)                                                                                   \
    {                                                                                              \
        s, sizeof(s) - 1, 1                                                                        \
    } /* keeps embedded NUL bytes */
#define HALF(s)                                                                                    \
    {                                                                                              \
        s, sizeof(s) - 1, 0                                                                        \
    }
    static const struct {
        const char *data;
        size_t len;
        int whole;
    } cases[] = {
        WHOLE("\r\n\r\n"),
        WHOLE("GET\r\n\r\n"),
        WHOLE("POST /v1/chat/completions HTTP/9.9\r\n\r\n"),
        WHOLE("POST /v1/chat/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n"),
        WHOLE("POST /v1/x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
        WHOLE("POST /v1/chat/completions HTTP/1.1\r\n folded: x\r\n\r\n"),
        WHOLE("POST /v1/x HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"),
        WHOLE("POST /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        WHOLE("POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 4\r\n\r\n\xff\xfe\x00\x01"),
        HALF("POST /v1/embeddings HTTP/1.1\r\nContent-Length: 12\r\n\r\n{\"input\":[["),
    };
#undef WHOLE
#undef HALF
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t got = raw_exchange(p.port, cases[i].data, cases[i].len, reply, sizeof(reply));
        if (got == 0 && !cases[i].whole)
            continue;
        /* Any answer is an error status line. */
        if (strncmp(reply, "HTTP/1.1 4", 10) != 0 && strncmp(reply, "HTTP/1.1 5", 10) != 0)
            fail_msg("case %zu: answer '%.40s' (%zu bytes), want a 4xx/5xx status line", i, reply,
                     got);
    }
    /* Random bytes, seeded, in many sizes; and a head larger than the limit. */
    static char junk[80000];
    unsigned s = 12345;
    for (int round = 0; round < 40; round++) {
        size_t n = (size_t)(round * 997 % 5000) + 1;
        for (size_t k = 0; k < n; k++) {
            s = s * 1103515245u + 12345u;
            junk[k] = (char)(s >> 16);
        }
        raw_exchange(p.port, junk, n, reply, sizeof(reply));
    }
    memcpy(junk, "POST / HTTP/1.1\r\nX: ", 20);
    memset(junk + 20, 'a', sizeof(junk) - 20);
    raw_exchange(p.port, junk, sizeof(junk), reply, sizeof(reply));
    assert_int_equal(strncmp(reply, "HTTP/1.1 431", 12), 0);
    /* still answering */
    struct sim_resp r;
    sim_http(&p, "/v1/chat/completions", body, NULL, &r);
    assert_int_equal(r.status, 200);
    sim_resp_free(&r);
    assert_int_equal(sim_proc_stop(&p), 0);
    unlink(p.log_file);
}

static void test_idle_timeout_closes(void **state)
{
    (void)state;
    struct sim_proc p;
    char reply[4096];
    const char *const args[] = {"--idle-timeout-ms", "100", NULL};
    assert_int_equal(sim_proc_start(&p, args), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)p.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {30, 0}; /* a hang guard only */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(send(fd, req, sizeof(req) - 1, 0), (ssize_t)(sizeof(req) - 1));
    ssize_t k, got = 0;
    while ((k = recv(fd, reply + got, sizeof(reply) - 1 - (size_t)got, 0)) > 0)
        got += k;
    assert_int_equal(k, 0); /* the server closed the idle keep-alive connection */
    reply[got] = '\0';
    assert_int_equal(strncmp(reply, "HTTP/1.1 200", 12), 0);
    close(fd);
    assert_int_equal(sim_proc_stop(&p), 0);
    unlink(p.log_file);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fault_rates_and_log),
        cmocka_unit_test(test_limit_429s_in_log),
        cmocka_unit_test(test_resets),
        cmocka_unit_test(test_garbage_survival),
        cmocka_unit_test(test_idle_timeout_closes),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
