/* Several budgets on one job's path (docs/spend.md): all must fit,
 * so the tighter binds. Tenant acme has 3000 tokens and its user bob 800:
 * bob's jobs stop at his 800, alice's (acme, no budget of her own) run on
 * to acme's 3000, and bob's count inside acme's too. Tenant beta has 900
 * and its user carol 100000: carol stops at beta's 900. A budget set to
 * dead-letter (--on-exhaust dead) ends what does not fit with reason
 * budget_exhausted instead of parking it. A worker's /metrics shows each
 * budget's spend and what is left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "spend_support.h"

#define N 40

static void budget(const struct spend_account *a, const char *tenant, const char *user,
                   const char *tokens, const char *on_exhaust)
{
    const char *argv[16] = {"llmq", "budgets", "set", "--tenant", tenant};
    int n = 5;
    if (user != NULL) {
        argv[n++] = "--user";
        argv[n++] = user;
    }
    argv[n++] = "--tokens";
    argv[n++] = tokens;
    argv[n++] = "--period";
    argv[n++] = "day";
    if (on_exhaust != NULL) {
        argv[n++] = "--on-exhaust";
        argv[n++] = on_exhaust;
    }
    argv[n] = NULL;
    free(spend_cli(a, 0, argv));
}

static void enqueue(const struct spend_account *a, const char *prefix, int n, const char *tenant,
                    const char *user)
{
    char jobs[128];
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-spendscope-%d-%s.jsonl", (int)getpid(), prefix);
    spend_write_jobs(jobs, prefix, n, tenant, user, 40);
    worker_enqueue(a->name, jobs);
    unlink(jobs);
}

static void test_tighter_budget_binds(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spendscope");
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    budget(&a, "acme", NULL, "3000", NULL);
    budget(&a, "acme", "bob", "800", NULL);
    budget(&a, "beta", NULL, "900", NULL);
    budget(&a, "beta", "carol", "100000", NULL);
    enqueue(&a, "bob", N, "acme", "bob");
    enqueue(&a, "alice", 2 * N, "acme", "alice");
    enqueue(&a, "carol", N, "beta", "carol");
    char logs[3][128];
    pid_t pids[3];
    worker_start_n(a.name, &sim, "spendscope", 2, logs, pids, NULL);
    int port = llmq_test_free_port();
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *margs[] = {"--metrics-port", port_s, NULL};
    worker_log_path(logs[2], "spendscope", 2);
    pids[2] = worker_start(a.name, &sim, logs[2], margs);
    const char *groups[] = {"bob", "alice", "carol"};
    const int counts[] = {N, 2 * N, N};
    assert_true(spend_wait_settled(&a, groups, counts, 3, 30000));
    /* /metrics: each budget's spend and what is left, today's spend */
    long long bob_spent = spend_budget_field(&a, "t/acme/u/bob#tokens/day", "spent");
    char want[256];
    snprintf(want, sizeof(want),
             "llmq_budget_spent{account=\"%s\",budget=\"t/acme/u/bob#tokens/day\","
             "unit=\"tokens\"} %lld\n",
             a.name, bob_spent);
    struct worker_page pg = worker_http_wait_for(port, "/metrics", want, 12000);
    if (strstr(pg.body, want) == NULL)
        fprintf(stderr, "want %s in:\n%s\n", want, pg.body);
    assert_non_null(strstr(pg.body, want));
    snprintf(want, sizeof(want),
             "llmq_budget_remaining{account=\"%s\",budget=\"t/acme/u/bob#tokens/day\","
             "unit=\"tokens\"} %lld\n",
             a.name, 800 - bob_spent);
    assert_non_null(strstr(pg.body, want));
    assert_non_null(strstr(pg.body, "llmq_budget_waiting_jobs{"));
    assert_true(worker_metric_sum(pg.body, "llmq_spend_today_tokens", a.name) > 0);
    free(pg.body);
    spend_workers_stop(pids, 3);
    assert_int_equal(sim_proc_stop(&sim), 0);
    struct spend_real bob = spend_real_read(&a, "bob", N);
    struct spend_real alice = spend_real_read(&a, "alice", 2 * N);
    struct spend_real carol = spend_real_read(&a, "carol", N);
    printf("# bob %lld tokens (%lld jobs), alice %lld (%lld), carol %lld (%lld)\n", bob.total,
           bob.done, alice.total, alice.done, carol.total, carol.done);
    /* bob: his own budget binds, within acme's */
    assert_true(bob.total <= 800 && bob.total * 100 >= 800 * 85);
    assert_true(bob.queued > 0);
    /* acme: bob's and alice's together */
    assert_true(bob.total + alice.total <= 3000 && (bob.total + alice.total) * 100 >= 3000 * 85);
    assert_true(alice.queued > 0);
    /* carol: beta's binds, not her own */
    assert_true(carol.total <= 900 && carol.total * 100 >= 900 * 85);
    assert_true(carol.queued > 0);
    assert_int_equal(bob_spent, bob.total);
    assert_int_equal(bob.dead + alice.dead + carol.dead, 0);
    assert_int_equal(spend_budget_field(&a, "t/acme#tokens/day", "spent"), bob.total + alice.total);
    assert_int_equal(spend_budget_field(&a, "t/acme/u/bob#tokens/day", "spent"), bob.total);
    assert_int_equal(spend_budget_field(&a, "t/beta/u/carol#tokens/day", "spent"), carol.total);
    for (int i = 0; i < 3; i++)
        unlink(logs[i]);
    unlink(sim.log_file);
    spend_account_close(&a);
}

static void test_on_exhaust_dead(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spenddead");
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    budget(&a, "acme", NULL, "600", "dead");
    enqueue(&a, "d", N, "acme", NULL);
    char logs[2][128];
    pid_t pids[2];
    worker_start_n(a.name, &sim, "spenddead", 2, logs, pids, NULL);
    const char *groups[] = {"d"};
    const int counts[] = {N};
    assert_true(spend_wait_settled(&a, groups, counts, 1, 30000));
    spend_workers_stop(pids, 2);
    assert_int_equal(sim_proc_stop(&sim), 0);
    struct spend_real d = spend_real_read(&a, "d", N);
    printf("# %lld done (%lld tokens), %lld dead\n", d.done, d.total, d.dead);
    assert_true(d.total <= 600);
    assert_true(d.dead > 0);
    assert_int_equal(d.done + d.dead, N);
    /* every dead one was never sent, with reason budget_exhausted */
    char key[256];
    snprintf(key, sizeof(key), "%sdead", a.prefix);
    redisReply *r = redisCommand(a.c, "XRANGE %s - +", key);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
    assert_int_equal((long long)r->elements, d.dead);
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *f = r->element[i]->element[1];
        for (size_t k = 0; k + 1 < f->elements; k += 2)
            if (strcmp(f->element[k]->str, "reason") == 0)
                assert_string_equal(f->element[k + 1]->str, "budget_exhausted");
    }
    freeReplyObject(r);
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    assert_int_equal((long long)n, d.done);
    free(e);
    for (int i = 0; i < 2; i++)
        unlink(logs[i]);
    unlink(sim.log_file);
    spend_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tighter_budget_binds),
        cmocka_unit_test(test_on_exhaust_dead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
