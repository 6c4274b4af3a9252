/* Redis Cluster failover under load: 3 primaries with a replica each, 9
 * accounts spread 3 per primary, 2 workers serving all of them. Mid-run the
 * primary of 3 accounts is SIGKILLed (its replica takes over after the
 * cluster's node timeout), then another primary hands over to its replica
 * (CLUSTER FAILOVER); a second batch is enqueued through the CLI after both.
 * The workers and the CLI find the new primaries by themselves (the killed
 * node is the first seed of the URL): every job ends exactly once with one
 * result, none is lost, and no account is over its limit at the API. A call
 * in flight on the killed node may reach the API twice (its settle was lost
 * with the node, the job reclaimed): counted, allowed, still one result.
 *
 * Redis replication is asynchronous: a write acknowledged by the killed
 * primary in the last moment before the kill can be lost with it (as with
 * Sentinel); on loopback that window is far shorter than any call here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster_support.h"

#define ACCOUNTS 9
#define FIRST_BATCH 20
#define SECOND_BATCH 10
#define RPM 10
#define PERIOD_MS 2600

static void test_sigkill_a_primary_and_fail_over_another(void **state)
{
    (void)state;
    struct cluster_run r;
    /* Calls take 400 ms: the kill finds many in flight. */
    cluster_run_setup(&r, 3, 1, ACCOUNTS, FIRST_BATCH + SECOND_BATCH, RPM, PERIOD_MS, 400);
    cluster_write_batch(&r, 0, FIRST_BATCH);
    char logs[2][128];
    pid_t pids[2];
    /* A job whose delivery died with the node is reclaimed after 4 s. */
    const char *args[] = {"--concurrency", "16", "--exit-when-idle-ms", "8000", "--visibility-ms",
                          "4000",          NULL};
    for (int i = 0; i < 2; i++) {
        worker_log_path(logs[i], "cluster-failover", i);
        pids[i] = cluster_worker_start(&r, logs[i], args);
    }
    for (int i = 0; i < 2; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    cluster_enqueue_all(&r);

    /* Mid-run: some of the first window's calls answered, the others in
     * flight, the rest of the jobs queued. */
    assert_true(cluster_wait_ended(&r, 10, 30000));
    long long before_kill = cluster_jobs_ended(&r);
    llmq_test_cluster_kill(&r.cl, 0);
    assert_int_equal(llmq_test_cluster_wait_stable(&r.cl, 20000), 0);
    assert_int_equal(llmq_test_cluster_owner(&r.cl, llmq_test_cluster_account_slot(r.accounts[0])),
                     3); /* its replica serves the killed node's slots */
    /* Node 4 is the replica of primary 1. */
    assert_int_equal(llmq_test_cluster_failover(&r.cl, 4, 15000), 0);
    assert_int_equal(llmq_test_cluster_wait_stable(&r.cl, 20000), 0);
    assert_int_equal(llmq_test_cluster_owner(&r.cl, llmq_test_cluster_account_slot(r.accounts[1])),
                     4);
    long long after_failovers = cluster_jobs_ended(&r);
    assert_true(before_kill < ACCOUNTS * FIRST_BATCH); /* it was mid-run */
    printf("# jobs ended before the kill: %lld, after both failovers: %lld\n", before_kill,
           after_failovers);

    /* The CLI finds the new primaries too (its first seed is dead). */
    cluster_write_batch(&r, FIRST_BATCH, SECOND_BATCH);
    cluster_enqueue_all(&r);
    worker_wait_n(pids, 2, 120000);

    cluster_assert_each_job_once(&r);
    size_t calls = cluster_assert_limits(&r);
    printf("# %zu calls for %d jobs\n", calls, ACCOUNTS * (FIRST_BATCH + SECOND_BATCH));
    /* The new primaries have the library (replicated, or loaded). */
    assert_true(cluster_node_has_library(&r, 3));
    assert_true(cluster_node_has_library(&r, 4));
    /* Both workers saw the loss and came back. */
    for (int i = 0; i < 2; i++) {
        assert_true(worker_log_count(logs[i], "connection lost") > 0 ||
                    worker_log_count(logs[i], "slot moved") > 0);
        unlink(logs[i]);
    }
    cluster_run_teardown(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_a_primary_and_fail_over_another),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
