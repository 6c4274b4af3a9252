/* Failover: four endpoints of one model (balanced routing), 60 requests per
 * 3 s each: ep0 healthy; ep1's server is down from the start (connection
 * refused); ep2 answers, then only 500s, then refuses connections, then
 * answers again; ep3 refuses the workers' key (401). Workers allow each job
 * ONE attempt (llmq.max_attempts 1), so any attempt counted for an endpoint's
 * fault would dead-letter a job. Checks: every job has its result and
 * nothing is dead; ep1 cools, ep3 is disabled (and shown so by `llmq
 * endpoints list` and `llmq status`) after the few requests that were in
 * flight; ep2 is taken out after its failures and gets no more than a probe
 * once it is, and serves again after it recovers.
 * The phases follow what the test sees happen, never the clock (issue 33:
 * on a loaded host the workers may need more than the seconds a schedule
 * gave them): ep2 fails once it has answered, refuses once it is out, and
 * answers again once a refused probe kept it out; from when it goes out
 * until it has served again, more jobs are enqueued whenever all have ended,
 * so there is work to probe it with and to come back to. The waits are
 * bounded only against a hang. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/clock.h"
#include "endpoints_support.h"

#define N_EP 4
#define WORKERS 2
#define SIM_PERIOD_MS 3000
#define LLMQ_PERIOD_MS 3300
#define RPM 60
#define JOBS 480
#define JOBS2 120 /* a round of more jobs (struct feed) */

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

/* Polls ep_state until name's state is want (or, want2 when not NULL) and,
 * when not_why is not NULL, its why differs from it; fails after HANG_MS. */
#define HANG_MS 120000
static void ep_wait_state(const char *account, const char *name, const char *want,
                          const char *want2, const char *not_why, char *why, size_t wn)
{
    char st[32];
    long long until = llmq_test_now_ms() + HANG_MS;
    for (;;) {
        ep_state(account, name, st, sizeof(st), why, wn);
        /* a cooling whose time is up and whose probe is next ("cooled") is
         * still the cooling waited for */
        int cooled = strcmp(want, "cooling") == 0 && strcmp(st, "cooled") == 0;
        if ((cooled || strcmp(st, want) == 0 || (want2 != NULL && strcmp(st, want2) == 0)) &&
            (not_why == NULL || strcmp(why, not_why) != 0))
            return;
        if (llmq_test_now_ms() > until)
            fail_msg("%s stayed %s (%s)", name, st, why);
        usleep(50 * 1000);
    }
}

static int count_status(const char *log, int status, long long after_ms);

/* More work while the test waits for an endpoint: JOBS2 jobs ("m<round>-<i>")
 * enqueued each time every job so far has ended. */
struct feed {
    const char *account;
    redisContext *c;
    char P[128], path[128];
    int rounds;
    long long ended; /* jobs enqueued so far */
};

static void feed(struct feed *f)
{
    if (worker_event_jobs(f->c, f->P) < f->ended)
        return;
    char prefix[16];
    snprintf(prefix, sizeof(prefix), "m%d", f->rounds++);
    worker_write_jobs(f->path, prefix, JOBS2, "gpt-4o-mini", 20, "{\"max_attempts\":1}");
    worker_enqueue(f->account, f->path);
    f->ended += JOBS2;
}

/* Waits until log holds at least k answers of status; fails after HANG_MS. */
static void wait_answers(const char *log, int status, int k)
{
    long long until = llmq_test_now_ms() + HANG_MS;
    while (count_status(log, status, 0) < k) {
        if (llmq_test_now_ms() > until)
            fail_msg("%s: fewer than %d answers %d", log, k, status);
        usleep(50 * 1000);
    }
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
    const char *args[6 + 2 * N_EP + 1] = {"--concurrency", "16", "--max-attempts", "1"};
    ep_key_args(eps, N_EP, args, 4, store);
    worker_start_n(account, &eps[0].sim, "epfail", WORKERS - 1, logs, pids, args);
    /* the last one also serves /metrics */
    int mport = llmq_test_free_port();
    char mport_s[16];
    snprintf(mport_s, sizeof(mport_s), "%d", mport);
    int at = ep_key_args(eps, N_EP, args, 4, store);
    args[at++] = "--metrics-port";
    args[at++] = mport_s;
    args[at] = NULL;
    worker_log_path(logs[WORKERS - 1], "epfail", WORKERS - 1);
    pids[WORKERS - 1] = worker_start(account, &eps[0].sim, logs[WORKERS - 1], args);
    for (int i = 0; i < WORKERS; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    worker_enqueue(account, jobs);

    /* once the workers tried them: the dead server cools, the refused key is out */
    char st[32], why[256], out_why[256];
    ep_wait_state(account, "ep1", "cooling", "probing", NULL, why, sizeof(why));
    printf("# ep1 out (%s)\n", why);
    ep_wait_state(account, "ep3", "disabled", NULL, NULL, why, sizeof(why));
    printf("# ep3 disabled (%s)\n", why);
    assert_non_null(strstr(why, "401"));
    /* ep2: answered, then 500s until it is out, then refused until a probe
     * found it so, then answering again */
    wait_answers(eps[2].sim.log_file, 200, 1);
    ep_sim_restart(&eps[2], 0, NULL, failing);
    char failing_log[128];
    snprintf(failing_log, sizeof(failing_log), "%s", eps[2].sim.log_file);
    wait_answers(failing_log, 500, 3);
    ep_wait_state(account, "ep2", "cooling", "probing", NULL, out_why, sizeof(out_why));
    long long t_out = llmq_wall_ms(); /* the sim logs unix ms */
    ep_sim_stop(&eps[2]);
    printf("# ep2 out after its 500s (%s)\n", out_why);
    struct feed f = {.account = account, .c = llmq_test_redis_connect(), .ended = JOBS};
    snprintf(f.P, sizeof(f.P), "llmq:{%s}:", account);
    snprintf(f.path, sizeof(f.path), "/tmp/llmq-epfail-%d-more.jsonl", (int)getpid());
    /* refused until a probe found it so: a probe needs a job (the first jobs
     * may be done by now) */
    long long hang = llmq_test_now_ms() + HANG_MS;
    for (;;) {
        ep_state(account, "ep2", st, sizeof(st), why, sizeof(why));
        if (strcmp(why, out_why) != 0)
            break;
        if (llmq_test_now_ms() > hang)
            fail_msg("ep2 was not probed while refusing (%s %s)", st, why);
        feed(&f);
        usleep(50 * 1000);
    }
    printf("# ep2 probed while refusing: %s (%s)\n", st, why);
    assert_true(strcmp(st, "cooling") == 0 || strcmp(st, "probing") == 0);
    ep_sim_restart(&eps[2], 0, NULL, sim_args);
    long long t_back = llmq_wall_ms();
    /* work until ep2 has answered again (its probe comes after its cooling) */
    hang = llmq_test_now_ms() + HANG_MS;
    while (count_status(eps[2].sim.log_file, 200, t_back) == 0) {
        if (llmq_test_now_ms() > hang)
            fail_msg("ep2 did not answer again");
        feed(&f);
        usleep(50 * 1000);
    }
    printf("# ep2 answered again (%d rounds of more jobs)\n", f.rounds);
    /* /metrics per endpoint: the shared state (polled every 5 s) and this
     * worker's calls; only now: waiting for the poll earlier would push ep2's
     * schedule back (its failing phase could pass while its budget is
     * spent, and see no request) */
    char want[256];
    snprintf(want, sizeof(want),
             "llmq_endpoint_state{account=\"%s\",endpoint=\"ep3\",state=\"disabled\"} 1", account);
    struct worker_page pg = worker_http_wait_for(mport, "/metrics", want, HANG_MS);
    assert_non_null(strstr(pg.body, want));
    snprintf(want, sizeof(want),
             "llmq_endpoint_requests_total{account=\"%s\",endpoint=\"ep0\",model=\"gpt-4o-mini\","
             "outcome=\"ok\"}",
             account);
    assert_non_null(strstr(pg.body, want));
    assert_non_null(strstr(pg.body, "llmq_endpoint_bucket_limit{"));
    free(pg.body);

    /* every job ends; then the workers are stopped */
    long long total = f.ended;
    hang = llmq_test_now_ms() + HANG_MS;
    while (worker_event_jobs(f.c, f.P) < total && llmq_test_now_ms() < hang)
        usleep(100 * 1000);
    redisFree(f.c);
    for (int i = 0; i < WORKERS; i++)
        kill(pids[i], SIGTERM);
    worker_wait_n(pids, WORKERS, 60000);
    ep_assert_results(account, "j", JOBS, (int)total); /* and nothing dead */
    for (int i = 0; i < f.rounds; i++) {
        char prefix[16];
        snprintf(prefix, sizeof(prefix), "m%d", i);
        ep_assert_results(account, prefix, JOBS2, (int)total);
    }

    int fails = count_status(failing_log, 500, 0);
    /* once the test saw it out: what was already on its way, or a probe */
    int late_fails = count_status(failing_log, 500, t_out);
    int back = count_status(eps[2].sim.log_file, 200, t_back);
    int refused_key = count_status(eps[3].sim.log_file, 401, 0);
    int healthy = count_status(eps[0].sim.log_file, 200, 0);
    printf("# ep0 answered %d; ep2 failing: %d 500s, %d of them after it was seen out; ep2 back: "
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
    unlink(f.path);
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
