/* bench_http: the worker's HTTP client (worker/http/) against
 * tests/http_testserver on loopback.
 *
 *   bench_http [--seconds S] [--inflight N] [--latency-ms MS] [--sim PATH]
 *
 * (a) Throughput at zero server latency: a baseline of plain
 *     curl_easy_perform over one reused handle (sequential, keep-alive),
 *     then llmq_http with 1, 8, 64 and 256 requests kept in flight; each run
 *     is bounded to S seconds (default 2). Prints req/s and the ratio to the
 *     baseline.
 * (b) Memory: N (default 5000) requests in flight at once against a server
 *     that answers after MS ms (default 5000); prints the growth of this
 *     process's RSS divided by N, for the default 16 KiB receive buffer and
 *     for a 4 KiB one, then checks every request completed with 200.
 * (c) Memory over h2 + TLS: the same N requests against Node's http2 server
 *     (tests/http_testserver/h2_server.mjs, 100 streams per connection,
 *     self-signed certificate made with the openssl tool), with
 *     h2_host_connections = N / 100 + 2. Skipped without node or openssl.
 * --sim PATH runs everything against openai-sim (tests/openai-sim, limits
 * off) instead of tests/http_testserver. The server runs in child processes, so its memory is not
 * counted; each memory run is its own forked process. */
#include <curl/curl.h>
#include <dirent.h>
#include <ev.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "testsupport.h"

static const char *body = "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\","
                          "\"content\":\"Say hello\"}],\"max_completion_tokens\":16}";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Open file descriptors of this process (sockets of the transfers, mostly). */
static long open_fds(void)
{
    long n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n - 3; /* ".", "..", and the directory's own descriptor */
}

static const char *sim_path; /* --sim: use openai-sim instead */

static const char *server_bin(void)
{
    if (sim_path != NULL)
        return sim_path;
    static char path[4096];
    const char *dir = getenv("LLMQ_TEST_BIN_DIR");
    if (dir != NULL) {
        snprintf(path, sizeof(path), "%s/http_testserver", dir);
        return path;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return "http_testserver";
    self[n] = '\0';
    snprintf(path, sizeof(path), "%s/../http_testserver", dirname(self));
    return path;
}

/* Starts the test server with the given latency; returns its port, fills *pid. */
static int start_server(long latency_ms, pid_t *pid)
{
    char port_file[128], lat[32];
    snprintf(port_file, sizeof(port_file), "/tmp/llmq-bench-http-%d-%ld.port", (int)getpid(),
             latency_ms);
    snprintf(lat, sizeof(lat), "%ld", latency_ms);
    unlink(port_file);
    const char *bin = server_bin();
    *pid = fork();
    if (*pid == 0) {
        execl(bin, bin, "--port", "0", "--port-file", port_file, "--latency-ms", lat, (char *)NULL);
        _exit(127);
    }
    int port = llmq_test_wait_port_file(port_file, *pid, 5000);
    unlink(port_file);
    if (port <= 0) {
        fprintf(stderr, "bench_http: cannot start %s\n", bin);
        exit(1);
    }
    return port;
}

static void stop_server(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

/* Baseline: sequential curl_easy_perform on one reused handle. */
static double run_baseline(const char *url, double seconds, long *count)
{
    CURL *e = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Authorization: Bearer sk-bench");
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    double t0 = now_s(), t;
    long n = 0;
    while ((t = now_s()) - t0 < seconds) {
        if (curl_easy_perform(e) != CURLE_OK) {
            fprintf(stderr, "bench_http: baseline request failed\n");
            break;
        }
        n++;
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    *count = n;
    return n / (t - t0);
}

struct run {
    struct llmq_http *http;
    struct ev_loop *loop;
    const char *url;
    double deadline;
    long done, ok;
    int stop_submitting;
};

static void submit(struct run *r);

static void on_done(struct llmq_http_response *resp, void *privdata)
{
    struct run *r = privdata;
    r->done++;
    r->ok += resp->outcome == LLMQ_HTTP_OK && resp->status == 200;
    if (!r->stop_submitting && now_s() < r->deadline)
        submit(r);
}

static void submit(struct run *r)
{
    struct llmq_http_request req = {.url = r->url,
                                    .body = body,
                                    .body_len = strlen(body),
                                    .body_borrowed = 1,
                                    .auth = LLMQ_HTTP_AUTH_BEARER,
                                    .api_key = "sk-bench",
                                    .client_request_id = "bench"};
    struct llmq_error err;
    if (llmq_http_submit(r->http, &req, on_done, r, &err) != LLMQ_OK) {
        fprintf(stderr, "bench_http: submit: %s\n", err.msg);
        exit(1);
    }
}

static void idle_check(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)revents;
    struct run *r = w->data;
    if (llmq_http_inflight(r->http) == 0)
        ev_break(loop, EVBREAK_ALL);
}

static void break_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop until nothing is in flight, or at most limit_s seconds. */
static void run_loop(struct run *r, double limit_s)
{
    ev_prepare p;
    ev_prepare_init(&p, idle_check);
    p.data = r;
    ev_prepare_start(r->loop, &p);
    ev_timer t;
    ev_timer_init(&t, break_cb, limit_s, 0.);
    ev_timer_start(r->loop, &t);
    ev_run(r->loop, 0);
    ev_timer_stop(r->loop, &t);
    ev_prepare_stop(r->loop, &p);
}

static double run_client(const char *url, int inflight, double seconds, long *count)
{
    struct run r = {.url = url};
    r.loop = ev_loop_new(EVFLAG_AUTO);
    struct llmq_http_config cfg = {.max_connections = inflight, .version = LLMQ_HTTP_1_1};
    r.http = llmq_http_new(r.loop, &cfg, NULL);
    double t0 = now_s();
    r.deadline = t0 + seconds;
    for (int i = 0; i < inflight; i++)
        submit(&r);
    run_loop(&r, seconds + 10);
    double t = now_s();
    llmq_http_free(r.http);
    ev_loop_destroy(r.loop);
    *count = r.done;
    if (r.ok != r.done)
        fprintf(stderr, "bench_http: %ld of %ld requests failed\n", r.done - r.ok, r.done);
    return r.done / (t - t0);
}

static void bench_memory(const char *url, int n, long buffer_bytes, long latency_ms,
                         const char *ca_file)
{
    struct run r = {.url = url, .deadline = 0, .stop_submitting = 1};
    r.loop = ev_loop_new(EVFLAG_AUTO);
    struct llmq_http_config cfg = {.max_connections = n + 16,
                                   .version = ca_file ? LLMQ_HTTP_PREFER_H2 : LLMQ_HTTP_1_1,
                                   .ca_file = ca_file,
                                   .h2_host_connections = ca_file ? n / 100 + 2 : 0,
                                   .buffer_bytes = buffer_bytes,
                                   .timeout_ms = latency_ms + 30000};
    r.http = llmq_http_new(r.loop, &cfg, NULL);
    long base = rss_kib();
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        submit(&r);
    /* Let every connection open and send its request, well before the
     * server's answers are due. */
    run_loop(&r, latency_ms / 1000.0 * 0.6);
    long during = rss_kib();
    long fds = open_fds();
    size_t inflight = llmq_http_inflight(r.http);
    run_loop(&r, latency_ms / 1000.0 + 30);
    double took = now_s() - t0;
    printf("%-10ld %10d %10zu %8ld %12ld %12ld %14.1f %8ld/%-6d %8.1f\n", buffer_bytes, n, inflight,
           fds, base, during, (double)(during - base) / n, r.ok, n, took);
    llmq_http_free(r.http);
    ev_loop_destroy(r.loop);
}

/* (c): h2 over TLS against Node's http2 server, if node and openssl exist. */
static void bench_h2(int inflight, long latency_ms)
{
    char dir[] = "/tmp/llmq-bench-h2-XXXXXX", cmd[1024], cert[600], key[600], pf[600], lat[32];
    if (system("node --version >/dev/null 2>&1") != 0 || mkdtemp(dir) == NULL) {
        printf("\n(c) skipped: no node\n");
        return;
    }
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s/key.pem -out %s/cert.pem -days 2 -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             dir, dir);
    snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    snprintf(pf, sizeof(pf), "%s/port", dir);
    snprintf(lat, sizeof(lat), "%ld", latency_ms);
    if (system(cmd) != 0) {
        printf("\n(c) skipped: no openssl tool\n");
        rmdir(dir);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        execlp("node", "node", LLMQ_HTTP_TEST_SOURCE_DIR "/tests/http_testserver/h2_server.mjs", pf,
               cert, key, lat, "100", (char *)NULL);
        _exit(127);
    }
    int port = llmq_test_wait_port_file(pf, pid, 5000);
    char url[128];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1/chat/completions", port);
    printf("\n(c) memory over h2 + TLS, %d in flight, latency %ld ms, h2_host_connections %d\n",
           inflight, latency_ms, inflight / 100 + 2);
    printf("%-10s %10s %10s %8s %12s %12s %14s %15s %8s\n", "buffer_B", "submitted", "inflight",
           "open_fds", "rss_base_KiB", "rss_peak_KiB", "KiB/transfer", "ok/total", "secs");
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        bench_memory(url, inflight, 16384, latency_ms, cert);
        fflush(stdout);
        _exit(0);
    }
    waitpid(child, NULL, 0);
    stop_server(pid);
    unlink(cert);
    unlink(key);
    unlink(pf);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    double seconds = 2.0;
    int inflight = 5000;
    long latency_ms = 5000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0)
            seconds = strtod(argv[i + 1], NULL);
        else if (strcmp(argv[i], "--inflight") == 0)
            inflight = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--latency-ms") == 0)
            latency_ms = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--sim") == 0)
            sim_path = argv[i + 1];
    }
    printf("server: %s\n", server_bin());
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pid_t fast_pid, slow_pid;
    char url[128];
    int fast = start_server(0, &fast_pid);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/chat/completions", fast);

    printf("(a) throughput, server latency 0, %.1f s per run, HTTP/1.1 keep-alive, loopback\n",
           seconds);
    printf("%-34s %10s %12s %8s\n", "mode", "requests", "req/s", "ratio");
    long n;
    double base = run_baseline(url, seconds, &n);
    printf("%-34s %10ld %12.0f %8.2f\n", "curl_easy_perform, 1 handle", n, base, 1.0);
    const int levels[] = {1, 8, 64, 256};
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        char mode[64];
        snprintf(mode, sizeof(mode), "llmq_http, %d in flight", levels[i]);
        double rate = run_client(url, levels[i], seconds, &n);
        printf("%-34s %10ld %12.0f %8.2f\n", mode, n, rate, rate / base);
    }
    stop_server(fast_pid);

    int slow = start_server(latency_ms, &slow_pid);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/chat/completions", slow);
    printf("\n(b) memory, %d requests in flight, server latency %ld ms\n", inflight, latency_ms);
    printf("%-10s %10s %10s %8s %12s %12s %14s %15s %8s\n", "buffer_B", "submitted", "inflight",
           "open_fds", "rss_base_KiB", "rss_peak_KiB", "KiB/transfer", "ok/total", "secs");
    const long buffers[] = {16384, 4096};
    for (size_t i = 0; i < 2; i++) {
        /* A fresh process per run: RSS the previous run left behind in the
         * allocator must not hide this run's growth. */
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            bench_memory(url, inflight, buffers[i], latency_ms, NULL);
            fflush(stdout);
            _exit(0);
        }
        waitpid(pid, NULL, 0);
    }
    stop_server(slow_pid);
    bench_h2(inflight, latency_ms);
    curl_global_cleanup();
    return 0;
}
