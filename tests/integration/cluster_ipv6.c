/* Redis Cluster over IPv6 loopback: 3 primaries that meet and announce
 * themselves on ::1, a URL of bracketed IPv6 seeds
 * (redis+cluster://[::1]:P1,[::1]:P2,...), 3 accounts (one per primary), one
 * worker serving them all, jobs enqueued through the CLI. The slot map names
 * the nodes by their IPv6 address, so every connection llmq makes after the
 * first goes to "::1". Mid-run the slot of account 0 moves to another
 * primary: the worker follows the MOVED naming "::1:port" (the port after
 * the last colon). Every job ends exactly once with a result, no account is
 * over its limit, and `llmq status` names the node as [::1]:port. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster_support.h"
#include "redis/cluster_reply.h"

#define ACCOUNTS 3
#define FIRST_BATCH 12
#define SECOND_BATCH 8
#define RPM 20
#define PERIOD_MS 2600

/* The host node i names the primary of slot 0 by in CLUSTER SLOTS, into host. */
static void slot0_host(struct cluster_run *r, int i, char *host, size_t n)
{
    redisContext *c = llmq_test_cluster_connect(&r->cl, i);
    assert_non_null(c);
    redisReply *rep = redisCommand(c, "CLUSTER SLOTS");
    struct llmq_cluster_map *map = malloc(sizeof(*map));
    assert_true(llmq_cluster_slots_parse(rep, "127.0.0.1", map) == LLMQ_CLUSTER_SLOTS);
    snprintf(host, n, "%s", map->nodes[map->owner[0]].host);
    free(map);
    freeReplyObject(rep);
    redisFree(c);
}

static void test_ipv6_seeds_route_and_follow_moved(void **state)
{
    (void)state;
    struct cluster_run r;
    cluster_run_setup_on(&r, "::1", 3, 0, ACCOUNTS, FIRST_BATCH + SECOND_BATCH, RPM, PERIOD_MS, 20);
    printf("# cluster url: %s\n", r.cl.url);
    assert_true(strncmp(r.cl.url, "redis+cluster://[::1]:", 22) == 0);
    char host[64];
    slot0_host(&r, 0, host, sizeof(host));
    assert_string_equal(host, "::1"); /* the map llmq is given names IPv6 addresses */

    cluster_write_batch(&r, 0, FIRST_BATCH);
    char log[128];
    worker_log_path(log, "cluster-ipv6", 0);
    const char *args[] = {"--concurrency", "8", "--exit-when-idle-ms", "5000", NULL};
    pid_t pid = cluster_worker_start(&r, log, args);
    assert_true(worker_wait_log(log, "redis connected", 30000));
    cluster_enqueue_all(&r);
    assert_true(cluster_wait_ended(&r, ACCOUNTS * FIRST_BATCH, 60000));

    int slot = llmq_test_cluster_account_slot(r.accounts[0]);
    long long moved = 0;
    assert_int_equal(llmq_test_cluster_move_slot(&r.cl, slot, 1, 100, 0, &moved), 0);
    assert_true(moved > 0);
    assert_int_equal(llmq_test_cluster_wait_stable(&r.cl, 10000), 0);
    assert_int_equal(llmq_test_cluster_owner(&r.cl, slot), 1);
    cluster_write_batch(&r, FIRST_BATCH, SECOND_BATCH);
    cluster_enqueue_all(&r);
    worker_wait_n(&pid, 1, 120000);

    cluster_assert_each_job_once(&r);
    cluster_assert_limits(&r);
    /* the worker left node 0 for node 1, both named by their IPv6 address */
    char want[96];
    snprintf(want, sizeof(want), "slot moved from ::1:%d to ::1:%d", r.cl.nodes[0].port,
             r.cl.nodes[1].port);
    if (worker_log_count(log, want) == 0) {
        char *text = cli_slurp(log);
        fprintf(stderr, "worker log:\n%s\n", text);
        free(text);
    }
    assert_true(worker_log_count(log, want) >= 1);
    for (int k = 0; k < ACCOUNTS; k++) {
        const char *argv[] = {"llmq", "status", NULL};
        struct cli_run st = cli_run(r.accounts[k], argv);
        assert_int_equal(st.status, 0);
        int owner = llmq_test_cluster_owner(&r.cl, llmq_test_cluster_account_slot(r.accounts[k]));
        snprintf(want, sizeof(want), "redis node: [::1]:%d (slot %d)", r.cl.nodes[owner].port,
                 llmq_test_cluster_account_slot(r.accounts[k]));
        if (strstr(st.out, want) == NULL)
            fprintf(stderr, "status of account %d:\n%s\n", k, st.out);
        assert_non_null(strstr(st.out, want));
        cli_free(&st);
    }
    unlink(log);
    cluster_run_teardown(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipv6_seeds_route_and_follow_moved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
