/* The worker sums calibration samples in memory and writes them in batches
 * (worker/calib_batch.h): after N jobs, P calib and `llmq status` count
 * exactly N samples, with the same sums as N separate samples would give
 * (estimate from each job's hash, actual from each result's usage),
 *   - in a batch run (more than one 256-sample batch, then the idle exit);
 *   - when the worker is stopped by SIGTERM right after its last job: the
 *     samples since the last write are written by the exit flush (without
 *     it they are lost: fewer than N).
 * Real redis-server, openai-sim, llmq-worker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "jobs/calibration.h"
#include "worker_support.h"

#define MODEL "gpt-4o-mini"

/* The est_prompt_tokens of jobs tag-0 .. tag-(n-1) of account, read while
 * they wait (a done job keeps only its ended record). New array. */
static long long *estimates_of(const char *account, const char *tag, int n)
{
    char prefix[128], id[64];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    redisContext *c = llmq_test_redis_connect();
    long long *est = calloc((size_t)n, sizeof(*est));
    assert_non_null(est);
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "%s-%d", tag, i);
        est[i] = llmq_test_job_int(c, prefix, id, "est_prompt_tokens", -1);
        assert_true(est[i] >= 0);
    }
    redisFree(c);
    return est;
}

/* The sums N separate samples give: each job's est_prompt_tokens (est[i])
 * against its result's usage.prompt_tokens. */
static void expected_sums(redisContext *c, const char *prefix, const char *tag, int n,
                          const long long *est, struct llmq_calib_increments *sum)
{
    memset(sum, 0, sizeof(*sum));
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s-%d", tag, i);
        char *text = llmq_test_job_result(c, prefix, id);
        assert_non_null(text);
        json_t *line = json_loads(text, 0, NULL);
        free(text);
        json_t *usage =
            json_object_get(json_object_get(json_object_get(line, "response"), "body"), "usage");
        json_t *pt = json_object_get(usage, "prompt_tokens");
        assert_true(json_is_integer(pt));
        assert_int_equal(llmq_calib_sum_add(sum, est[i], json_integer_value(pt)), LLMQ_OK);
        json_decref(line);
    }
}

/* Asserts that account's calibration of MODEL is exactly n samples with the
 * sums of the jobs tag-0 .. tag-(n-1) (their estimates est, estimates_of),
 * in P calib and in `llmq status`. Frees est. */
static void check_calibration(const char *account, const char *tag, int n, long long *est)
{
    char prefix[128], key[256];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(key, sizeof(key), "%scalib", prefix);
    redisContext *c = llmq_test_redis_connect();
    struct llmq_calib_increments want;
    expected_sums(c, prefix, tag, n, est, &want);
    free(est);
    assert_int_equal(want.n, n);
    const char *fields[] = {"n", "est", "act", "abs", "under", "rel", "rel2"};
    const long long values[] = {want.n,     want.est,    want.act,    want.abs,
                                want.under, want.rel_bp, want.rel2_bp};
    for (int i = 0; i < 7; i++) {
        char field[64];
        snprintf(field, sizeof(field), MODEL "|%s", fields[i]);
        long long got = redis_int(c, "HGET %s %s", key, field);
        if (got != values[i])
            fail_msg("P calib %s: %lld, want %lld", field, got, values[i]);
    }
    redisFree(c);

    const char *argv[] = {"llmq", "status", "--json", NULL};
    struct cli_run r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    json_t *o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    json_t *cal = json_object_get(o, "calibration");
    assert_int_equal(json_array_size(cal), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(cal, 0), "model")), MODEL);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(cal, 0), "samples")), n);
    json_decref(o);
    cli_free(&r);
}

static void test_batch_run_counts_every_sample(void **state)
{
    (void)state;
    enum { N = 300 }; /* one full batch of 256, then the rest */
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "calbatch");
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-calbatch-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-calbatch-%d.log", (int)getpid());
    worker_write_jobs(jobs, "b", N, MODEL, 16, NULL);
    worker_enqueue(account, jobs);
    long long *est = estimates_of(account, "b", N);
    const char *args[] = {"--concurrency", "64", "--exit-when-idle-ms", "300", NULL};
    assert_int_equal(worker_wait(worker_start(account, &sim, log, args), 120000), 0);
    check_calibration(account, "b", N, est);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(jobs);
    unlink(log);
}

static void test_sigterm_after_last_job_flushes(void **state)
{
    (void)state;
    enum { N = 40 };
    char account[64], jobs[128], log[128], key[256];
    llmq_test_unique_name(account, sizeof(account), "calterm");
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-calterm-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-calterm-%d.log", (int)getpid());
    worker_write_jobs(jobs, "t", N, MODEL, 16, NULL);
    worker_enqueue(account, jobs);
    long long *est = estimates_of(account, "t", N);
    /* No idle exit: the worker runs until told to stop. */
    const char *args[] = {"--concurrency", "64", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    redisContext *c = llmq_test_redis_connect();
    snprintf(key, sizeof(key), "llmq:{%s}:stats", account);
    long long deadline = llmq_test_now_ms() + 60000;
    while (redis_int(c, "HGET %s %s", key, "done") < N && llmq_test_now_ms() < deadline)
        usleep(5000);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "done"), N);
    /* Written before the signal (the rest wait for the next write). */
    snprintf(key, sizeof(key), "llmq:{%s}:calib", account);
    long long before = redis_int(c, "HGET %s %s", key, MODEL "|n");
    kill(w, SIGTERM);
    printf("# %lld of %d samples written when SIGTERM was sent\n", before, N);
    redisFree(c);
    assert_int_equal(worker_wait(w, 30000), 0);
    check_calibration(account, "t", N, est);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_run_counts_every_sample),
        cmocka_unit_test(test_sigterm_after_last_job_flushes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
