/* Helpers of the Redis Cluster end-to-end tests (cluster_*.c): accounts
 * spread over the shards of a test cluster (tests/support/cluster_fixture.h),
 * workers serving all of them, and the checks every scenario makes — each
 * job has exactly one end (one result, one event), read from the node that
 * serves its account with the test's own connections, and no account's
 * requests reached the API over its limit. Header-only (static inline). */
#ifndef LLMQ_TEST_CLUSTER_SUPPORT_H
#define LLMQ_TEST_CLUSTER_SUPPORT_H

#include "cluster_fixture.h"
#include "worker_support.h"

#define CLUSTER_MODEL "gpt-4o-mini"
#define CLUSTER_ACCOUNTS_MAX 16

struct cluster_run {
    struct llmq_test_cluster cl;
    struct sim_proc sim;
    char accounts[CLUSTER_ACCOUNTS_MAX][64];
    int n_accounts;
    int jobs_each;
    int rpm;       /* each account's limit: rpm requests... */
    int period_ms; /* ...per this window (llmq's) */
    int judge_ms;  /* the API's window the arrivals are judged in */
    char jobs[CLUSTER_ACCOUNTS_MAX][128];
};

/* Starts the cluster on host (llmq_test_cluster_start_on) and the sim,
 * points every CLI and worker of the test at the cluster
 * (LLMQ_TEST_REDIS_URL), spreads n accounts over the primaries and sets
 * each one's limit (rpm per period_ms, no window guard: the judged window is
 * 600 ms shorter, as worker_shared_limit); the sim answers each call after
 * latency_ms. Jobs are "a<k>-<i>", i in 0..jobs_each, written by
 * cluster_write_batch. */
static inline void cluster_run_setup_on(struct cluster_run *r, const char *host, int primaries,
                                        int replicas_each, int n_accounts, int jobs_each, int rpm,
                                        int period_ms, int latency_ms)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(llmq_test_cluster_start_on(&r->cl, host, primaries, replicas_each), 0);
    setenv("LLMQ_TEST_REDIS_URL", r->cl.url, 1);
    assert_string_equal(llmq_test_redis_url(), r->cl.url);
    char latency[16];
    snprintf(latency, sizeof(latency), "%d", latency_ms);
    const char *sim_args[] = {"--latency-ms", latency, "--ratelimit-headers", "none", NULL};
    assert_int_equal(sim_proc_start(&r->sim, sim_args), 0);
    r->n_accounts = n_accounts;
    r->jobs_each = jobs_each;
    r->rpm = rpm;
    r->period_ms = period_ms;
    r->judge_ms = period_ms - 600;
    llmq_test_cluster_spread_accounts(&r->cl, "cl", n_accounts, r->accounts);
    for (int k = 0; k < n_accounts; k++) {
        worker_limits_set(r->accounts[k], CLUSTER_MODEL, "--rpm", rpm, period_ms);
        const char *policy[] = {"llmq", "limits", "policy", "--window-guard-ms", "0", NULL};
        struct cli_run c = cli_run(r->accounts[k], policy);
        assert_int_equal(c.status, 0);
        cli_free(&c);
        char tag[16];
        snprintf(tag, sizeof(tag), "a%d", k);
        snprintf(r->jobs[k], sizeof(r->jobs[k]), "/tmp/llmq-cluster-%d-%d.jsonl", (int)getpid(), k);
        worker_write_jobs(r->jobs[k], tag, jobs_each, CLUSTER_MODEL, 20, NULL);
    }
}

/* cluster_run_setup_on the usual loopback address, 127.0.0.1. */
static inline void cluster_run_setup(struct cluster_run *r, int primaries, int replicas_each,
                                     int n_accounts, int jobs_each, int rpm, int period_ms,
                                     int latency_ms)
{
    cluster_run_setup_on(r, "127.0.0.1", primaries, replicas_each, n_accounts, jobs_each, rpm,
                         period_ms, latency_ms);
}

/* Writes jobs "a<k>-<from>" .. "a<k>-<from + n - 1>" of account k to path. */
static inline void cluster_write_jobs(const char *path, int k, int from, int n)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = from; i < from + n; i++)
        fprintf(f,
                "{\"custom_id\":\"a%d-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"%s\",\"max_tokens\":20,\"messages\":[{\"role\":"
                "\"user\",\"content\":\"question number %d, please answer briefly\"}]}}\n",
                k, i, CLUSTER_MODEL, i);
    fclose(f);
}

/* Writes jobs from..from + n - 1 of every account into its job file. */
static inline void cluster_write_batch(struct cluster_run *r, int from, int n)
{
    for (int k = 0; k < r->n_accounts; k++)
        cluster_write_jobs(r->jobs[k], k, from, n);
}

static inline int cluster_event_counts(redisContext *c, const char *prefix, int k, int jobs_each,
                                       int *counts);

/* Jobs that ended (one per event id) summed over every account, read on
 * each account's node now; -1 when a node does not answer. */
static inline long long cluster_jobs_ended(struct cluster_run *r)
{
    long long total = 0;
    int *counts = calloc((size_t)r->jobs_each, sizeof(int));
    for (int k = 0; k < r->n_accounts; k++) {
        int node = llmq_test_cluster_owner(&r->cl, llmq_test_cluster_account_slot(r->accounts[k]));
        redisContext *c = node >= 0 ? llmq_test_cluster_connect(&r->cl, node) : NULL;
        if (c == NULL) {
            total = -1;
            break;
        }
        char prefix[128];
        snprintf(prefix, sizeof(prefix), "llmq:{%s}:", r->accounts[k]);
        cluster_event_counts(c, prefix, k, r->jobs_each, counts);
        for (int i = 0; i < r->jobs_each; i++)
            total += counts[i] > 0;
        redisFree(c);
    }
    free(counts);
    return total;
}

/* Starts worker i serving every account, with extra args (NULL-ended). */
static inline pid_t cluster_worker_start(struct cluster_run *r, const char *log,
                                         const char *const *extra)
{
    const char *args[48];
    int n = 0;
    for (int k = 0; k < r->n_accounts; k++) {
        args[n++] = "--account";
        args[n++] = r->accounts[k];
    }
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 46; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return worker_start(r->accounts[0], &r->sim, log, args);
}

static inline void cluster_enqueue_all(struct cluster_run *r)
{
    for (int k = 0; k < r->n_accounts; k++)
        worker_enqueue(r->accounts[k], r->jobs[k]);
}

/* How many times each job id "a<k>-<i>" is named in the account's events
 * stream, into counts[0..jobs_each); returns the number of ids named that
 * are not one of them. */
static inline int cluster_event_counts(redisContext *c, const char *prefix, int k, int jobs_each,
                                       int *counts)
{
    char tag[16];
    snprintf(tag, sizeof(tag), "a%d-", k);
    memset(counts, 0, sizeof(int) * (size_t)jobs_each);
    redisReply *rep = redisCommand(c, "XRANGE %sevents - +", prefix);
    int other = 0;
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        size_t pos = 0;
        const char *id;
        while (e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
               (id = llmq_redis_field_next(e->element[1], "id", &pos)) != NULL) {
            int j = -1;
            if (strncmp(id, tag, strlen(tag)) == 0)
                j = (int)strtol(id + strlen(tag), NULL, 10);
            if (j >= 0 && j < jobs_each)
                counts[j]++;
            else
                other++;
        }
    }
    if (rep)
        freeReplyObject(rep);
    return other;
}

/* Waits up to timeout_ms until at least n jobs ended; returns 1, 0 on timeout. */
static inline int cluster_wait_ended(struct cluster_run *r, long long n, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    while (llmq_test_now_ms() < deadline) {
        if (cluster_jobs_ended(r) >= n)
            return 1;
        usleep(100000);
    }
    return 0;
}

/* Asserts every job of every account ended exactly once with a result, read
 * on the node serving the account now; prints the node of each account. */
static inline void cluster_assert_each_job_once(struct cluster_run *r)
{
    int *counts = calloc((size_t)r->jobs_each, sizeof(int));
    for (int k = 0; k < r->n_accounts; k++) {
        int slot = llmq_test_cluster_account_slot(r->accounts[k]);
        int node = llmq_test_cluster_owner(&r->cl, slot);
        assert_true(node >= 0);
        redisContext *c = llmq_test_cluster_connect(&r->cl, node);
        assert_non_null(c);
        char prefix[128], key[256];
        snprintf(prefix, sizeof(prefix), "llmq:{%s}:", r->accounts[k]);
        int missing = 0, twice = 0, never = 0;
        for (int i = 0; i < r->jobs_each; i++) {
            snprintf(key, sizeof(key), "%sres:a%d-%d", prefix, k, i);
            missing += llmq_test_redis_int(c, "EXISTS %s", key) != 1;
        }
        int other = cluster_event_counts(c, prefix, k, r->jobs_each, counts);
        for (int i = 0; i < r->jobs_each; i++) {
            twice += counts[i] > 1;
            never += counts[i] == 0;
        }
        printf("# account %d (slot %d) on node %d (port %d): %d without result, %d ended "
               "twice, %d never ended\n",
               k, slot, node, r->cl.nodes[node].port, missing, twice, never);
        assert_int_equal(missing, 0);
        assert_int_equal(twice, 0);
        assert_int_equal(never, 0);
        assert_int_equal(other, 0);
        redisFree(c);
    }
    free(counts);
}

/* The most of the arrival times t[0..m) (sorted) within one window of
 * window_ms. */
static inline size_t cluster_most_in_window(const long long *t, size_t m, int window_ms)
{
    size_t most = 0;
    for (size_t i = 0, j = 0; i < m; i++) {
        while (t[i] - t[j] >= window_ms)
            j++;
        if (i - j + 1 > most)
            most = i - j + 1;
    }
    return most;
}

/* Asserts no account's requests reached the API over its limit (no sliding
 * window of judge_ms holds more than rpm of its arrivals), and that every
 * job reached it at least once. Returns the number of requests seen. */
static inline size_t cluster_assert_limits(struct cluster_run *r)
{
    size_t n;
    struct sim_entry *e = sim_log_read(r->sim.log_file, &n);
    sim_log_sort(e, n);
    for (int k = 0; k < r->n_accounts; k++) {
        char tag[16];
        snprintf(tag, sizeof(tag), "a%d-", k);
        size_t len = strlen(tag), m = 0;
        long long *t = malloc(sizeof(long long) * (n + 1));
        for (size_t i = 0; i < n; i++)
            if (strncmp(e[i].job, tag, len) == 0)
                t[m++] = e[i].t_ms;
        size_t most = cluster_most_in_window(t, m, r->judge_ms);
        printf("# account %d: %zu requests, most in one %d ms window: %zu of %d\n", k, m,
               r->judge_ms, most, r->rpm);
        assert_true(most <= (size_t)r->rpm);
        assert_true(m >= (size_t)r->jobs_each);
        free(t);
    }
    free(e);
    return n;
}

/* Moves slot to primary to in a child process (llmq_test_cluster_move_slot
 * with batch_keys and pause_ms), while the test goes on; returns its pid:
 * it exits 0 when the move is done and moved at least min_keys keys. */
static inline pid_t cluster_move_slot_start(struct cluster_run *r, int slot, int to, int batch_keys,
                                            int pause_ms, long long min_keys)
{
    pid_t mover = llmq_test_fork();
    if (mover == 0) {
        long long moved = 0;
        int rc = llmq_test_cluster_move_slot(&r->cl, slot, to, batch_keys, pause_ms, &moved);
        printf("# keys of slot %d migrated: %lld\n", slot, moved);
        fflush(stdout);
        _exit(rc == 0 && moved >= min_keys ? 0 : 1);
    }
    return mover;
}

/* 1 when node i has the llmq Functions library. */
static inline int cluster_node_has_library(struct cluster_run *r, int i)
{
    redisContext *c = llmq_test_cluster_connect(&r->cl, i);
    if (c == NULL)
        return 0;
    redisReply *rep = redisCommand(c, "FUNCTION LIST LIBRARYNAME %s", llmq_script_library_name);
    int has = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1;
    if (rep)
        freeReplyObject(rep);
    redisFree(c);
    return has;
}

static inline void cluster_run_teardown(struct cluster_run *r)
{
    sim_proc_stop(&r->sim);
    llmq_test_cluster_stop(&r->cl);
    for (int k = 0; k < r->n_accounts; k++)
        unlink(r->jobs[k]);
}

#endif
