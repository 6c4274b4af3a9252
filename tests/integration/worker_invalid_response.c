/* A 2xx whose body the endpoint does not send is no result: openai-sim
 * answers 200 with an HTML page (a captive portal, a misconfigured proxy) or
 * 200 with JSON of the wrong shape. Each such answer is a failed attempt
 * (reason invalid_response), retried with backoff until the attempts run
 * out, then dead-lettered with that reason; the dead letter's line keeps the
 * body for inspection with error.code invalid_response; /metrics counts
 * every one (llmq_invalid_responses_total). Nothing is stored as a result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define JOBS 3
#define ATTEMPTS 3

static void run_fault(const char *fault, const char *why)
{
    char account[64], jobs[128], log[128], prefix[128], key[256], port_s[16];
    llmq_test_unique_name(account, sizeof(account), "inval");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-inval-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-inval-%d.log", (int)getpid());
    struct sim_proc sim;
    const char *sim_args[] = {fault, "100", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    worker_write_jobs(jobs, "iv", JOBS, "gpt-4o-mini", 20, "{\"max_attempts\":3}");
    worker_enqueue(account, jobs);
    int port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *args[] = {"--backoff-base-ms", "50", "--metrics-port", port_s, "--metrics-host",
                          "127.0.0.1",         NULL};
    pid_t w = worker_start(account, &sim, log, args);

    /* Wait (against hanging, not a timing check) until every job ended. */
    redisContext *c = llmq_test_redis_connect();
    snprintf(key, sizeof(key), "%sstats", prefix);
    long long deadline = llmq_test_now_ms() + 60000;
    while (redis_int(c, "HGET %s %s", key, "dead") < JOBS && llmq_test_now_ms() < deadline)
        usleep(50000);
    assert_int_equal(redis_int(c, "HGET %s %s", key, "dead"), JOBS);
    assert_true(redis_int(c, "HGET %s %s", key, "done") <= 0);
    /* Counted at /metrics (the counter, and the attempts by status 200). */
    struct worker_page pg = worker_http_get(port, "/metrics");
    assert_int_equal(pg.status, 200);
    assert_true(worker_metric_sum(pg.body, "llmq_invalid_responses_total", account) ==
                JOBS * ATTEMPTS);
    assert_true(worker_metric_sum(pg.body, "llmq_jobs_succeeded_total", account) <= 0);
    free(pg.body);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 30000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* Every attempt reached the API and got the bad 200. */
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    assert_int_equal(n, JOBS * ATTEMPTS);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(e[i].status, 200);
    free(e);
    /* Dead-lettered with the reason; the line is no result. */
    snprintf(key, sizeof(key), "%sdead", prefix);
    redisReply *r = redisCommand(c, "XRANGE %s - +", key);
    assert_int_equal(r->elements, JOBS);
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *f = r->element[i]->element[1];
        const char *reason = NULL;
        for (size_t j = 0; j + 1 < f->elements; j += 2)
            if (strcmp(f->element[j]->str, "reason") == 0)
                reason = f->element[j + 1]->str;
        print_message("dead: %s\n", reason ? reason : "(no reason)");
        assert_non_null(reason);
        assert_non_null(strstr(reason, "invalid_response: http 200, "));
        assert_non_null(strstr(reason, why));
    }
    freeReplyObject(r);
    for (int i = 0; i < JOBS; i++) {
        char jk[256];
        snprintf(jk, sizeof(jk), "%sjob:iv-%d", prefix, i);
        char id[32];
        snprintf(id, sizeof(id), "iv-%d", i);
        char *text = llmq_test_job_result(c, prefix, id);
        assert_non_null(text);
        json_t *line = json_loads(text, 0, NULL);
        free(text);
        assert_non_null(line);
        json_t *err = json_object_get(line, "error");
        assert_true(json_is_object(err));
        assert_string_equal(json_string_value(json_object_get(err, "code")), "invalid_response");
        json_decref(line);
        r = redisCommand(c, "HGET %s state", jk);
        assert_string_equal(r->str, "dead");
        freeReplyObject(r);
        assert_int_equal(redis_int(c, "HGET %s %s", jk, "attempts"), ATTEMPTS);
    }
    assert_true(worker_log_count(log, "invalid_response") >= JOBS * ATTEMPTS);
    redisFree(c);
    unlink(jobs);
    unlink(log);
}

static void test_200_html_is_no_result(void **state)
{
    (void)state;
    run_fault("--bad-200-html", "body is not JSON");
}

static void test_200_wrong_shape_is_no_result(void **state)
{
    (void)state;
    run_fault("--bad-200-shape", "without the \"choices\" array");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_200_html_is_no_result),
        cmocka_unit_test(test_200_wrong_shape_is_no_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
