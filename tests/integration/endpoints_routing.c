/* Routing strategies other than spillover, and endpoints of both styles in
 * one pool:
 *   - balanced: three endpoints of one model with budgets 30, 60 and 90
 *     requests per 10 s, the middle one an Azure deployment (openai-sim
 *     --azure: /openai/deployments/<deployment>/chat/completions?api-version=V,
 *     api-key header), half the total budget offered at once: each
 *     endpoint's share of the jobs is within 5% of its budget's share, and
 *     the Azure one saw only its deployment path;
 *   - fastest: two endpoints, 250 ms and 10 ms of latency, ample budgets:
 *     the fast one takes at least 80% of the jobs once the workers measured
 *     both, and both latencies are in `llmq endpoints list`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

/* How many entries of sim log path have field "path" starting with want,
 * and how many do not. */
static void count_paths(const char *log, const char *want, int *match, int *other)
{
    FILE *f = fopen(log, "r");
    char line[4096];
    *match = *other = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        const char *p = o ? json_string_value(json_object_get(o, "path")) : NULL;
        if (p != NULL && strncmp(p, want, strlen(want)) == 0)
            (*match)++;
        else
            (*other)++;
        json_decref(o);
    }
    if (f != NULL)
        fclose(f);
}

static void test_balanced_shares_follow_budgets_azure_mixed(void **state)
{
    (void)state;
    enum { N = 3, JOBS = 90 };
    static const int rpm[N] = {30, 60, 90};
    char account[64], jobs[128], logs[2][128], store[N][96];
    llmq_test_unique_name(account, sizeof(account), "epbal");
    struct ep_sim eps[N];
    for (int i = 0; i < N; i++) {
        char rpm_s[16];
        snprintf(rpm_s, sizeof(rpm_s), "%d", rpm[i]);
        const char *args[] = {
            "--rpm", rpm_s, "--period-ms", "10000", "--latency-ms", "20", i == 1 ? "--azure" : NULL,
            NULL};
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], args);
    }
    ep_add(account, &eps[0], "/v1", NULL);
    const char *azure[] = {"--azure-api-version", "2024-10-21", NULL};
    ep_add(account, &eps[1], "", azure); /* the resource URL: the path is built */
    ep_add(account, &eps[2], "/v1", NULL);
    for (int i = 0; i < N; i++) {
        char rpm_s[16];
        snprintf(rpm_s, sizeof(rpm_s), "%d", rpm[i]);
        struct cli_run r =
            ep_cli(account, 0, "limits", "set", "gpt-4o-mini", "--endpoint", eps[i].name, "--rpm",
                   rpm_s, "--period-ms", "10000", i == 1 ? "--deployment" : NULL, "mini-dep", NULL);
        cli_free(&r);
    }
    struct cli_run r = ep_cli(account, 0, "endpoints", "routing", "gpt-4o-mini", "balanced", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "endpoints", "list", NULL);
    assert_non_null(strstr(r.out, "deployment mini-dep"));
    assert_non_null(strstr(r.out, "routing gpt-4o-mini: balanced"));
    cli_free(&r);

    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epbal-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "j", JOBS, "gpt-4o-mini", 20, NULL);
    const char *args[4 + 2 * N + 1] = {"--concurrency", "32", "--exit-when-idle-ms", "1500"};
    ep_key_args(eps, N, args, 4, store);
    pid_t pids[2];
    worker_start_n(account, &eps[0].sim, "epbal", 2, logs, pids, args);
    for (int i = 0; i < 2; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    worker_enqueue(account, jobs);
    worker_wait_n(pids, 2, 60000);
    ep_assert_results(account, "j", JOBS, JOBS);
    int total = 0, got[N];
    for (int i = 0; i < N; i++) {
        ep_sim_stop(&eps[i]);
        size_t n;
        struct sim_entry *e = ep_log(&eps[i], &n);
        int ok, limited;
        sim_log_outcomes(e, n, &ok, &limited);
        assert_int_equal(limited, 0);
        assert_int_equal(ok, (int)n); /* a wrong key, path or header would not be ok */
        got[i] = ok;
        total += ok;
        free(e);
    }
    assert_int_equal(total, JOBS);
    for (int i = 0; i < N; i++) {
        double share = (double)got[i] / total, want = (double)rpm[i] / (30 + 60 + 90);
        printf("# %s: %d jobs, share %.3f, budget share %.3f\n", eps[i].name, got[i], share, want);
        assert_true(share > want - 0.05 && share < want + 0.05);
    }
    int match, other;
    count_paths(eps[1].sim.log_file, "/openai/deployments/mini-dep/chat/completions", &match,
                &other);
    assert_int_equal(other, 0);
    assert_int_equal(match, got[1]);
    count_paths(eps[0].sim.log_file, "/v1/chat/completions", &match, &other);
    assert_int_equal(other, 0);
    unlink(jobs);
    for (int i = 0; i < 2; i++)
        unlink(logs[i]);
}

static void test_fastest_prefers_low_latency(void **state)
{
    (void)state;
    enum { JOBS = 80 };
    char account[64], jobs[128], logs[1][128], store[2][96];
    llmq_test_unique_name(account, sizeof(account), "epfast");
    struct ep_sim eps[2];
    const char *slow[] = {"--latency-ms", "250", NULL}, *fast[] = {"--latency-ms", "10", NULL};
    ep_init(&eps[0], 0);
    ep_init(&eps[1], 1);
    /* the slow one sorts first by name: only latency can prefer the other */
    snprintf(eps[0].name, sizeof(eps[0].name), "a-slow");
    snprintf(eps[1].name, sizeof(eps[1].name), "b-fast");
    ep_sim_start(&eps[0], slow);
    ep_sim_start(&eps[1], fast);
    for (int i = 0; i < 2; i++) {
        ep_add(account, &eps[i], "/v1", NULL);
        ep_limit(account, &eps[i], "gpt-4o-mini", 10000, 60000);
    }
    struct cli_run r = ep_cli(account, 0, "endpoints", "routing", "gpt-4o-mini", "fastest", NULL);
    cli_free(&r);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epfast-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "f", JOBS, "gpt-4o-mini", 20, NULL);
    const char *args[4 + 4 + 1] = {"--concurrency", "2", "--exit-when-idle-ms", "1500"};
    ep_key_args(eps, 2, args, 4, store);
    pid_t pid;
    worker_start_n(account, &eps[0].sim, "epfast", 1, logs, &pid, args);
    assert_true(worker_wait_log(logs[0], "redis connected", 30000));
    worker_enqueue(account, jobs);
    worker_wait_n(&pid, 1, 60000);
    ep_assert_results(account, "f", JOBS, JOBS);
    size_t n_slow, n_fast;
    ep_sim_stop(&eps[0]);
    ep_sim_stop(&eps[1]);
    free(ep_log(&eps[0], &n_slow));
    free(ep_log(&eps[1], &n_fast));
    r = ep_cli(account, 0, "endpoints", "list", "--json", NULL);
    json_t *o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    long long lat[2] = {-1, -1};
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "endpoints"), i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        lat[strcmp(name, "a-slow") == 0 ? 0 : 1] = json_integer_value(json_object_get(e, "lat_ms"));
    }
    json_decref(o);
    cli_free(&r);
    printf("# slow: %zu jobs (%lld ms), fast: %zu jobs (%lld ms)\n", n_slow, lat[0], n_fast,
           lat[1]);
    assert_int_equal(n_slow + n_fast, JOBS);
    assert_true(n_fast * 100 >= 80 * JOBS);
    assert_true(lat[0] >= 200);
    assert_true(lat[1] >= 0 && lat[1] < 150);
    unlink(jobs);
    unlink(logs[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balanced_shares_follow_budgets_azure_mixed),
        cmocka_unit_test(test_fastest_prefers_low_latency),
    };
    return cmocka_run_group_tests_name("endpoints_routing", tests, NULL, NULL);
}
