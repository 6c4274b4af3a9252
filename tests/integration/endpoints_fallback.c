/* Fallback models and pins:
 *   - gpt-4o's only endpoint disabled, fallback gpt-4o -> gpt-4o-mini: its
 *     jobs run on gpt-4o-mini's endpoint with the body's model rewritten, and
 *     each result line names the endpoint, the model that served it and the
 *     model asked for; enabled again, gpt-4o's endpoint takes them back;
 *   - a job whose deadline its model's endpoints cannot meet runs on the
 *     fallback instead of expiring;
 *   - every endpoint out and the fallback's bucket full: the jobs run as
 *     the fallback's window reopens, not after the all-out recheck;
 *   - every endpoint of a model out and no fallback: jobs wait (nothing
 *     dead, no result) and run once one is enabled;
 *   - pins: a Batch line's "llmq": {"endpoints": ...} and the producer API's
 *     llmq_job_options.endpoints run a job only there; a pin no endpoint of
 *     the model matches is dead-lettered as no_endpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"
#include "job_fields.h"
#include "llmq/llmq.h"

/* The models the sim at log saw, as counts of "gpt-4o" and "gpt-4o-mini". */
static void sim_models(const char *log, int *full, int *mini)
{
    FILE *f = fopen(log, "r");
    char line[4096];
    *full = *mini = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        const char *m = o ? json_string_value(json_object_get(o, "model")) : NULL;
        if (m != NULL && strcmp(m, "gpt-4o") == 0)
            (*full)++;
        else if (m != NULL && strcmp(m, "gpt-4o-mini") == 0)
            (*mini)++;
        json_decref(o);
    }
    if (f != NULL)
        fclose(f);
}

/* The result line of job id of account (new JSON; NULL when none). */
static json_t *result_of(const char *account, const char *id)
{
    redisContext *c = llmq_test_redis_connect();
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    char *text = llmq_test_job_result(c, prefix, id);
    json_t *o = text != NULL ? json_loads(text, 0, NULL) : NULL;
    free(text);
    redisFree(c);
    return o;
}

/* Runs one worker holding the keys of eps[0..n) until idle, or, stop_ms >
 * 0, stops it (SIGTERM) after stop_ms: a worker waiting for a disabled
 * endpoint is not idle. */
static void run_worker_for(const char *account, struct ep_sim *eps, int n, const char *tag,
                           long long stop_ms)
{
    char logs[1][128], store[4][96];
    const char *args[4 + 2 * 4 + 1] = {"--concurrency", "8", "--exit-when-idle-ms", "1200"};
    ep_key_args(eps, n, args, 4, store);
    pid_t pid;
    worker_start_n(account, &eps[0].sim, tag, 1, logs, &pid, args);
    if (stop_ms > 0) {
        usleep((useconds_t)(stop_ms * 1000));
        kill(pid, SIGTERM);
    }
    worker_wait_n(&pid, 1, 60000);
    unlink(logs[0]);
}

static void run_worker(const char *account, struct ep_sim *eps, int n, const char *tag)
{
    run_worker_for(account, eps, n, tag, 0);
}

static void test_fallback_and_pins(void **state)
{
    (void)state;
    char account[64], jobs[128];
    llmq_test_unique_name(account, sizeof(account), "epfb");
    struct ep_sim eps[3];
    for (int i = 0; i < 3; i++) {
        ep_init(&eps[i], i);
        const char *args[] = {"--latency-ms", "10", NULL};
        ep_sim_start(&eps[i], args);
        ep_add(account, &eps[i], "/v1", NULL);
    }
    ep_limit(account, &eps[0], "gpt-4o", 1000, 60000);
    ep_limit(account, &eps[1], "gpt-4o-mini", 1000, 60000);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epfb-%d.jsonl", (int)getpid());

    /* 1. gpt-4o has no endpoint left: its fallback serves it */
    struct cli_run r = ep_cli(account, 0, "endpoints", "fallback", "gpt-4o", "gpt-4o-mini", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "endpoints", "disable", "ep0", "--reason", "maintenance", NULL);
    cli_free(&r);
    worker_write_jobs(jobs, "a", 20, "gpt-4o", 20, NULL);
    worker_enqueue(account, jobs);
    run_worker(account, eps, 3, "epfb1");
    ep_assert_results(account, "a", 20, 20);
    int full, mini;
    sim_models(eps[1].sim.log_file, &full, &mini);
    assert_int_equal(full, 0);
    assert_int_equal(mini, 20);
    json_t *line = result_of(account, "a-3");
    assert_non_null(line);
    assert_string_equal(json_string_value(json_object_get(line, "endpoint")), "ep1");
    assert_string_equal(json_string_value(json_object_get(line, "model")), "gpt-4o-mini");
    assert_string_equal(json_string_value(json_object_get(line, "asked_model")), "gpt-4o");
    json_decref(line);

    /* 2. back: gpt-4o's own endpoint serves it */
    r = ep_cli(account, 0, "endpoints", "enable", "ep0", NULL);
    cli_free(&r);
    worker_write_jobs(jobs, "b", 10, "gpt-4o", 20, NULL);
    worker_enqueue(account, jobs);
    run_worker(account, eps, 3, "epfb2");
    ep_assert_results(account, "b", 10, 30);
    sim_models(eps[0].sim.log_file, &full, &mini);
    assert_int_equal(full, 10);
    line = result_of(account, "b-0");
    assert_string_equal(json_string_value(json_object_get(line, "endpoint")), "ep0");
    assert_null(json_object_get(line, "asked_model"));
    json_decref(line);

    /* 3. all out, no fallback: the jobs wait, nothing is lost */
    r = ep_cli(account, 0, "endpoints", "fallback", "gpt-4o", "none", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "endpoints", "disable", "ep0", NULL);
    cli_free(&r);
    worker_write_jobs(jobs, "c", 3, "gpt-4o", 20, NULL);
    worker_enqueue(account, jobs);
    run_worker_for(account, eps, 3, "epfb3", 1500); /* it may run nothing */
    line = result_of(account, "c-0");
    assert_null(line);
    r = ep_cli(account, 0, "endpoints", "enable", "ep0", NULL);
    cli_free(&r);
    run_worker(account, eps, 3, "epfb4");
    ep_assert_results(account, "c", 3, 33);

    /* 4. pins: ep2 serves gpt-4o too; pinned jobs go only there */
    ep_limit(account, &eps[2], "gpt-4o", 1000, 60000);
    worker_write_jobs(jobs, "d", 10, "gpt-4o", 20, "{\"endpoints\":[\"ep2\"]}");
    worker_enqueue(account, jobs);
    struct llmq_producer_options po = {.redis_url = llmq_test_redis_url(), .account = account};
    struct llmq_producer *p = NULL;
    assert_int_equal(llmq_producer_open(&po, &p, NULL), LLMQ_OK);
    for (int i = 0; i < 5; i++) {
        char id[32];
        snprintf(id, sizeof(id), "e-%d", i);
        struct llmq_job_options o = {.job_id = id, .endpoints = "ep2"};
        assert_int_equal(llmq_producer_enqueue(p, "/v1/chat/completions",
                                               "{\"model\":\"gpt-4o\",\"max_tokens\":5,"
                                               "\"messages\":[{\"role\":\"user\",\"content\":"
                                               "\"hi\"}]}",
                                               &o, NULL, NULL),
                         LLMQ_OK);
    }
    struct llmq_job_options bad = {.job_id = "bad-0", .endpoints = "not/a name"};
    struct llmq_enqueue_result res;
    assert_int_equal(llmq_producer_enqueue(p, "/v1/chat/completions",
                                           "{\"model\":\"gpt-4o\",\"messages\":[]}", &bad, &res,
                                           NULL),
                     LLMQ_EINVAL);
    llmq_producer_close(p);
    run_worker(account, eps, 3, "epfb5");
    ep_assert_results(account, "d", 10, 48);
    ep_assert_results(account, "e", 5, 48);
    sim_models(eps[2].sim.log_file, &full, &mini);
    assert_int_equal(full, 15);
    sim_models(eps[0].sim.log_file, &full, &mini);
    assert_int_equal(full, 10 + 3); /* phase 2 and 3 only */

    /* a pin no endpoint of the model matches: dead, with the reason */
    worker_write_jobs(jobs, "z", 1, "gpt-4o", 20, "{\"endpoints\":\"nope\"}");
    worker_enqueue(account, jobs);
    run_worker(account, eps, 3, "epfb6");
    r = ep_cli(account, 0, "dead", "list", "--json", NULL);
    assert_non_null(strstr(r.out, "no_endpoint"));
    cli_free(&r);
    for (int i = 0; i < 3; i++)
        ep_sim_stop(&eps[i]);
    unlink(jobs);
}

/* Two endpoints of account, each its own sim: ep0 serves gpt-4o with
 * full_rpm per full_period_ms, ep1 gpt-4o-mini with mini_rpm per
 * mini_period_ms, and gpt-4o falls back to gpt-4o-mini. Jobs go to a file
 * named after tag, in jobs. */
static void fallback_pair_open(const char *account, const char *tag, struct ep_sim eps[2],
                               int full_rpm, long long full_period_ms, int mini_rpm,
                               long long mini_period_ms, char *jobs, size_t jobs_len)
{
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], NULL);
        ep_add(account, &eps[i], "/v1", NULL);
    }
    ep_limit(account, &eps[0], "gpt-4o", full_rpm, full_period_ms);
    ep_limit(account, &eps[1], "gpt-4o-mini", mini_rpm, mini_period_ms);
    struct cli_run r = ep_cli(account, 0, "endpoints", "fallback", "gpt-4o", "gpt-4o-mini", NULL);
    cli_free(&r);
    snprintf(jobs, jobs_len, "/tmp/llmq-%s-%d.jsonl", tag, (int)getpid());
}

static void fallback_pair_close(struct ep_sim eps[2], const char *jobs)
{
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
    unlink(jobs);
}

/* A deadline its model cannot meet: gpt-4o's only endpoint has 2 requests
 * a minute, the jobs 20 s to live. The first grants run on gpt-4o; the
 * others, whose wait there (most of a minute) passes their deadline, run on
 * the fallback at once instead of expiring. */
static void test_fallback_for_deadline(void **state)
{
    (void)state;
    char account[64], jobs[128];
    llmq_test_unique_name(account, sizeof(account), "epfbd");
    struct ep_sim eps[2];
    fallback_pair_open(account, "epfbd", eps, 2, 60000, 1000, 60000, jobs, sizeof(jobs));
    worker_write_jobs(jobs, "t", 6, "gpt-4o", 20, "{\"ttl_ms\":20000}");
    worker_enqueue(account, jobs);
    run_worker(account, eps, 2, "epfbd");
    ep_assert_results(account, "t", 6, 6); /* none expired */
    int full, mini, full1, mini1;
    sim_models(eps[0].sim.log_file, &full, &mini);
    sim_models(eps[1].sim.log_file, &full1, &mini1);
    printf("# gpt-4o served %d, gpt-4o-mini %d\n", full, mini1);
    assert_true(full >= 1 && full <= 2);
    assert_int_equal(mini + full1, 0);
    assert_int_equal(full + mini1, 6);
    fallback_pair_close(eps, jobs);
}

/* lua/lib/endpoints.lua EP_ALL_DISABLED_RECHECK_MS: when a worker looks
 * again at a model whose endpoints are all out */
#define ALL_OUT_RECHECK_MS 60000

/* Every endpoint of gpt-4o out and its fallback's bucket full: the job
 * waits for the fallback's room, not for the recheck of endpoints that are
 * all out (EP_ALL_DISABLED_RECHECK_MS, 60 s). gpt-4o-mini has 2 requests per
 * 2 s; of 6 jobs, 2 run at once and the rest as its window reopens, all
 * within a few seconds: the last arrives well before the 60 s recheck. */
static void test_fallback_waits_for_its_room(void **state)
{
    (void)state;
    char account[64], jobs[128];
    llmq_test_unique_name(account, sizeof(account), "epfbr");
    struct ep_sim eps[2];
    fallback_pair_open(account, "epfbr", eps, 1000, 60000, 2, 2000, jobs, sizeof(jobs));
    struct cli_run r = ep_cli(account, 0, "endpoints", "disable", "ep0", NULL);
    cli_free(&r);
    worker_write_jobs(jobs, "w", 6, "gpt-4o", 20, NULL);
    worker_enqueue(account, jobs);
    run_worker(account, eps, 2, "epfbr");
    ep_assert_results(account, "w", 6, 6);
    size_t n = 0;
    struct sim_entry *e = sim_log_read(eps[1].sim.log_file, &n);
    assert_int_equal(n, 6);
    long long first = e[0].t_ms, last = e[0].t_ms;
    for (size_t i = 0; i < n; i++) {
        first = e[i].t_ms < first ? e[i].t_ms : first;
        last = e[i].t_ms > last ? e[i].t_ms : last;
    }
    printf("# 6 jobs on the fallback within %lld ms (2 per 2 s window)\n", last - first);
    /* three windows' worth: about 4.4 s; the recheck would put it past 60 s */
    assert_true(last - first < ALL_OUT_RECHECK_MS / 2);
    free(e);
    fallback_pair_close(eps, jobs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fallback_and_pins),
        cmocka_unit_test(test_fallback_for_deadline),
        cmocka_unit_test(test_fallback_waits_for_its_room),
    };
    return cmocka_run_group_tests_name("endpoints_fallback", tests, NULL, NULL);
}
