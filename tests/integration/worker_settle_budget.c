/* What the account+model bucket holds after each kind of answer (docs/concepts.md
 * "settle"): one job, two attempts at most, a one-minute window so nothing
 * ages out while the test looks.
 *   200       by default (the admission ledger, docs/limiter.md "What a bucket is
 *             charged") the bucket keeps the admission charge: one request,
 *             the job's cost (usage is below it here); with --settle usage
 *             the reservation is replaced by the real usage:
 *             usage.total_tokens tokens;
 *   429       (a rate limit) the reservation is refunded: after two 429s the
 *             bucket is empty;
 *   500       no refund (the call may have cost tokens): after two 500s
 *             (the second dead-letters the job: attempts ran out) both
 *             attempts' reservations are still counted.
 * The bucket is read twice: its cached counters and its window log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define MODEL "gpt-4o-mini"

struct bucket_state {
    long long n, tok;  /* the bucket hash's cached counters */
    long long log_n;   /* entries in its window log */
    long long log_tok; /* tokens in its window log */
    long long cost;    /* the job's reserved cost */
};

/* Runs one job through a worker against a sim with sim_args; the job ends
 * in want_state. settle is the bucket's --settle value (NULL: the default).
 * Fills b; *usage_total gets the result's usage.total_tokens (-1 when none). */
static void run_case(const char *const *sim_args, const char *settle, const char *want_state,
                     struct bucket_state *b, long long *usage_total)
{
    char account[64], jobs[128], log[128], prefix[128], key[256];
    llmq_test_unique_name(account, sizeof(account), "budget");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    const char *limits[] = {"llmq",
                            "limits",
                            "set",
                            MODEL,
                            "--rpm",
                            "1000",
                            "--tpm",
                            "1000000",
                            "--period-ms",
                            "60000",
                            settle ? "--settle" : NULL,
                            settle,
                            NULL};
    struct cli_run r = cli_run(account, limits);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-budget-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "g", 1, MODEL, 20, "{\"max_attempts\":2}");
    worker_enqueue(account, jobs);
    redisContext *c = llmq_test_redis_connect();
    b->cost = llmq_test_job_int(c, prefix, "g-0", "cost", -1);
    assert_true(b->cost > 0);

    snprintf(log, sizeof(log), "/tmp/llmq-budget-%d.log", (int)getpid());
    const char *args[] = {
        "--backoff-base-ms", "50", "--backoff-cap-ms", "200", "--exit-when-idle-ms", "1500", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    char *st = llmq_test_job_field(c, prefix, "g-0", "state");
    assert_non_null(st);
    assert_string_equal(st, want_state);
    free(st);

    snprintf(key, sizeof(key), "%slimit:%s", prefix, MODEL);
    b->n = redis_int(c, "HGET %s %s", key, "n");
    b->tok = redis_int(c, "HGET %s %s", key, "tok");
    /* the window's two logs: admissions in flight (bw:) and settled calls
     * by their arrival (bws:, lua/lib/limiter_window.lua) */
    b->log_n = 0;
    b->log_tok = 0;
    for (int l = 0; l < 2; l++) {
        snprintf(key, sizeof(key), "%s%s:%s", prefix, l == 0 ? "bw" : "bws", MODEL);
        redisReply *z = redisCommand(c, "ZRANGE %s 0 -1", key);
        assert_true(z != NULL && z->type == REDIS_REPLY_ARRAY);
        b->log_n += (long long)z->elements;
        for (size_t i = 0; i < z->elements; i++) {
            const char *colon = strchr(z->element[i]->str, ':'); /* "<resid>:<tokens>" */
            assert_non_null(colon);
            b->log_tok += strtoll(colon + 1, NULL, 10);
        }
        freeReplyObject(z);
    }

    *usage_total = -1;
    char *res = llmq_test_job_result(c, prefix, "g-0");
    if (res != NULL) {
        json_t *line = json_loads(res, 0, NULL);
        json_t *usage =
            json_object_get(json_object_get(json_object_get(line, "response"), "body"), "usage");
        if (json_is_integer(json_object_get(usage, "total_tokens")))
            *usage_total = json_integer_value(json_object_get(usage, "total_tokens"));
        json_decref(line);
    }
    free(res);
    redisFree(c);
    printf("# %s: cost %lld; bucket n %lld tok %lld; log %lld entries, %lld tokens\n", want_state,
           b->cost, b->n, b->tok, b->log_n, b->log_tok);
    unlink(jobs);
    unlink(log);
    unlink(sim.log_file);
}

static void test_success_keeps_admission_charge(void **state)
{
    (void)state;
    struct bucket_state b;
    long long usage;
    run_case(NULL, NULL, "done", &b, &usage);
    assert_true(usage > 0);
    assert_true(usage < b.cost); /* else the check below proves nothing */
    assert_int_equal(b.n, 1);
    assert_int_equal(b.log_n, 1);
    assert_int_equal(b.tok, b.cost);
    assert_int_equal(b.log_tok, b.cost);
}

static void test_success_settles_to_usage(void **state)
{
    (void)state;
    struct bucket_state b;
    long long usage;
    run_case(NULL, "usage", "done", &b, &usage);
    assert_true(usage > 0);
    assert_true(usage != b.cost); /* else the check below proves nothing */
    assert_int_equal(b.n, 1);
    assert_int_equal(b.log_n, 1);
    assert_int_equal(b.tok, usage);
    assert_int_equal(b.log_tok, usage);
}

static void test_rate_limit_429_is_refunded(void **state)
{
    (void)state;
    const char *sim_args[] = {"--spurious-429", "100", "--spurious-retry-ms", "100", NULL};
    struct bucket_state b;
    long long usage;
    run_case(sim_args, NULL, "dead", &b, &usage);
    assert_int_equal(b.n, 0);
    assert_int_equal(b.log_n, 0);
    assert_int_equal(b.tok, 0);
    assert_int_equal(b.log_tok, 0);
}

static void test_server_error_is_not_refunded(void **state)
{
    (void)state;
    const char *sim_args[] = {"--fail-500", "100", NULL};
    struct bucket_state b;
    long long usage;
    run_case(sim_args, NULL, "dead", &b, &usage);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.log_n, 2);
    assert_int_equal(b.tok, 2 * b.cost);
    assert_int_equal(b.log_tok, 2 * b.cost);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_success_keeps_admission_charge),
        cmocka_unit_test(test_success_settles_to_usage),
        cmocka_unit_test(test_rate_limit_429_is_refunded),
        cmocka_unit_test(test_server_error_is_not_refunded),
    };
    return cmocka_run_group_tests_name("worker_settle_budget", tests, NULL, NULL);
}
