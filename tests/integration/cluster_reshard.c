/* Live resharding of a busy account: 3 primaries, 3 accounts (one per
 * primary), 2 workers serving them all. Mid-run the slot of account 0 is
 * moved to another primary as `redis-cli --cluster reshard` does (SETSLOT
 * IMPORTING/MIGRATING, MIGRATE a few keys at a time with pauses, so calls
 * meet the slot half-moved for seconds, SETSLOT NODE), while a second batch
 * for that account is enqueued through the CLI. No error reaches the CLI or
 * a worker's log (every call met ASK, TRYAGAIN or MOVED and was sent again:
 * the slot guard key makes each call wait for the move instead of running
 * half on each node), every job ends exactly once, no account is over its
 * limit, and the account now lives on the new node, which has the Functions
 * library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster_support.h"

#define ACCOUNTS 3
#define FIRST_BATCH 50
#define SECOND_BATCH 20
#define RPM 20
#define PERIOD_MS 2600

static void test_move_the_slot_of_a_busy_account(void **state)
{
    (void)state;
    struct cluster_run r;
    cluster_run_setup(&r, 3, 0, ACCOUNTS, FIRST_BATCH + SECOND_BATCH, RPM, PERIOD_MS, 100);
    cluster_write_batch(&r, 0, FIRST_BATCH);
    char logs[2][128];
    pid_t pids[2];
    const char *args[] = {"--concurrency", "16", "--exit-when-idle-ms", "6000", NULL};
    for (int i = 0; i < 2; i++) {
        worker_log_path(logs[i], "cluster-reshard", i);
        pids[i] = cluster_worker_start(&r, logs[i], args);
    }
    for (int i = 0; i < 2; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    cluster_enqueue_all(&r);
    assert_true(cluster_wait_ended(&r, 20, 30000));

    int slot = llmq_test_cluster_account_slot(r.accounts[0]);
    assert_int_equal(llmq_test_cluster_owner(&r.cl, slot), 0);
    /* 3 keys per MIGRATE, 40 ms apart: the slot is half-moved for seconds */
    pid_t mover = cluster_move_slot_start(&r, slot, 1, 3, 40, 30);
    usleep(300000);
    /* the CLI meets the slot mid-move */
    cluster_write_jobs(r.jobs[0], 0, FIRST_BATCH, SECOND_BATCH);
    const char *enq[] = {"llmq", "enqueue", r.jobs[0], "--quiet", NULL};
    struct cli_run e = cli_run(r.accounts[0], enq);
    printf("# enqueue during the move: exit %d: %s", e.status, e.err);
    assert_int_equal(e.status, 0);
    /* its one line is the summary: no warning (a limit read as missing), no error */
    assert_int_equal(cli_count_lines(e.err), 1);
    assert_non_null(strstr(e.err, "20 enqueued, 0 already present, 0 invalid"));
    cli_free(&e);
    assert_int_equal(worker_wait(mover, 60000), 0);
    assert_int_equal(llmq_test_cluster_wait_stable(&r.cl, 10000), 0);
    assert_int_equal(llmq_test_cluster_owner(&r.cl, slot), 1);
    /* the other accounts' jobs are done too: write the rest for them */
    for (int k = 1; k < ACCOUNTS; k++) {
        cluster_write_jobs(r.jobs[k], k, FIRST_BATCH, SECOND_BATCH);
        worker_enqueue(r.accounts[k], r.jobs[k]);
    }
    worker_wait_n(pids, 2, 120000);

    cluster_assert_each_job_once(&r);
    cluster_assert_limits(&r);
    assert_true(cluster_node_has_library(&r, 1));
    /* Nothing of the move reached a log as an error; both workers followed. */
    static const char *const errors[] = {"ASK ",          "TRYAGAIN", "MOVED ",  "CLUSTERDOWN",
                                         "non local key", "Z error ", "Z warn ", NULL};
    for (int i = 0; i < 2; i++) {
        for (int k = 0; errors[k] != NULL; k++) {
            int n = worker_log_count(logs[i], errors[k]);
            if (n != 0)
                fprintf(stderr, "worker %d log: %d lines with '%s'\n", i, n, errors[k]);
            assert_int_equal(n, 0);
        }
        assert_true(worker_log_count(logs[i], "slot moved") >= 1);
        unlink(logs[i]);
    }
    cluster_run_teardown(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_move_the_slot_of_a_busy_account),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
