/* Integration test of the worker's HTTP client (worker/http/) on a libev
 * loop against tests/http_testserver (started here on a free loopback port):
 * many concurrent requests each complete exactly once and never inside
 * submit, callbacks may submit more, timeouts fire, resets and refused
 * connections are reported as such, oversized bodies are cut with an error,
 * headers and usage are parsed, and free cancels every pending transfer
 * exactly once (also when called from inside a callback). No Redis needed. */
#include <curl/curl.h>
#include <ev.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "openai/errorbody.h"
#include "http/http.h"
#include "testsupport.h"
#include "openai/usage.h"

#define API_KEY "sk-test-0123456789"

static pid_t server_pid;
static pid_t helper_pid; /* a per-test server still running (killed at teardown) */
static int server_port;
static char base_url[64];

/* Waits up to 5 s for the server pid to write its port into path; returns
 * it, or <= 0. */
static int wait_port_file(const char *path, pid_t pid)
{
    int port = llmq_test_wait_port_file(path, pid, 5000);
    unlink(path);
    return port;
}

static int start_server(void **state)
{
    (void)state;
    char port_file[128];
    snprintf(port_file, sizeof(port_file), "/tmp/llmq-http-test-%d.port", (int)getpid());
    unlink(port_file);
    const char *bin = llmq_test_bin("http_testserver", 1);
    server_pid = llmq_test_fork();
    if (server_pid == 0) {
        execl(bin, bin, "--port", "0", "--port-file", port_file, (char *)NULL);
        _exit(127);
    }
    server_port = wait_port_file(port_file, server_pid);
    if (server_port <= 0) {
        fprintf(stderr, "http_client: %s did not start\n", bin);
        return -1;
    }
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", server_port);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int stop_server(void **state)
{
    (void)state;
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
    if (helper_pid > 0) {
        kill(helper_pid, SIGTERM);
        waitpid(helper_pid, NULL, 0);
    }
    curl_global_cleanup();
    return 0;
}

/* ---- one test's context ---- */

#define MAX_REQ 2000

struct ctx {
    struct ev_loop *loop;
    struct llmq_http *http;
    int submitting;         /* set around llmq_http_submit: a callback then is a bug */
    int calls[MAX_REQ * 2]; /* callback runs per request (follow-ups from MAX_REQ on) */
    enum llmq_http_outcome outcome[MAX_REQ * 2];
    long status[MAX_REQ * 2];
    int done, expected;
    int follow_ups;       /* callbacks still allowed to submit a follow-up */
    int free_in_callback; /* free the client from the first OK callback */
    int bad;              /* a check inside a callback failed */
    struct llmq_ratelimit_headers last_headers;
    struct llmq_usage last_usage;
    struct llmq_errorbody last_error;
    char last_echo[256];
    char last_body[512];
    long last_version;
    char *taken;
    size_t body_len[MAX_REQ * 2];
    int sent[MAX_REQ * 2];
};

struct req_tag {
    struct ctx *c;
    int i;
    char id[32];
};

static struct req_tag tags[MAX_REQ * 2];

/* The decimal number at s. */
static int parse_int(const char *s)
{
    return (int)strtol(s, NULL, 10);
}

static void on_done(struct llmq_http_response *resp, void *privdata);

static void submit_one(struct ctx *c, int i, const char *path, long timeout_ms)
{
    struct req_tag *t = &tags[i];
    t->c = c;
    t->i = i;
    snprintf(t->id, sizeof(t->id), "job-%d", i);
    char url[256];
    snprintf(url, sizeof(url), "%s%s", base_url, path);
    const char *body = "{\"model\":\"gpt-4o-mini\",\"messages\":[]}";
    struct llmq_http_request req = {
        .url = url,
        .body = body,
        .body_len = strlen(body),
        .auth = LLMQ_HTTP_AUTH_BEARER,
        .api_key = API_KEY,
        .client_request_id = t->id,
        .timeout_ms = timeout_ms,
    };
    struct llmq_error err;
    c->submitting = 1;
    enum llmq_rc rc = llmq_http_submit(c->http, &req, on_done, t, &err);
    c->submitting = 0;
    if (rc != LLMQ_OK)
        fail_msg("submit %d: %s", i, err.msg);
}

static void on_done(struct llmq_http_response *resp, void *privdata)
{
    struct req_tag *t = privdata;
    struct ctx *c = t->c;
    if (c->submitting)
        c->bad = 1; /* ran inside submit */
    c->calls[t->i]++;
    if (getenv("HTTP_DEBUG"))
        fprintf(stderr, "done %d at %lld: %s %s\n", t->i, llmq_test_now_ms(),
                llmq_http_outcome_name(resp->outcome), resp->error);
    c->outcome[t->i] = resp->outcome;
    c->status[t->i] = resp->status;
    c->body_len[t->i] = resp->body_len;
    c->sent[t->i] = resp->request_sent;
    c->done++;
    if (resp->body == NULL || resp->body[resp->body_len] != '\0' || resp->error == NULL)
        c->bad = 1;
    if (resp->outcome == LLMQ_HTTP_OK) {
        c->last_headers = resp->headers;
        llmq_usage_parse(resp->body, resp->body_len, &c->last_usage);
        snprintf(c->last_body, sizeof(c->last_body), "%s", resp->body);
        c->last_version = resp->http_version;
        llmq_errorbody_classify((int)resp->status, resp->body, resp->body_len, &c->last_error);
        char want[64];
        snprintf(want, sizeof(want), "\"echo_id\":\"%s\"", t->id);
        if (resp->status == 200 && strstr(resp->body, "echo_id") && !strstr(resp->body, want))
            c->bad = 1;
        const char *a = strstr(resp->body, "\"echo_auth\":\"");
        if (a != NULL)
            snprintf(c->last_echo, sizeof(c->last_echo), "%.*s", (int)strcspn(a + 13, "\""),
                     a + 13);
    }
    if (c->follow_ups > 0 && t->i < MAX_REQ / 2) {
        c->follow_ups--;
        submit_one(c, t->i + MAX_REQ, "/ok", 0); /* re-entrant submit from a callback */
    }
    if (c->free_in_callback && resp->outcome == LLMQ_HTTP_OK) {
        c->free_in_callback = 0;
        llmq_http_free(c->http);
        c->http = NULL;
    }
}

static void guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static void check_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)revents;
    struct ctx *c = w->data;
    if (c->done >= c->expected)
        ev_break(loop, EVBREAK_ALL);
}

/* Runs loop until check (an ev_prepare callback, given data) breaks it or
 * limit_s passed. */
static void run_until_checked(struct ev_loop *loop,
                              void (*check)(struct ev_loop *, ev_prepare *, int), void *data,
                              double limit_s)
{
    ev_timer guard;
    ev_timer_init(&guard, guard_cb, limit_s, 0.);
    ev_timer_start(loop, &guard);
    ev_prepare chk;
    ev_prepare_init(&chk, check);
    chk.data = data;
    ev_prepare_start(loop, &chk);
    ev_run(loop, 0);
    ev_prepare_stop(loop, &chk);
    ev_timer_stop(loop, &guard);
}

/* Runs the loop until `expected` callbacks ran or limit_s passed. */
static void run_until_done(struct ctx *c, double limit_s)
{
    if (c->done < c->expected)
        run_until_checked(c->loop, check_cb, c, limit_s);
}

static struct ctx *ctx_new(const struct llmq_http_config *cfg)
{
    static struct ctx c;
    memset(&c, 0, sizeof(c));
    c.loop = ev_loop_new(EVFLAG_AUTO);
    struct llmq_error err;
    c.http = llmq_http_new(c.loop, cfg, &err);
    if (c.http == NULL)
        fail_msg("llmq_http_new: %s", err.msg);
    return &c;
}

static void ctx_free(struct ctx *c)
{
    llmq_http_free(c->http);
    ev_loop_destroy(c->loop);
}

/* ---- tests ---- */

static void test_many_concurrent(void **state)
{
    (void)state;
    struct llmq_http_config cfg = {.max_connections = 600, .version = LLMQ_HTTP_1_1};
    struct ctx *c = ctx_new(&cfg);
    const int n = 500, follow = 50;
    c->follow_ups = follow;
    c->expected = n + follow;
    for (int i = 0; i < n; i++)
        submit_one(c, i, "/ok?delay=100", 0);
    assert_int_equal(llmq_http_inflight(c->http), n);
    for (int i = 0; i < n; i++)
        assert_int_equal(c->calls[i], 0); /* nothing ran inside submit */
    run_until_done(c, 20.0);
    assert_int_equal(c->done, n + follow);
    assert_false(c->bad);
    for (int i = 0; i < n; i++) {
        assert_int_equal(c->calls[i], 1);
        assert_int_equal(c->outcome[i], LLMQ_HTTP_OK);
        assert_int_equal(c->status[i], 200);
    }
    int follow_calls = 0;
    for (int i = MAX_REQ; i < MAX_REQ * 2; i++) {
        assert_true(c->calls[i] <= 1);
        follow_calls += c->calls[i];
        if (c->calls[i])
            assert_int_equal(c->status[i], 200);
    }
    assert_int_equal(follow_calls, follow);
    assert_int_equal(llmq_http_inflight(c->http), 0);
    /* Headers and body parsed. */
    int64_t v;
    assert_true(llmq_ratelimit_headers_get(&c->last_headers, LLMQ_RLH_LIMIT_REQUESTS, &v));
    assert_int_equal(v, 500);
    assert_true(llmq_ratelimit_headers_get(&c->last_headers, LLMQ_RLH_RESET_TOKENS_MS, &v));
    assert_int_equal(v, 360000);
    assert_true(llmq_ratelimit_headers_get(&c->last_headers, LLMQ_RLH_RESET_REQUESTS_MS, &v));
    assert_int_equal(v, 120);
    assert_string_equal(c->last_headers.request_id, "req_test123");
    assert_int_equal(c->last_usage.total_tokens, 15);
    assert_string_equal(c->last_echo, "Bearer " API_KEY);
    assert_int_equal(c->last_error.kind, LLMQ_ERRORBODY_OK);
    ctx_free(c);
}

static void test_timeout(void **state)
{
    (void)state;
    struct ctx *c = ctx_new(NULL);
    c->expected = 2;
    long long t0 = llmq_test_now_ms();
    submit_one(c, 0, "/hang", 300);
    submit_one(c, 1, "/ok?delay=2000", 200);
    run_until_done(c, 10.0);
    long long took = llmq_test_now_ms() - t0;
    assert_int_equal(c->calls[0], 1);
    assert_int_equal(c->calls[1], 1);
    assert_int_equal(c->outcome[0], LLMQ_HTTP_TIMEOUT);
    assert_int_equal(c->outcome[1], LLMQ_HTTP_TIMEOUT);
    if (took < 280 || took >= 2000)
        fail_msg("timeouts took %lld ms", took);
    ctx_free(c);
}

static void test_reset_and_refused(void **state)
{
    (void)state;
    struct ctx *c = ctx_new(NULL);
    c->expected = 2;
    submit_one(c, 0, "/reset", 0);
    /* A port nobody listens on. */
    int closed = llmq_test_free_port();
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/ok", closed);
    struct req_tag *t = &tags[1];
    t->c = c;
    t->i = 1;
    snprintf(t->id, sizeof(t->id), "job-1");
    struct llmq_http_request req = {.url = url, .auth = LLMQ_HTTP_AUTH_NONE};
    assert_int_equal(llmq_http_submit(c->http, &req, on_done, t, NULL), LLMQ_OK);
    run_until_done(c, 10.0);
    assert_int_equal(c->calls[0], 1);
    assert_int_equal(c->calls[1], 1);
    assert_int_equal(c->outcome[0], LLMQ_HTTP_RESET);
    assert_int_equal(c->outcome[1], LLMQ_HTTP_CONNECT_ERROR);
    ctx_free(c);
}

static void test_too_big(void **state)
{
    (void)state;
    struct llmq_http_config cfg = {.max_body_bytes = 65536};
    struct ctx *c = ctx_new(&cfg);
    c->expected = 4;
    submit_one(c, 0, "/big?bytes=1000000", 0);           /* Content-Length over the limit */
    submit_one(c, 1, "/big?bytes=1000000&chunked=1", 0); /* discovered while receiving */
    submit_one(c, 2, "/big?bytes=65536&chunked=1", 0);   /* exactly the limit: fine */
    submit_one(c, 3, "/big?bytes=65537", 0);
    run_until_done(c, 10.0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(c->calls[i], 1);
    assert_int_equal(c->outcome[0], LLMQ_HTTP_TOO_BIG);
    assert_int_equal(c->outcome[1], LLMQ_HTTP_TOO_BIG);
    assert_true(c->body_len[1] <= 65536);
    assert_int_equal(c->outcome[2], LLMQ_HTTP_OK);
    assert_int_equal(c->body_len[2], 65536);
    assert_int_equal(c->outcome[3], LLMQ_HTTP_TOO_BIG);
    ctx_free(c);
}

static void test_status_and_sse(void **state)
{
    (void)state;
    struct ctx *c = ctx_new(NULL);
    c->expected = 1;
    submit_one(c, 0, "/status?code=429", 0);
    run_until_done(c, 10.0);
    assert_int_equal(c->outcome[0], LLMQ_HTTP_OK);
    assert_int_equal(c->status[0], 429);
    assert_int_equal(c->last_error.kind, LLMQ_ERRORBODY_RATE_LIMIT);
    assert_string_equal(c->last_error.code, "rate_limit_exceeded");
    assert_int_equal(llmq_ratelimit_headers_retry_hint_ms(&c->last_headers), 1500);
    int64_t v;
    assert_true(llmq_ratelimit_headers_get(&c->last_headers, LLMQ_RLH_SHOULD_RETRY, &v));
    assert_int_equal(v, 1);
    c->expected = 2;
    submit_one(c, 1, "/sse", 0);
    run_until_done(c, 10.0);
    assert_int_equal(c->status[1], 200);
    assert_int_equal(c->last_usage.total_tokens, 10);
    ctx_free(c);
}

static void take_cb(struct llmq_http_response *resp, void *privdata)
{
    struct ctx *c = privdata;
    size_t len = 0;
    c->taken = llmq_http_response_take_body(resp, &len);
    if (len != 5000)
        c->bad = 1;
    if (resp->body_len != 0 || resp->body == NULL || resp->body[0] != '\0')
        c->bad = 1;
    c->done++;
}

static void test_take_body(void **state)
{
    (void)state;
    struct ctx *c = ctx_new(NULL);
    char url[128];
    snprintf(url, sizeof(url), "%s/big?bytes=5000", base_url);
    struct llmq_http_request req = {.url = url, .auth = LLMQ_HTTP_AUTH_NONE};
    assert_int_equal(llmq_http_submit(c->http, &req, take_cb, c, NULL), LLMQ_OK);
    c->expected = 1;
    run_until_done(c, 10.0);
    assert_false(c->bad);
    assert_non_null(c->taken);
    assert_int_equal(strlen(c->taken), 5000);
    free(c->taken);
    ctx_free(c);
}

static void test_free_cancels(void **state)
{
    (void)state;
    struct ctx *c = ctx_new(NULL);
    for (int i = 0; i < 20; i++)
        submit_one(c, i, "/hang", 0);
    c->expected = 1000; /* never: run for the time limit */
    run_until_done(c, 0.2);
    assert_int_equal(c->done, 0);
    llmq_http_free(c->http);
    c->http = NULL;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(c->calls[i], 1);
        assert_int_equal(c->outcome[i], LLMQ_HTTP_CANCELLED);
    }
    /* Nothing of the client is left on the loop. */
    ev_run(c->loop, EVRUN_NOWAIT);
    assert_int_equal(ev_pending_count(c->loop), 0);
    ctx_free(c);
}

static void test_free_inside_callback(void **state)
{
    (void)state;
    struct ctx *c = ctx_new(NULL);
    for (int i = 0; i < 5; i++)
        submit_one(c, i, "/hang", 0);
    submit_one(c, 5, "/ok", 0);
    c->free_in_callback = 1;
    c->expected = 6;
    run_until_done(c, 10.0);
    if (c->http != NULL)
        fail_msg("not freed: done %d outcome[5] %s status %ld", c->done,
                 llmq_http_outcome_name(c->outcome[5]), c->status[5]);
    for (int i = 0; i < 6; i++)
        assert_int_equal(c->calls[i], 1);
    assert_int_equal(c->outcome[5], LLMQ_HTTP_OK);
    for (int i = 0; i < 5; i++)
        assert_int_equal(c->outcome[i], LLMQ_HTTP_CANCELLED);
    /* The loop has no watcher of ours left: it returns at once. */
    ev_run(c->loop, 0);
    ctx_free(c);
}

static void never_cb(struct llmq_http_response *resp, void *privdata)
{
    (void)resp;
    *(int *)privdata = 1;
}

static void test_submit_errors(void **state)
{
    (void)state;
    struct ctx *c = ctx_new(NULL);
    int ran = 0;
    struct llmq_error err;
    struct llmq_http_request req = {.url = NULL};
    assert_int_equal(llmq_http_submit(c->http, &req, never_cb, &ran, &err), LLMQ_EINVAL);
    req.url = base_url;
    req.auth = LLMQ_HTTP_AUTH_BEARER;
    assert_int_equal(llmq_http_submit(c->http, &req, never_cb, &ran, &err), LLMQ_EINVAL);
    req.api_key = API_KEY;
    req.client_request_id = "job\r\nX-Evil: 1";
    assert_int_equal(llmq_http_submit(c->http, &req, never_cb, &ran, &err), LLMQ_EINVAL);
    req.client_request_id = "job";
    const char *extra[] = {"no-colon", NULL};
    req.extra_headers = extra;
    assert_int_equal(llmq_http_submit(c->http, &req, never_cb, &ran, &err), LLMQ_EINVAL);
    req.extra_headers = NULL;
    req.url = "ftp://127.0.0.1/x";
    /* curl accepts the option and fails the transfer: reported through the callback. */
    assert_int_equal(llmq_http_submit(c->http, &req, never_cb, &ran, &err), LLMQ_OK);
    assert_int_equal(llmq_http_inflight(c->http), 1);
    ctx_free(c); /* cancels it: the callback runs once */
    assert_int_equal(ran, 1);
}

/* Writes a self-signed certificate for 127.0.0.1 to dir/cert.pem and
 * dir/key.pem with the openssl tool; returns 0, or -1 when that fails. */
static int make_cert(const char *dir, char *cert, size_t n)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s/key.pem -out %s/cert.pem -days 2 -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             dir, dir);
    if (system(cmd) != 0)
        return -1;
    snprintf(cert, n, "%s/cert.pem", dir);
    return 0;
}

static void remove_cert(const char *dir)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/key.pem", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/cert.pem", dir);
    unlink(path);
    rmdir(dir);
}

/* Runs `openssl s_server -www` (which answers no POST: a request over a good
 * handshake just waits) with a fresh self-signed certificate for 127.0.0.1.
 * Returns its port and fills pid and the certificate path; 0 when the
 * certificate could not be made, -1 when the server did not listen. */
static int start_tls_server(char *dir, pid_t *pid, char *cert, size_t n)
{
    if (make_cert(dir, cert, n) != 0)
        return 0;
    int port = llmq_test_free_port();
    char accept[64], key[512];
    snprintf(accept, sizeof(accept), "127.0.0.1:%d", port);
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    *pid = llmq_test_fork();
    if (*pid == 0) {
        if (freopen("/dev/null", "w", stdout) == NULL || freopen("/dev/null", "w", stderr) == NULL)
            _exit(127);
        execlp("openssl", "openssl", "s_server", "-accept", accept, "-cert", cert, "-key", key,
               "-www", "-quiet", (char *)NULL);
        _exit(127);
    }
    helper_pid = *pid;
    char probe[128];
    snprintf(probe, sizeof(probe), "exec 3<>/dev/tcp/127.0.0.1/%d", port);
    for (int i = 0; i < 300; i++) {
        char sh[256];
        snprintf(sh, sizeof(sh), "bash -c '%s' 2>/dev/null", probe);
        if (system(sh) == 0)
            return port;
        usleep(10000);
    }
    kill(*pid, SIGTERM);
    waitpid(*pid, NULL, 0);
    return -1;
}

static void test_tls_verification(void **state)
{
    (void)state;
    char dir[] = "/tmp/llmq-http-tls-XXXXXX";
    if (mkdtemp(dir) == NULL)
        fail_msg("mkdtemp");
    pid_t pid = 0;
    char cert[512];
    int port = start_tls_server(dir, &pid, cert, sizeof(cert));
    if (port == 0) {
        rmdir(dir);
        fail_msg("the openssl tool could not make a certificate (scripts/bootstrap installs "
                 "openssl)");
    }
    if (port < 0)
        fail_msg("openssl s_server did not start listening");
    char url[128];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1/chat/completions", port);
    for (int trusted = 0; trusted < 2; trusted++) {
        struct llmq_http_config cfg = {.ca_file = trusted ? cert : NULL};
        struct ctx *c = ctx_new(&cfg);
        struct req_tag *t = &tags[0];
        t->c = c;
        t->i = 0;
        struct llmq_http_request req = {
            .url = url, .auth = LLMQ_HTTP_AUTH_BEARER, .api_key = API_KEY, .timeout_ms = 3000};
        assert_int_equal(llmq_http_submit(c->http, &req, on_done, t, NULL), LLMQ_OK);
        c->expected = 1;
        run_until_done(c, 10.0);
        assert_int_equal(c->calls[0], 1);
        if (trusted) {
            /* Handshake verified, request sent, s_server never answers a POST. */
            assert_int_equal(c->outcome[0], LLMQ_HTTP_TIMEOUT);
            assert_int_equal(c->sent[0], 1);
        } else {
            assert_int_equal(c->outcome[0], LLMQ_HTTP_TLS_ERROR);
            assert_int_equal(c->sent[0], 0);
        }
        ctx_free(c);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    helper_pid = 0;
    remove_cert(dir);
}

/* End to end against openai-sim when it is built ($LLMQ_BIN_DIR/openai-sim):
 * usage from a JSON body and from an SSE stream with include_usage, the
 * x-ratelimit-* headers, and a 429 with its retry hint and error kind. */
static void test_openai_sim(void **state)
{
    (void)state;
    const char *bin = llmq_test_bin("openai-sim", 0);
    if (access(bin, X_OK) != 0)
        fail_msg("%s is not built", bin);
    char port_file[128];
    snprintf(port_file, sizeof(port_file), "/tmp/llmq-http-sim-%d.port", (int)getpid());
    unlink(port_file);
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        /* --prompt-count bytes: the usage asserted below is the bytes rule's. */
        execl(bin, bin, "--port", "0", "--port-file", port_file, "--rpm", "2", "--tpm", "100000",
              "--prompt-count", "bytes", "--quiet", (char *)NULL);
        _exit(127);
    }
    int port = wait_port_file(port_file, pid);
    assert_true(port > 0);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/chat/completions", port);
    const char *bodies[] = {
        "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],"
        "\"max_completion_tokens\":8}",
        "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],"
        "\"max_completion_tokens\":8,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
        "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
    };
    struct ctx *c = ctx_new(NULL);
    for (int i = 0; i < 3; i++) {
        struct req_tag *t = &tags[i];
        t->c = c;
        t->i = i;
        struct llmq_http_request req = {.url = url,
                                        .body = bodies[i],
                                        .body_len = strlen(bodies[i]),
                                        .auth = LLMQ_HTTP_AUTH_BEARER,
                                        .api_key = API_KEY,
                                        .client_request_id = "job-sim"};
        assert_int_equal(llmq_http_submit(c->http, &req, on_done, t, NULL), LLMQ_OK);
        c->expected = i + 1;
        run_until_done(c, 10.0); /* one at a time: the third meets the RPM limit */
        assert_int_equal(c->outcome[i], LLMQ_HTTP_OK);
        if (i < 2) {
            assert_int_equal(c->status[i], 200);
            assert_int_equal(c->last_usage.input_tokens, 3); /* "user"+"hello" = 9 bytes */
            assert_true(c->last_usage.output_tokens >= 1 && c->last_usage.output_tokens <= 8);
            assert_true(
                llmq_ratelimit_headers_get(&c->last_headers, LLMQ_RLH_LIMIT_REQUESTS, NULL));
            assert_true(c->last_headers.request_id[0] != '\0');
        }
    }
    assert_int_equal(c->status[2], 429);
    assert_int_equal(c->last_error.kind, LLMQ_ERRORBODY_RATE_LIMIT);
    assert_string_equal(c->last_error.code, "rate_limit_exceeded");
    assert_true(llmq_ratelimit_headers_retry_hint_ms(&c->last_headers) > 0);
    ctx_free(c);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    helper_pid = 0;
}

/* Starts tests/http_testserver/h2_server.mjs (node and openssl are
 * installed by scripts/bootstrap; without them the test fails, naming what
 * is missing) in a new directory dir (a mkdtemp template) with a new
 * certificate (its path into cert, 512 bytes), in mode "h2" or "h1" (HTTP/1.1
 * over TLS only); returns its port, its pid in helper_pid. */
static int start_node_tls(char *dir, char *cert, const char *mode)
{
    const char *src = getenv("LLMQ_SOURCE_DIR");
    char key[600], script[1024], port_file[700];
    if (src == NULL)
        fail_msg("LLMQ_SOURCE_DIR is not set (run under ctest)");
    if (system("node --version >/dev/null 2>&1") != 0)
        fail_msg("node is not on PATH (scripts/bootstrap installs nodejs)");
    if (mkdtemp(dir) == NULL)
        fail_msg("mkdtemp %s", dir);
    if (make_cert(dir, cert, 512) != 0) {
        rmdir(dir);
        fail_msg("the openssl tool could not make a certificate (scripts/bootstrap installs "
                 "openssl)");
    }
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    snprintf(port_file, sizeof(port_file), "%s/port", dir);
    snprintf(script, sizeof(script), "%s/tests/http_testserver/h2_server.mjs", src);
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        if (freopen("/dev/null", "w", stdout) == NULL)
            _exit(127);
        execlp("node", "node", script, port_file, cert, key, "0", "100", mode, (char *)NULL);
        _exit(127);
    }
    int port = wait_port_file(port_file, pid);
    helper_pid = pid;
    assert_true(port > 0);
    return port;
}

/* The TLS connections ("sessions") and requests ("streams") the node server
 * saw, from its /stats (request number i, on c), then stops it. */
static void node_tls_stats(struct ctx *c, int i, int *sessions, int *streams)
{
    c->expected = c->done + 1;
    submit_one(c, i, "/stats", 0);
    run_until_done(c, 10.0);
    kill(helper_pid, SIGTERM);
    waitpid(helper_pid, NULL, 0);
    helper_pid = 0;
    *sessions = *streams = -1;
    const char *p = strstr(c->last_body, "\"sessions\":");
    if (p != NULL)
        *sessions = parse_int(p + 11);
    p = strstr(c->last_body, "\"streams\":");
    if (p != NULL)
        *streams = parse_int(p + 10);
}

/* h2 over TLS against Node's http2 server: 150 concurrent requests are
 * multiplexed over ceil(150/100) connections. */
static void test_h2_multiplex(void **state)
{
    (void)state;
    char dir[] = "/tmp/llmq-http-h2-XXXXXX", cert[512];
    int port = start_node_tls(dir, cert, "h2");
    /* h2_host_connections bounds the connections curl 7.88 opens while the
     * next connection's capacity is unknown (see worker/http/http.h). */
    struct llmq_http_config cfg = {.ca_file = cert, .h2_host_connections = 2};
    struct ctx *c = ctx_new(&cfg);
    const int n = 150;
    snprintf(base_url, sizeof(base_url), "https://127.0.0.1:%d", port);
    for (int i = 0; i < n; i++)
        submit_one(c, i, "/v1/chat/completions?delay=300", 0);
    c->expected = n;
    run_until_done(c, 20.0);
    for (int i = 0; i < n; i++) {
        assert_int_equal(c->calls[i], 1);
        assert_int_equal(c->outcome[i], LLMQ_HTTP_OK);
        assert_int_equal(c->status[i], 200);
    }
    assert_false(c->bad);
    assert_int_equal(c->last_usage.total_tokens, 15);
    assert_string_equal(c->last_headers.request_id, "req_h2");
    assert_int_equal(c->last_version, CURL_HTTP_VERSION_2_0);
    int sessions, streams;
    node_tls_stats(c, n, &sessions, &streams);
    if (sessions < 1 || sessions > 2 || streams != n)
        fail_msg("h2: %d connections for %d streams (%s)", sessions, streams, c->last_body);
    ctx_free(c);
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", server_port);
    remove_cert(dir);
}

/* An https:// origin that negotiates HTTP/1.1 (no h2 in its ALPN) is
 * learned from its first answer: its calls then get a connection each (up
 * to max_connections), not the 2 sized for multiplexing. 40 requests held
 * 300 ms by the server all answer, and the server saw more than 2 TLS
 * connections; before, every request queued for the 2. Counted, not timed. */
static void test_h1_over_tls_learned(void **state)
{
    (void)state;
    char dir[] = "/tmp/llmq-http-h1tls-XXXXXX", cert[512];
    int port = start_node_tls(dir, cert, "h1");
    struct llmq_http_config cfg = {
        .ca_file = cert, .h2_host_connections = 2, .max_connections = 64};
    struct ctx *c = ctx_new(&cfg);
    const int n = 40;
    snprintf(base_url, sizeof(base_url), "https://127.0.0.1:%d", port);
    for (int i = 0; i < n; i++)
        submit_one(c, i, "/v1/chat/completions?delay=300", 0);
    c->expected = n;
    run_until_done(c, 30.0);
    for (int i = 0; i < n; i++) {
        assert_int_equal(c->calls[i], 1);
        assert_int_equal(c->outcome[i], LLMQ_HTTP_OK);
        assert_int_equal(c->status[i], 200);
    }
    assert_false(c->bad);
    assert_int_equal(c->last_version, CURL_HTTP_VERSION_1_1);
    int sessions, streams;
    node_tls_stats(c, n, &sessions, &streams);
    printf("# HTTP/1.1 over TLS: %d requests on %d connections\n", streams, sessions);
    assert_int_equal(streams, n);
    assert_true(sessions > 2);
    assert_true(sessions <= n + 3); /* the ones opened before it was learned, and /stats */
    ctx_free(c);
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", server_port);
    remove_cert(dir);
}

static void on_done_pool(struct llmq_http_response *resp, void *privdata)
{
    int *slot = privdata; /* [0] calls, [1] pool_full, [2] pool_ahead, [3] pool_connections */
    slot[0]++;
    slot[1] = resp->pool_full;
    slot[2] = (int)resp->pool_ahead;
    slot[3] = resp->pool_connections;
}

static void pool_check_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)revents;
    int(*slots)[4] = w->data;
    for (int i = 0; i < 5; i++)
        if (slots[i][0] == 0)
            return;
    ev_break(loop, EVBREAK_ALL);
}

/* A transfer submitted while every connection the client keeps to its
 * origin is taken says so (pool_full, with the transfers ahead and the
 * connections): 5 to one HTTP/1.1 origin with 2 connections, the first 2
 * have a connection, the other 3 wait. Decided at submit: no timing. */
static void test_pool_full_marked(void **state)
{
    (void)state;
    struct llmq_http_config cfg = {.max_connections = 2, .version = LLMQ_HTTP_1_1};
    struct ctx *c = ctx_new(&cfg);
    static int slots[5][4];
    memset(slots, 0, sizeof(slots));
    char url[256];
    snprintf(url, sizeof(url), "%s/ok?delay=200", base_url);
    for (int i = 0; i < 5; i++) {
        struct llmq_http_request req = {
            .url = url, .body = "{}", .body_len = 2, .auth = LLMQ_HTTP_AUTH_NONE};
        assert_int_equal(llmq_http_submit(c->http, &req, on_done_pool, slots[i], NULL), LLMQ_OK);
    }
    run_until_checked(c->loop, pool_check_cb, slots, 20.0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(slots[i][0], 1);
        assert_int_equal(slots[i][1], i >= 2);
        assert_int_equal(slots[i][2], i);
        assert_int_equal(slots[i][3], 2);
    }
    ctx_free(c);
}

static void on_done_late(struct llmq_http_response *resp, void *privdata)
{
    long long *slot = privdata; /* [0] calls, [1] status, [2] late_ms */
    slot[0]++;
    slot[1] = resp->status;
    slot[2] = resp->late_ms;
}

static void late_check_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)revents;
    long long(*slots)[3] = w->data;
    if (slots[0][0] > 0 && slots[1][0] > 0)
        ev_break(loop, EVBREAK_ALL);
}

/* A call's lateness after its admission (llmq_http_response.late_ms, what
 * the limiter holds a settled call's window entry for: an upper bound)
 * counts the time it waited for a connection of its pool: one HTTP/1.1
 * connection to openai-sim answering after 300 ms, two calls asked for at
 * once; the second is written only after the first's answer, so at least
 * 300 ms after it was asked for (a bound by cause, not by speed). curl's
 * own pretransfer time starts again when a waiting transfer gets its
 * connection. */
static void test_late_counts_pool_wait(void **state)
{
    (void)state;
    const char *bin = llmq_test_bin("openai-sim", 0);
    if (access(bin, X_OK) != 0)
        fail_msg("%s is not built", bin);
    char port_file[128];
    snprintf(port_file, sizeof(port_file), "/tmp/llmq-http-late-%d.port", (int)getpid());
    unlink(port_file);
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        execl(bin, bin, "--port", "0", "--port-file", port_file, "--latency-ms", "300", "--quiet",
              (char *)NULL);
        _exit(127);
    }
    helper_pid = pid;
    int port = wait_port_file(port_file, pid);
    assert_true(port > 0);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/chat/completions", port);
    const char *body = "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\","
                       "\"content\":\"hello\"}],\"max_completion_tokens\":8}";
    struct llmq_http_config cfg = {.max_connections = 1, .version = LLMQ_HTTP_1_1};
    struct ctx *c = ctx_new(&cfg);
    static long long slots[2][3];
    memset(slots, 0, sizeof(slots));
    int64_t asked = llmq_monotonic_ms();
    for (int i = 0; i < 2; i++) {
        struct llmq_http_request req = {.url = url,
                                        .body = body,
                                        .body_len = strlen(body),
                                        .auth = LLMQ_HTTP_AUTH_BEARER,
                                        .api_key = API_KEY,
                                        .asked_ms = asked};
        assert_int_equal(llmq_http_submit(c->http, &req, on_done_late, slots[i], NULL), LLMQ_OK);
    }
    run_until_checked(c->loop, late_check_cb, slots, 20.0);
    ctx_free(c);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    helper_pid = 0;
    printf("# late_ms: %lld, %lld\n", slots[0][2], slots[1][2]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(slots[i][0], 1);
        assert_int_equal(slots[i][1], 200);
        assert_true(slots[i][2] >= 0);
    }
    assert_true(slots[0][2] >= 300 || slots[1][2] >= 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_concurrent),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_reset_and_refused),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_status_and_sse),
        cmocka_unit_test(test_take_body),
        cmocka_unit_test(test_free_cancels),
        cmocka_unit_test(test_free_inside_callback),
        cmocka_unit_test(test_submit_errors),
        cmocka_unit_test(test_tls_verification),
        cmocka_unit_test(test_openai_sim),
        cmocka_unit_test(test_h2_multiplex),
        cmocka_unit_test(test_h1_over_tls_learned),
        cmocka_unit_test(test_pool_full_marked),
        cmocka_unit_test(test_late_counts_pool_wait),
    };
    return cmocka_run_group_tests(tests, start_server, stop_server);
}
