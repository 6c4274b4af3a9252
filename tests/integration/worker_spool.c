/* The spool: Redis goes away while calls are in flight; the worker gets
 * SIGTERM (short grace) before Redis is back. The results it could not
 * write are kept in its spool file (one JSON line per settle, no API key),
 * and the next worker, once Redis is back, writes them: every job has
 * exactly one result, and the API was not called again for them. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define JOBS 10

static long long pending_of(const char *prefix)
{
    redisContext *c = llmq_test_redis_connect();
    char key[256];
    snprintf(key, sizeof(key), "%sq:normal", prefix);
    redisReply *r = redisCommand(c, "XPENDING %s workers", key);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? r->element[0]->integer : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* The spool files in dir: count (and the path of the last one in path). */
static int spool_files(const char *dir, char *path, size_t n)
{
    DIR *d = opendir(dir);
    int count = 0;
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, n, "%s/%s", dir, e->d_name);
        count++;
    }
    if (d != NULL)
        closedir(d);
    return count;
}

static void test_results_survive_redis_and_worker(void **state)
{
    (void)state;
    struct llmq_test_redis rs = {0};
    assert_int_equal(llmq_test_redis_start(&rs, "--appendonly yes --appendfsync always"), 0);
    setenv("LLMQ_TEST_REDIS_URL", rs.url, 1);
    char account[64], prefix[128], jobs[128], log1[128], log2[128], dir[128], path[512];
    llmq_test_unique_name(account, sizeof(account), "spool");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(dir, sizeof(dir), "/tmp/llmq-spool-test-%d", (int)getpid());
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", "1500", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-spool-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "s", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);

    snprintf(log1, sizeof(log1), "/tmp/llmq-spool-%d-1.log", (int)getpid());
    const char *args[] = {"--concurrency", "20", "--grace-ms", "500", "--spool-dir", dir, NULL};
    pid_t w = worker_start(account, &sim, log1, args);
    long long deadline = llmq_test_now_ms() + 20000;
    while (pending_of(prefix) < JOBS && llmq_test_now_ms() < deadline)
        usleep(20000);
    assert_int_equal(pending_of(prefix), JOBS);
    /* Every call is in flight: Redis goes away, the calls finish (1.5 s),
     * their settles fail; then the worker is told to stop. */
    llmq_test_redis_stop(&rs);
    usleep(2500000);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 15000), 0);

    /* The spool holds the ten settles, and no key. */
    assert_int_equal(spool_files(dir, path, sizeof(path)), 1);
    char *text = cli_slurp(path);
    printf("# spool %s: %zu lines\n", path, cli_count_lines(text));
    assert_int_equal(cli_count_lines(text), JOBS);
    assert_null(strstr(text, WORKER_TEST_KEY));
    for (int i = 0; i < JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "\"id\":\"s-%d\"", i);
        assert_non_null(strstr(text, id));
    }
    assert_non_null(strstr(text, "\"mode\":\"done\""));
    free(text);

    /* Redis is back (its data from the AOF); a new worker writes them. */
    assert_int_equal(llmq_test_redis_start(&rs, "--appendonly yes --appendfsync always"), 0);
    snprintf(log2, sizeof(log2), "/tmp/llmq-spool-%d-2.log", (int)getpid());
    const char *args2[] = {"--spool-dir", dir, "--exit-when-idle-ms", "1500", NULL};
    w = worker_start(account, &sim, log2, args2);
    assert_int_equal(worker_wait(w, 30000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    redisContext *c = llmq_test_redis_connect();
    char key[256];
    for (int i = 0; i < JOBS; i++) {
        snprintf(key, sizeof(key), "%sres:s-%d", prefix, i);
        assert_int_equal(redis_int(c, "EXISTS %s%s", key, ""), 1);
    }
    assert_int_equal(worker_event_jobs(c, prefix), JOBS);
    snprintf(key, sizeof(key), "%sstats", prefix);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "done"), JOBS);
    redisFree(c);
    assert_int_equal(pending_of(prefix), 0);
    /* The results came from the spool: each job was called once. */
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += strcmp(e[i].outcome, "ok") == 0;
    free(e);
    assert_int_equal(ok, JOBS);
    /* The replayed spool is gone. */
    assert_int_equal(spool_files(dir, path, sizeof(path)), 0);

    llmq_test_redis_stop(&rs);
    rmdir(dir);
    unlink(jobs);
    unlink(log1);
    unlink(log2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_survive_redis_and_worker),
    };
    return cmocka_run_group_tests_name("worker_spool", tests, NULL, NULL);
}
