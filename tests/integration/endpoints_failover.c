/* Failover: four endpoints of one model (balanced routing), 60 requests per
 * 3 s each: ep0 healthy; ep1's server is down from the start (connection
 * refused); ep2 answers, then only 500s, then refuses connections, then
 * answers again; ep3 refuses the workers' key (401). Workers allow each job
 * ONE attempt (llmq.max_attempts 1), so any attempt counted for an endpoint's
 * fault would dead-letter a job. Checks: every job has its result and
 * nothing is dead; ep1 is cooling within seconds, ep3 disabled (and shown so
 * by `llmq endpoints list` and `llmq status`) after the few requests that
 * were in flight; ep2 gets no more than probes 2 s after it starts failing,
 * and serves again after it recovers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

#define N_EP 4
#define WORKERS 2
#define SIM_PERIOD_MS 3000
#define LLMQ_PERIOD_MS 3300
#define RPM 60
#define JOBS 480

/* The state of endpoint name in `llmq endpoints list --json` into state
 * (and its why into why); asserts it is listed. An "ok" whose cooling just
 * ended and whose probe has not gone out yet (probe_next) is "cooled". */
static void ep_state(const char *account, const char *name, char *state, size_t n, char *why,
                     size_t wn)
{
    struct cli_run r = ep_cli(account, 0, "endpoints", "list", "--json", NULL);
    json_t *o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    size_t i;
    json_t *e;
    int found = 0;
    json_array_foreach(json_object_get(o, "endpoints"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0) {
            snprintf(state, n, "%s",
                     json_is_true(json_object_get(e, "probe_next"))
                         ? "cooled"
                         : json_string_value(json_object_get(e, "state")));
            snprintf(why, wn, "%s", json_string_value(json_object_get(e, "why")));
            found = 1;
        }
    }
    assert_true(found);
    json_decref(o);
    cli_free(&r);
}

/* The time of the first answer of status in log (-1: none). */
static long long first_status(const char *log, int status)
{
    size_t n;
    struct sim_entry *e = sim_log_read(log, &n);
    long long t = -1;
    for (size_t i = 0; i < n; i++)
        if (e[i].status == status && (t < 0 || e[i].t_ms < t))
            t = e[i].t_ms;
    free(e);
    return t;
}

static int count_status(const char *log, int status, long long after_ms)
{
    size_t n;
    struct sim_entry *e = sim_log_read(log, &n);
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += (status < 0 || e[i].status == status) && e[i].t_ms >= after_ms;
    free(e);
    return k;
}

static void test_endpoints_fail_over_and_back(void **state)
{
    (void)state;
    char account[64], jobs[128], logs[WORKERS][128], store[N_EP][96];
    llmq_test_unique_name(account, sizeof(account), "epfail");
    struct ep_sim eps[N_EP];
    char rpm_s[16], period_s[16];
    snprintf(rpm_s, sizeof(rpm_s), "%d", RPM);
    snprintf(period_s, sizeof(period_s), "%d", SIM_PERIOD_MS);
    const char *sim_args[] = {
        "--rpm", rpm_s, "--period-ms", period_s, "--latency-ms", "20", "--ratelimit-headers",
        "none",  NULL};
    const char *failing[] = {
        "--rpm", rpm_s,        "--period-ms", period_s, "--latency-ms", "20", "--ratelimit-headers",
        "none",  "--fail-500", "100",         NULL};
    const char *health[] = {"--fail-threshold",
                            "3",
                            "--fail-window-ms",
                            "5000",
                            "--cooldown-ms",
                            "300",
                            "--cooldown-max-ms",
                            "1500",
                            NULL};
    for (int i = 0; i < N_EP; i++)
        ep_init(&eps[i], i);
    ep_sim_start(&eps[0], sim_args);
    eps[1].sim.port = llmq_test_free_port(); /* nothing listens there */
    ep_sim_start(&eps[2], sim_args);
    ep_sim_restart(&eps[3], llmq_test_free_port(), "test-some-other-key", sim_args);
    for (int i = 0; i < N_EP; i++) {
        ep_add(account, &eps[i], "/v1", health);
        ep_limit(account, &eps[i], "gpt-4o-mini", RPM, LLMQ_PERIOD_MS);
    }
    struct cli_run r = ep_cli(account, 0, "endpoints", "routing", "gpt-4o-mini", "balanced", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "limits", "policy", "--window-guard-ms", "0", NULL);
    cli_free(&r);

    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epfail-%d.jsonl", (int)getpid());
    /* one attempt each (the line says so: enqueue stores every job's own) */
    worker_write_jobs(jobs, "j", JOBS, "gpt-4o-mini", 20, "{\"max_attempts\":1}");
    pid_t pids[WORKERS];
    const char *args[8 + 2 * N_EP + 1] = {"--concurrency",       "16",  "--max-attempts", "1",
                                          "--exit-when-idle-ms", "2000"};
    ep_key_args(eps, N_EP, args, 6, store);
    worker_start_n(account, &eps[0].sim, "epfail", WORKERS - 1, logs, pids, args);
    /* the last one also serves /metrics */
    int mport = llmq_test_free_port();
    char mport_s[16];
    snprintf(mport_s, sizeof(mport_s), "%d", mport);
    int at = ep_key_args(eps, N_EP, args, 6, store);
    args[at++] = "--metrics-port";
    args[at++] = mport_s;
    args[at] = NULL;
    worker_log_path(logs[WORKERS - 1], "epfail", WORKERS - 1);
    pids[WORKERS - 1] = worker_start(account, &eps[0].sim, logs[WORKERS - 1], args);
    for (int i = 0; i < WORKERS; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    worker_enqueue(account, jobs);
    long long t0 = llmq_test_now_ms();

    /* within seconds: the dead server cools, the refused key is out */
    char st[32], why[256];
    usleep(2500 * 1000);
    ep_state(account, "ep1", st, sizeof(st), why, sizeof(why));
    printf("# at 2.5 s: ep1 %s (%s)\n", st, why);
    assert_true(strcmp(st, "cooling") == 0 || strcmp(st, "probing") == 0 ||
                strcmp(st, "cooled") == 0);
    ep_state(account, "ep3", st, sizeof(st), why, sizeof(why));
    printf("# at 2.5 s: ep3 %s (%s)\n", st, why);
    assert_string_equal(st, "disabled");
    assert_non_null(strstr(why, "401"));
    /* ep2: 500s from 3 s, refused from 6 s, answering again from 8 s */
    while (llmq_test_now_ms() < t0 + 3000)
        usleep(10000);
    ep_sim_restart(&eps[2], 0, NULL, failing);
    char failing_log[128];
    snprintf(failing_log, sizeof(failing_log), "%s", eps[2].sim.log_file);
    while (llmq_test_now_ms() < t0 + 6000)
        usleep(10000);
    ep_sim_stop(&eps[2]);
    while (llmq_test_now_ms() < t0 + 8000)
        usleep(10000);
    ep_sim_restart(&eps[2], 0, NULL, sim_args);
    long long t_back = llmq_test_now_ms();
    /* /metrics per endpoint: the shared state (polled every 5 s) and this
     * worker's calls; only now: waiting for the poll earlier would push ep2's
     * schedule back (its failing phase could pass while its budget is
     * spent, and see no request) */
    char want[256];
    snprintf(want, sizeof(want),
             "llmq_endpoint_state{account=\"%s\",endpoint=\"ep3\",state=\"disabled\"} 1", account);
    struct worker_page pg = worker_http_wait_for(mport, "/metrics", want, 8000);
    assert_non_null(strstr(pg.body, want));
    snprintf(want, sizeof(want),
             "llmq_endpoint_requests_total{account=\"%s\",endpoint=\"ep0\",model=\"gpt-4o-mini\","
             "outcome=\"ok\"}",
             account);
    assert_non_null(strstr(pg.body, want));
    assert_non_null(strstr(pg.body, "llmq_endpoint_bucket_limit{"));
    free(pg.body);

    worker_wait_n(pids, WORKERS, 60000);
    ep_assert_results(account, "j", JOBS, JOBS); /* and nothing dead */

    int fails = count_status(failing_log, 500, 0);
    /* 2 s after its first failure (its budget may hold it idle for a while
     * after the switch) */
    long long t_fail = first_status(failing_log, 500);
    assert_true(t_fail > 0);
    int late_fails = count_status(failing_log, 500, t_fail + 2000);
    int back = count_status(eps[2].sim.log_file, 200, t_back);
    int refused_key = count_status(eps[3].sim.log_file, 401, 0);
    int healthy = count_status(eps[0].sim.log_file, 200, 0);
    printf("# ep0 answered %d; ep2 failing: %d 500s, %d of them 2 s after it began; ep2 back: "
           "%d answered; ep3: %d 401s\n",
           healthy, fails, late_fails, back, refused_key);
    assert_true(fails >= 3);
    assert_true(late_fails <= 2); /* only half-open probes */
    assert_true(back > 0);
    assert_true(refused_key >= 1 && refused_key <= 16);
    ep_state(account, "ep2", st, sizeof(st), why, sizeof(why));
    assert_string_equal(st, "ok");
    ep_state(account, "ep3", st, sizeof(st), why, sizeof(why));
    assert_string_equal(st, "disabled");

    r = ep_cli(account, 0, "status", NULL);
    assert_non_null(strstr(r.out, "ep3"));
    assert_non_null(strstr(r.out, "disabled: http 401"));
    cli_free(&r);
    /* an operator's enable brings it back */
    r = ep_cli(account, 0, "endpoints", "enable", "ep3", NULL);
    cli_free(&r);
    ep_state(account, "ep3", st, sizeof(st), why, sizeof(why));
    assert_string_equal(st, "ok");
    r = ep_cli(account, 2, "endpoints", "enable", "nope", NULL);
    assert_non_null(strstr(r.err, "no endpoint nope"));
    cli_free(&r);

    for (int i = 0; i < N_EP; i++)
        ep_sim_stop(&eps[i]);
    unlink(jobs);
    for (int i = 0; i < WORKERS; i++)
        unlink(logs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints_fail_over_and_back),
    };
    return cmocka_run_group_tests_name("endpoints_failover", tests, NULL, NULL);
}
