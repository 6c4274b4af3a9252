/* A worker set up as docs/endpoints.md's worked configuration is — only
 * --endpoint-key, no account key and no OPENAI_BASE_URL, so its implicit
 * base URL is https://api.openai.com/v1 — sizes its connections by what each
 * endpoint speaks, not by that default: its one endpoint is cleartext
 * http:// (HTTP/1.1, one call per connection), so its calls run side by side
 * on as many connections as they need. Before, the worker sized one pool for
 * HTTP/2 from the default URL (concurrency / 100 + 2 = 2 connections here)
 * and the endpoint saw at most 2 calls at a time.
 *
 * What the sim saw is counted, not timed: the most calls it was answering at
 * once and the number of connections they came on (its access log's inflight
 * and conn): more than 2 at once, on no more connections than the worker's
 * concurrency (they are kept; before, nearly every call opened its own).
 * Every job runs once, none is dead, and no grant went stale waiting for one
 * of the worker's own connections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

#define JOBS 120
#define CONCURRENCY 64
#define CONCURRENCY_ARG "64"
/* what the old sizing allowed: 64 / 100 + 2 connections */
#define H2_SIZED_CONNECTIONS 2

/* A worker of account with only ep's key: no --base-url, no OPENAI_BASE_URL,
 * no OPENAI_API_KEY. */
static pid_t start_endpoints_only_worker(const char *account, const struct ep_sim *ep,
                                         const char *log)
{
    char keyarg[96];
    snprintf(keyarg, sizeof(keyarg), "%s=%s", ep->name, ep->env);
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
        const char *argv[] = {"llmq-worker",   "--log-level",
                              "info",          "--concurrency",
                              CONCURRENCY_ARG, "--endpoint-key",
                              keyarg,          "--exit-when-idle-ms",
                              "3000",          NULL};
        execv(llmq_test_bin("llmq-worker", 0), (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static void test_http1_endpoint_gets_its_connections(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "epconn");
    struct ep_sim ep;
    ep_init(&ep, 0);
    const char *sim_args[] = {"--latency-ms", "300", NULL};
    ep_sim_start(&ep, sim_args);
    ep_add(account, &ep, "/v1", NULL);
    ep_limit(account, &ep, "gpt-4o-mini", 100000, 60000); /* serves the model; never full */
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epconn-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "c", JOBS, "gpt-4o-mini", 10, NULL);
    worker_enqueue(account, jobs);
    worker_log_path(log, "epconn", 0);
    pid_t pid = start_endpoints_only_worker(account, &ep, log);
    assert_true(worker_wait_log(log, "none: endpoints only", 30000));
    /* a deadline against hanging, not a timing check */
    assert_int_equal(worker_wait(pid, 120000), 0);
    ep_assert_results(account, "c", JOBS, JOBS);
    assert_int_equal(sim_proc_stop(&ep.sim), 0);
    ep.running = 0;

    size_t n;
    struct sim_entry *e = ep_log(&ep, &n);
    long long conns = 0;
    int most = 0, ok = 0;
    for (size_t i = 0; i < n; i++) {
        ok += strcmp(e[i].outcome, "ok") == 0;
        if (e[i].conn > conns)
            conns = e[i].conn; /* numbered from 1 as accepted */
        if (e[i].inflight > most)
            most = e[i].inflight;
    }
    printf("# %d answered on %lld connections, at most %d at once (the h2 sizing allowed %d)\n", ok,
           conns, most, H2_SIZED_CONNECTIONS);
    assert_int_equal(ok, JOBS);
    /* side by side, on connections it keeps (before: 2 at once, on a new
     * connection for nearly every call, as the 2 kept were never enough) */
    assert_true(most > H2_SIZED_CONNECTIONS);
    assert_true(conns <= CONCURRENCY);
    assert_int_equal(worker_log_count(log, "connection pool held it"), 0);
    free(e);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http1_endpoint_gets_its_connections),
    };
    return cmocka_run_group_tests_name("endpoints_connections", tests, NULL, NULL);
}
