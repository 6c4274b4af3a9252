/* A budget's period rolls over (docs/spend.md):
 *   - a tenant's token budget of a 3-second period parks its jobs once
 *     spent and resumes them at each roll-over, by itself (no raise), until
 *     all ran: nothing is dead-lettered, every job runs once, and what the
 *     jobs granted in one period really used (their results' usage, by the
 *     job's run_ms on Redis' clock) stays within the budget in every period;
 *   - periods do not bleed: a job granted in one period and settled in a
 *     later one, with a usage below its charge, leaves the later period's
 *     spend alone: it holds only what was granted in it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "spend_support.h"

#define JOBS 30
#define PERIOD_S 3
#define BUDGET 500

static void test_rollover_resumes_parked_jobs(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spendroll");
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    char jobs[128];
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-spendroll-%d.jsonl", (int)getpid());
    const char *b[] = {"llmq",     "budgets", "set",        "--tenant", "acme",
                       "--tokens", "500",     "--period-s", "3",        NULL};
    free(spend_cli(&a, 0, b));
    spend_write_jobs(jobs, "r", JOBS, "acme", NULL, 40);
    worker_enqueue(a.name, jobs);
    char logs[2][128];
    pid_t pids[2];
    worker_start_n(a.name, &sim, "spendroll", 2, logs, pids, NULL);

    /* parked at least once: jobs queued, none running, some done */
    long long deadline = llmq_test_now_ms() + 20000;
    int parked = 0;
    while (!parked && llmq_test_now_ms() < deadline) {
        struct spend_real s = spend_real_read(&a, "r", JOBS);
        parked = s.queued > 0 && s.running == 0 && s.done > 0 &&
                 spend_budget_field(&a, "t/acme#tokens/3s", "waiting_jobs") > 0;
        usleep(50000);
    }
    assert_true(parked);
    /* then every job runs, with no raise */
    deadline = llmq_test_now_ms() + 30000;
    struct spend_real s = {0};
    while (llmq_test_now_ms() < deadline) {
        s = spend_real_read(&a, "r", JOBS);
        if (s.done + s.dead == JOBS)
            break;
        usleep(100000);
    }
    assert_int_equal(s.dead, 0);
    assert_int_equal(s.done, JOBS);
    assert_int_equal(s.attempts_1, JOBS);
    spend_workers_stop(pids, 2);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* per period: what its grants used, within the budget */
    long long used[64] = {0};
    int periods = 0;
    for (int i = 0; i < JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "r-%d", i);
        long long run_ms = llmq_test_job_int(a.c, a.prefix, id, "run_ms", -1);
        char *text = llmq_test_job_result(a.c, a.prefix, id);
        assert_non_null(text);
        json_t *line = json_loads(text, 0, NULL);
        free(text);
        long long tok = json_integer_value(json_object_get(
            json_object_get(json_object_get(json_object_get(line, "response"), "body"), "usage"),
            "total_tokens"));
        json_decref(line);
        long long p = run_ms / (PERIOD_S * 1000);
        used[p % 64] += tok;
    }
    for (int i = 0; i < 64; i++) {
        if (used[i] > 0) {
            periods++;
            assert_true(used[i] <= BUDGET);
        }
    }
    printf("# %d jobs ran over %d periods of %d s\n", JOBS, periods, PERIOD_S);
    assert_true(periods >= 2);
    unlink(jobs);
    unlink(sim.log_file);
    for (int i = 0; i < 2; i++)
        unlink(logs[i]);
    spend_account_close(&a);
}

/* Redis' clock (TIME), ms. */
static long long redis_now_ms(redisContext *c)
{
    redisReply *r = redisCommand(c, "TIME");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    long long ms =
        strtoll(r->element[0]->str, NULL, 10) * 1000 + strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    return ms;
}

/* Waits (a deadline against hanging) until job id of a has state st. */
static void wait_job_state(const struct spend_account *a, const char *id, const char *st)
{
    long long deadline = llmq_test_now_ms() + 30000;
    for (;;) {
        char *v = llmq_test_job_field(a->c, a->prefix, id, "state");
        int there = v != NULL && strcmp(v, st) == 0;
        free(v);
        if (there)
            return;
        assert_true(llmq_test_now_ms() < deadline);
        usleep(10000);
    }
}

/* The period start ("p") and spend of budget id of a, from its hash. */
static void budget_period_spent(const struct spend_account *a, const char *id, long long *p,
                                long long *spent)
{
    redisReply *r = redisCommand(a->c, "HMGET %sbudget:%s p spent", a->prefix, id);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->element[0]->type, REDIS_REPLY_STRING);
    assert_int_equal(r->element[1]->type, REDIS_REPLY_STRING);
    *p = strtoll(r->element[0]->str, NULL, 10);
    *spent = strtoll(r->element[1]->str, NULL, 10);
    freeReplyObject(r);
}

static void test_settle_after_rollover_leaves_new_period_alone(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spendbleed");
    /* Every answer takes 6 s: three periods of 2 s. */
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", "6000", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    const char *b[] = {"llmq",     "budgets", "set",        "--tenant", "acme",
                       "--tokens", "1000000", "--period-s", "2",        NULL};
    free(spend_cli(&a, 0, b));
    const char *id = "t/acme#tokens/2s";
    char log[128], jobs[128];
    snprintf(log, sizeof(log), "/tmp/llmq-spendbleed-%d.log", (int)getpid());
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-spendbleed-%d.jsonl", (int)getpid());
    /* Job A is granted in one period: its charge (prompt + 200) is spent.
     * (Enqueued first: the worker exits once idle, and has A in hand from
     * its first dispatch until B is enqueued.) */
    spend_write_jobs(jobs, "a", 1, "acme", NULL, 200);
    worker_enqueue(a.name, jobs);
    const char *args[] = {"--concurrency", "4", "--exit-when-idle-ms", "1500", NULL};
    pid_t w = worker_start(a.name, &sim, log, args);
    wait_job_state(&a, "a-0", "running");
    long long p_a, spent_a;
    budget_period_spent(&a, id, &p_a, &spent_a);
    assert_true(spent_a > 200);
    /* Job B is granted in a later one, while A's call is still out. */
    while (redis_now_ms(a.c) < p_a + 2000)
        usleep(10000);
    spend_write_jobs(jobs, "b", 1, "acme", NULL, 200);
    worker_enqueue(a.name, jobs);
    wait_job_state(&a, "b-0", "running");
    char *st_a = llmq_test_job_field(a.c, a.prefix, "a-0", "state");
    assert_string_equal(st_a, "running"); /* A settles after B's grant */
    free(st_a);
    long long p_b, spent_b;
    budget_period_spent(&a, id, &p_b, &spent_b);
    printf("# A granted in the period of %lld (spent %lld), B in that of %lld (spent %lld)\n", p_a,
           spent_a, p_b, spent_b);
    assert_true(p_b > p_a);
    assert_int_equal(spent_b, spent_a); /* the same charge: only B's */

    /* A settles (in B's period or later), then B. */
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    struct spend_real ra = spend_real_read(&a, "a", 1), rb = spend_real_read(&a, "b", 1);
    assert_int_equal(ra.done, 1);
    assert_int_equal(rb.done, 1);
    assert_true(ra.total < spent_a); /* A used less than its charge */
    long long p_end, spent_end;
    budget_period_spent(&a, id, &p_end, &spent_end);
    printf("# A used %lld, B used %lld; B's period (%lld) spent %lld\n", ra.total, rb.total, p_end,
           spent_end);
    /* B's period holds B's usage only: A's settle, of an earlier period's
     * charge, changed nothing in it. */
    assert_int_equal(p_end, p_b);
    assert_int_equal(spent_end, rb.total);
    unlink(jobs);
    unlink(log);
    unlink(sim.log_file);
    spend_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rollover_resumes_parked_jobs),
        cmocka_unit_test(test_settle_after_rollover_leaves_new_period_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
