/* Fair share by default: tenant A enqueues a backlog, a moment later tenant
 * B a small batch, no tenant limits configured. Within one priority keys are
 * served by weighted fair queuing on cost, so B's batch is sent at its fair
 * share of the model's budget (half of it, both weights 1) rather than after
 * A's backlog: while B's jobs go out, about as many of A's go out as of B's.
 * Second case: B's weight is 3 (`llmq limits set … --weight 3`), so A gets a
 * quarter: about one of A's jobs for every three of B's. The counts come
 * from the API's access log (the order the requests reached it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define N_A 600
#define N_B 30
#define RPM 100
#define SIM_PERIOD_MS 10000
/* The guard against arrival jitter (see sched_two_models): llmq's window is
 * this much longer than the API's, so a loaded machine's late arrivals are
 * never over the API's limit. */
#define ARRIVAL_GUARD_MS 1000
#define LLMQ_PERIOD_MS (SIM_PERIOD_MS + ARRIVAL_GUARD_MS)

/* Runs the scenario with B's weight (NULL: default); returns how many of A's
 * jobs reached the API after B's batch was enqueued and before B's last
 * request (FIFO: all of A's remaining backlog). */
static int a_jobs_during_b(const char *tag, const char *b_weight)
{
    char account[64], jobs_a[128], jobs_b[128], log[128], rpm[16], period[16];
    llmq_test_unique_name(account, sizeof(account), tag);
    snprintf(rpm, sizeof(rpm), "%d", RPM);
    snprintf(period, sizeof(period), "%d", SIM_PERIOD_MS);
    struct sim_proc sim;
    const char *sim_args[] = {
        "--rpm", rpm, "--period-ms", period, "--latency-ms", "20", "--ratelimit-headers",
        "none",  NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    worker_limits_set(account, "gpt-4o-mini", "--rpm", RPM, LLMQ_PERIOD_MS);
    if (b_weight != NULL) {
        const char *w[] = {"llmq",     "limits",   "set",    "gpt-4o-mini", "--tenant",
                           "tenant-b", "--weight", b_weight, NULL};
        struct cli_run r = cli_run(account, w);
        assert_int_equal(r.status, 0);
        cli_free(&r);
    }
    snprintf(jobs_a, sizeof(jobs_a), "/tmp/llmq-fair-%s-%d-a.jsonl", tag, (int)getpid());
    snprintf(jobs_b, sizeof(jobs_b), "/tmp/llmq-fair-%s-%d-b.jsonl", tag, (int)getpid());
    worker_write_jobs(jobs_a, "a", N_A, "gpt-4o-mini", 20, "{\"tenant\":\"tenant-a\"}");
    worker_write_jobs(jobs_b, "b", N_B, "gpt-4o-mini", 20, "{\"tenant\":\"tenant-b\"}");

    /* A's backlog is being served when B's batch arrives. */
    worker_enqueue(account, jobs_a);
    snprintf(log, sizeof(log), "/tmp/llmq-fair-%s-%d.log", tag, (int)getpid());
    /* Few slots, so that the order requests reach the API is the order the
     * scheduler granted them: a request granted before another can be
     * overtaken only by the ones in the other slots. With 32 slots, the
     * window's burst of frees is granted in a few large calls and, on a
     * loaded machine, a call's last requests (B's tail) reached the API
     * after the A's of the same call and the next: the log then showed up
     * to 27 of A's "during" B while the grants were 3 of B's per one of A's. */
    const char *args[] = {"--concurrency", "4", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    redisContext *c = llmq_test_redis_connect();
    char key[256];
    snprintf(key, sizeof(key), "llmq:{%s}:stats", account);
    while (redis_int(c, "HGET %s %s", key, "done") < RPM) /* the first window's worth */
        usleep(10000);
    worker_enqueue(account, jobs_b);
    /* B's enqueue time: Redis TIME, the same host clock as the sim's log */
    snprintf(key, sizeof(key), "llmq:{%s}:", account);
    long long b_enq_ms = llmq_test_job_int(c, key, "b-0", "enq_ms", -1);
    assert_true(b_enq_ms > 0);
    /* Until B's batch is done (under FIFO: after A's whole backlog); then the
     * rest of A's backlog is handed back. */
    for (int i = 0; i < N_B; i++) {
        snprintf(key, sizeof(key), "llmq:{%s}:res:b-%d", account, i);
        while (redis_int(c, "EXISTS %s%s", key, "") != 1)
            usleep(10000);
    }
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    redisFree(c);

    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    sim_log_sort(e, n);
    long long b_last_ms = -1;
    int limited = 0;
    for (size_t i = 0; i < n; i++) {
        limited += strncmp(e[i].outcome, "limit_", 6) == 0;
        if (e[i].job[0] == 'b')
            b_last_ms = e[i].t_ms;
    }
    assert_int_equal(limited, 0);
    assert_true(b_last_ms >= b_enq_ms);
    int a_during = 0, b_sent = 0;
    /* The order requests reached the API from B's enqueue on (a: A's, b:
     * B's, first 80), and the times of the first and last of B's: what a
     * failure needs to be read. */
    char order[81];
    size_t k = 0;
    long long b_first_ms = -1;
    for (size_t i = 0; i < n; i++) {
        if (e[i].t_ms < b_enq_ms)
            continue;
        a_during += e[i].job[0] == 'a' && e[i].t_ms <= b_last_ms;
        if (e[i].job[0] == 'b') {
            b_sent++;
            if (b_first_ms < 0)
                b_first_ms = e[i].t_ms;
        }
        if (k < sizeof(order) - 1)
            order[k++] = e[i].job[0];
    }
    order[k] = '\0';
    printf("# %s: %d of A's jobs went out while B's %d did (A's backlog: %d)\n", tag, a_during, N_B,
           N_A);
    printf("# %s: B's requests %d, first %lld ms and last %lld ms after B's enqueue; order: %s\n",
           tag, b_sent, b_first_ms - b_enq_ms, b_last_ms - b_enq_ms, order);
    free(e);
    unlink(jobs_a);
    unlink(jobs_b);
    unlink(log);
    return a_during;
}

static void test_small_batch_gets_its_share(void **state)
{
    (void)state;
    /* Equal weights: about one of A's per one of B's (requests of one
     * millisecond have no order in the log: allow up to twice that); FIFO
     * would send all of A's remaining backlog (~500) first. */
    int a = a_jobs_during_b("fair1", NULL);
    assert_true(a <= 2 * N_B);
}

static void test_weight_shifts_the_share(void **state)
{
    (void)state;
    /* B weighs 3: about one of A's per three of B's (10); equal shares
     * would be 30. */
    int a = a_jobs_during_b("fair3", "3");
    assert_true(a <= 2 * N_B / 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_batch_gets_its_share),
        cmocka_unit_test(test_weight_shifts_the_share),
    };
    return cmocka_run_group_tests_name("sched_tenant_fairness", tests, NULL, NULL);
}
