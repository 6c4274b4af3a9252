/* Three endpoints of one model, each its own openai-sim with its own key and
 * limit (40, 80 and 120 requests per 4 s), served by 4 workers that hold the
 * three keys: together they deliver at least 95% of the sum of the budgets
 * in every full period, no endpoint ever sees a request over its limit (the
 * sims answer no limit 429), each sim sees only its own key (else 401), and
 * every job runs exactly once (one answered request, one result). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

#define N_EP 3
#define WORKERS 4
#define SIM_PERIOD_MS 4000
/* llmq's window is this much longer than the APIs' (the arrival guard,
 * pinned: see worker_shared_limit.c); the over-limit judge is strict at the
 * APIs' period. */
#define GUARD_MS 300
#define LLMQ_PERIOD_MS (SIM_PERIOD_MS + GUARD_MS)
#define JOBS 1150

static const int rpm[N_EP] = {40, 80, 120};

static void test_three_endpoints_fill_their_budgets(void **state)
{
    (void)state;
    char account[64], jobs[128], logs[WORKERS][128], store[N_EP][96];
    llmq_test_unique_name(account, sizeof(account), "ep3");
    struct ep_sim eps[N_EP];
    int budget = 0;
    for (int i = 0; i < N_EP; i++) {
        char rpm_s[16], period_s[16];
        snprintf(rpm_s, sizeof(rpm_s), "%d", rpm[i]);
        snprintf(period_s, sizeof(period_s), "%d", SIM_PERIOD_MS);
        const char *args[] = {
            "--rpm", rpm_s, "--period-ms", period_s, "--latency-ms", "20", "--ratelimit-headers",
            "none",  NULL};
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], args);
        ep_add(account, &eps[i], "/v1", NULL);
        ep_limit(account, &eps[i], "gpt-4o-mini", rpm[i], LLMQ_PERIOD_MS);
        budget += rpm[i];
    }
    struct cli_run r = ep_cli(account, 0, "limits", "policy", "--window-guard-ms", "0", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "endpoints", "list", "--json", NULL);
    json_t *list = json_loads(r.out, 0, NULL);
    assert_non_null(list);
    assert_int_equal(json_array_size(json_object_get(list, "endpoints")), N_EP);
    json_decref(list);
    cli_free(&r);

    snprintf(jobs, sizeof(jobs), "/tmp/llmq-ep3-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "j", JOBS, "gpt-4o-mini", 20, NULL);
    pid_t pids[WORKERS];
    const char *args[4 + 2 * N_EP + 1] = {"--concurrency", "16", "--exit-when-idle-ms", "3000"};
    ep_key_args(eps, N_EP, args, 4, store);
    worker_start_n(account, &eps[0].sim, "ep3", WORKERS, logs, pids, args);
    for (int i = 0; i < WORKERS; i++) {
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
        /* each says which endpoints it serves */
        assert_true(worker_wait_log(logs[i], "endpoints served: ep0,ep1,ep2", 1000));
    }
    worker_enqueue(account, jobs);
    worker_wait_n(pids, WORKERS, 120000);
    ep_assert_results(account, "j", JOBS, JOBS);

    /* Per endpoint: never over its limit in any window of its period, no
     * limit 429, no other key; all together: every job answered once. */
    struct sim_entry *all = calloc(JOBS * 2, sizeof(*all));
    size_t n_all = 0;
    int *answered = calloc(JOBS, sizeof(int));
    for (int i = 0; i < N_EP; i++) {
        assert_int_equal(sim_proc_stop(&eps[i].sim), 0);
        size_t n;
        struct sim_entry *e = ep_log(&eps[i], &n);
        int ok, limited, other = 0;
        sim_log_outcomes(e, n, &ok, &limited);
        for (size_t k = 0; k < n; k++) {
            other += e[k].status == 401;
            int id = -1;
            if (strcmp(e[k].outcome, "ok") == 0 && sscanf(e[k].job, "j-%d", &id) == 1 && id >= 0 &&
                id < JOBS)
                answered[id]++;
            if (n_all < JOBS * 2)
                all[n_all++] = e[k];
        }
        size_t most = ep_max_in_window(e, n, SIM_PERIOD_MS);
        printf("# %s: %d answered, %d limit 429s, most in one period %zu of %d\n", eps[i].name, ok,
               limited, most, rpm[i]);
        assert_int_equal(limited, 0);
        assert_int_equal(other, 0);
        assert_true(most <= (size_t)rpm[i]);
        assert_true(ok > 0);
        free(e);
    }
    for (int i = 0; i < JOBS; i++)
        assert_int_equal(answered[i], 1);
    sim_log_sort(all, n_all);
    long long first, last;
    /* >= 95% of the sum of the three budgets in every full period */
    sim_log_check_budget_used(all, n_all, "", budget, LLMQ_PERIOD_MS, &first, &last);
    free(all);
    free(answered);
    unlink(jobs);
    for (int i = 0; i < WORKERS; i++)
        unlink(logs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_endpoints_fill_their_budgets),
    };
    return cmocka_run_group_tests_name("endpoints_three", tests, NULL, NULL);
}
