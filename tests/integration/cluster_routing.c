/* Redis Cluster, 3 primaries: 9 accounts spread 3 per primary, 2 workers
 * serving all of them, jobs enqueued through the CLI with a
 * redis+cluster:// URL: every job ends exactly once with a result (read on
 * the node of its account's slot), no account is over its limit at the API,
 * every primary got the Functions library, each account's keys are on its
 * slot's node only, and `llmq status` names that node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster_support.h"

#define ACCOUNTS 9
#define JOBS_EACH 24
#define RPM 10
#define PERIOD_MS 2600

static void test_nine_accounts_three_shards_two_workers(void **state)
{
    (void)state;
    struct cluster_run r;
    cluster_run_setup(&r, 3, 0, ACCOUNTS, JOBS_EACH, RPM, PERIOD_MS, 20);
    cluster_write_batch(&r, 0, JOBS_EACH);
    char logs[2][128];
    pid_t pids[2];
    const char *args[] = {"--concurrency", "16", "--exit-when-idle-ms", "5000", NULL};
    for (int i = 0; i < 2; i++) {
        worker_log_path(logs[i], "cluster-routing", i);
        pids[i] = cluster_worker_start(&r, logs[i], args);
    }
    for (int i = 0; i < 2; i++)
        assert_true(worker_wait_log(logs[i], "redis connected", 30000));
    cluster_enqueue_all(&r);
    worker_wait_n(pids, 2, 120000);

    cluster_assert_each_job_once(&r);
    size_t n = cluster_assert_limits(&r);
    assert_int_equal(n, ACCOUNTS * JOBS_EACH); /* no fault: one call per job */
    for (int i = 0; i < 3; i++)
        assert_true(cluster_node_has_library(&r, i));
    /* Routed by the slot computed here, not found by following MOVED. */
    for (int i = 0; i < 2; i++)
        assert_int_equal(worker_log_count(logs[i], "slot moved"), 0);

    /* Each account's keys are on its own node and nowhere else, and
     * `llmq status` names that node. */
    for (int k = 0; k < ACCOUNTS; k++) {
        int slot = llmq_test_cluster_account_slot(r.accounts[k]);
        int owner = llmq_test_cluster_owner(&r.cl, slot);
        assert_int_equal(owner, k % 3);
        redisContext *any = llmq_test_cluster_connect(&r.cl, 0);
        redisReply *ks = redisCommand(any, "CLUSTER KEYSLOT llmq:{%s}:q:normal", r.accounts[k]);
        assert_int_equal(ks->integer, slot); /* the slot as Redis computes it */
        freeReplyObject(ks);
        redisFree(any);
        for (int i = 0; i < 3; i++) {
            redisContext *c = llmq_test_cluster_connect(&r.cl, i);
            long long keys = llmq_test_redis_int(c, "CLUSTER COUNTKEYSINSLOT %d", slot);
            assert_true(i == owner ? keys > 0 : keys == 0);
            redisFree(c);
        }
        const char *argv[] = {"llmq", "status", NULL};
        struct cli_run st = cli_run(r.accounts[k], argv);
        assert_int_equal(st.status, 0);
        char want[64];
        snprintf(want, sizeof(want), "127.0.0.1:%d (slot %d)", r.cl.nodes[owner].port, slot);
        if (strstr(st.out, want) == NULL)
            fprintf(stderr, "status of account %d:\n%s\n", k, st.out);
        assert_non_null(strstr(st.out, want));
        cli_free(&st);
    }
    /* --all-accounts asks every primary: each account once, on its node */
    const char *all[] = {"llmq", "status", "--all-accounts", NULL};
    struct cli_run st = cli_run(r.accounts[0], all);
    assert_int_equal(st.status, 0);
    for (int k = 0; k < ACCOUNTS; k++) {
        char want[96];
        snprintf(want, sizeof(want), "account %s\n", r.accounts[k]);
        const char *at = strstr(st.out, want);
        assert_non_null(at);
        assert_null(strstr(at + 1, want));
    }
    cli_free(&st);
    for (int i = 0; i < 2; i++)
        unlink(logs[i]);
    cluster_run_teardown(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nine_accounts_three_shards_two_workers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
