/* An https:// endpoint that negotiates HTTP/1.1 (a proxy without HTTP/2,
 * here tests/http_testserver/h2_server.mjs in h1 mode, answering after 3 s)
 * served by a worker that holds only its key: the worker sends https://
 * calls over the multiplexed pool (2 connections at concurrency 16) until
 * the first answer shows HTTP/1.1; then its calls get a connection each.
 * The calls that waited meanwhile for one of those 2 connections outlived
 * their grants (lifetime 500 ms: period 20 s / 40): the worker reports each
 * as its own pool's fault — a warning naming the calls ahead and the
 * connections, llmq_grants_stale_pool_total — hands it back, and every job
 * then runs on the learned connections (16 done, none dead). Before, such
 * grants were logged at info as any stale grant, and the endpoint stayed at
 * 2 connections. Counted, not timed: the server's answer is held far
 * longer than the grant lifetime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

#define JOBS 16

static pid_t node_pid;

/* A self-signed certificate for 127.0.0.1 in dir (cert.pem, key.pem). */
static void make_cert(const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s/key.pem -out %s/cert.pem -days 2 -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             dir, dir);
    if (system(cmd) != 0)
        fail_msg("the openssl tool could not make a certificate (scripts/bootstrap installs it)");
}

/* Starts h2_server.mjs in h1 mode (HTTP/1.1 over TLS), answering after
 * latency_ms; returns its port. */
static int start_h1_tls(const char *dir, const char *latency_ms)
{
    const char *src = getenv("LLMQ_SOURCE_DIR");
    if (src == NULL)
        fail_msg("LLMQ_SOURCE_DIR is not set (run under ctest)");
    if (system("node --version >/dev/null 2>&1") != 0)
        fail_msg("node is not on PATH (scripts/bootstrap installs nodejs)");
    char cert[512], key[512], script[1024], port_file[512];
    snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    snprintf(port_file, sizeof(port_file), "%s/port", dir);
    snprintf(script, sizeof(script), "%s/tests/http_testserver/h2_server.mjs", src);
    node_pid = llmq_test_fork();
    if (node_pid == 0) {
        if (freopen("/dev/null", "w", stdout) == NULL)
            _exit(127);
        execlp("node", "node", script, port_file, cert, key, latency_ms, "100", "h1", (char *)NULL);
        _exit(127);
    }
    int port = llmq_test_wait_port_file(port_file, node_pid, 10000);
    unlink(port_file);
    assert_true(port > 0);
    return port;
}

static int teardown(void **state)
{
    (void)state;
    if (node_pid > 0) {
        kill(node_pid, SIGTERM);
        waitpid(node_pid, NULL, 0);
        node_pid = 0;
    }
    return 0;
}

/* A worker of account with only ep's key and the certificate in dir. */
static pid_t start_worker(const char *account, const struct ep_sim *ep, const char *dir,
                          const char *mport, const char *log)
{
    char keyarg[96], ca[512];
    snprintf(keyarg, sizeof(keyarg), "%s=%s", ep->name, ep->env);
    snprintf(ca, sizeof(ca), "%s/cert.pem", dir);
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        FILE *f = fopen(log, "w");
        if (f != NULL) {
            dup2(fileno(f), 2);
            dup2(fileno(f), 1);
        }
        setenv("LLMQ_REDIS_URL", llmq_test_redis_url(), 1);
        setenv("LLMQ_ACCOUNT", account, 1);
        unsetenv("OPENAI_API_KEY");
        unsetenv("OPENAI_BASE_URL");
        const char *argv[] = {
            "llmq-worker", "--log-level", "info", "--concurrency",  "16",  "--endpoint-key",
            keyarg,        "--ca-file",   ca,     "--metrics-port", mport, "--exit-when-idle-ms",
            "3000",        NULL};
        execv(llmq_test_bin("llmq-worker", 0), (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static void test_tls_http1_endpoint_learned_and_stale_reported(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], dir[] = "/tmp/llmq-eptls1-XXXXXX";
    if (mkdtemp(dir) == NULL)
        fail_msg("mkdtemp");
    make_cert(dir);
    llmq_test_unique_name(account, sizeof(account), "eptls1");
    struct ep_sim ep;
    ep_init(&ep, 0);
    ep.sim.port = start_h1_tls(dir, "3000");
    char url[128];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1", ep.sim.port);
    struct cli_run r = ep_cli(account, 0, "endpoints", "add", "ep0", "--base-url", url, NULL);
    cli_free(&r);
    ep_limit(account, &ep, "gpt-4o-mini", 1000, 20000);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-eptls1-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "t", JOBS, "gpt-4o-mini", 10, "{\"max_attempts\":20}");
    worker_enqueue(account, jobs);
    int mport = llmq_test_free_port();
    char mport_s[16];
    snprintf(mport_s, sizeof(mport_s), "%d", mport);
    worker_log_path(log, "eptls1", 0);
    pid_t pid = start_worker(account, &ep, dir, mport_s, log);

    /* reported while it runs (the metrics go with the worker) */
    assert_true(worker_wait_log(log, "connection pool held it", 60000));
    char want[160];
    snprintf(want, sizeof(want), "llmq_grants_stale_pool_total{account=\"%s\"", account);
    struct worker_page pg = worker_http_wait_for(mport, "/metrics", want, 10000);
    double stale_pool = worker_metric_sum(pg.body, "llmq_grants_stale_pool_total", account);
    free(pg.body);
    /* a deadline against hanging, not a timing check */
    assert_int_equal(worker_wait(pid, 120000), 0);
    ep_assert_results(account, "t", JOBS, JOBS);
    int warned = worker_log_count(log, "connection pool held it");
    printf("# %d grants reported stale for want of a connection; metric %g\n", warned, stale_pool);
    assert_true(worker_log_count(log, "negotiated HTTP/1.1") == 1);
    assert_true(warned >= 1);
    /* what held them: the 2 connections sized for multiplexing */
    assert_int_equal(worker_log_count(log, "on 2 connections when it was submitted"), warned);
    assert_true(stale_pool >= 1);
    unlink(jobs);
    unlink(log);
    char path[600];
    snprintf(path, sizeof(path), "%s/cert.pem", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/key.pem", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_tls_http1_endpoint_learned_and_stale_reported, teardown),
    };
    return cmocka_run_group_tests_name("endpoints_tls_http1", tests, NULL, NULL);
}
