/* Offload seen from outside (docs/DESIGN.md §3.10): real Redis, a real
 * llmq-worker with /metrics, openai-sim's Batch API.
 *   - `llmq estimate FILE --json` of 40 marked jobs: under policy off nothing
 *     is offloaded and the cost under the policy is the live cost; under a
 *     stored auto policy (horizon 60 s) with a limit of 10 requests a minute
 *     the 20 jobs the live limit would not admit within the horizon are
 *     offloaded; under all every job is, at half the list price;
 *   - `llmq status --json` shows per model the jobs staged (40, before any
 *     worker), then a provider batch submitted holding the jobs' estimated
 *     prompt tokens (the estimate's) against the queue limit stored for the
 *     model, then the counters once the batch ended: 40 staged, offloaded
 *     and done, one batch ended, and the money saved: the list price less
 *     the batch price of the usage in the result lines;
 *   - the text of `llmq status` and `llmq top --once` show the offload rows;
 *   - `llmq offload list` and `show` name the batch, its provider batch id,
 *     state, counts and tokens;
 *   - the worker's /metrics has the same counters and the saving. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "account.h"
#include "offload_support.h"
#include "redis/keys.h"

#include <math.h>

#define N 40
#define QUEUE_LIMIT 100000

/* Runs `llmq ARGV...` for account and parses its standard output as JSON
 * (new). */
static json_t *cli_json(const char *account, const char *const *argv)
{
    struct cli_run r = cli_run(account, argv);
    if (r.status != 0)
        fprintf(stderr, "%s %s failed: %s\n", argv[1], argv[2] ? argv[2] : "", r.err);
    assert_int_equal(r.status, 0);
    json_t *o = json_loads(r.out, 0, NULL);
    if (o == NULL)
        fprintf(stderr, "not JSON: %s\n", r.out);
    assert_non_null(o);
    cli_free(&r);
    return o;
}

/* The offload entry of model in `llmq status --json` (new; NULL: none). */
static json_t *status_offload(const char *account, const char *model)
{
    const char *argv[] = {"llmq", "status", "--json", NULL};
    json_t *st = cli_json(account, argv);
    json_t *found = NULL, *m;
    size_t i;
    json_array_foreach(json_object_get(st, "offload"), i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "model")), model) == 0)
            found = json_incref(m);
    }
    json_decref(st);
    return found;
}

static long long jnum(const json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* The estimate of path's model MINI: the whole document (new). */
static json_t *estimate(const char *account, const char *path)
{
    const char *argv[] = {"llmq", "estimate", path, "--json", NULL};
    return cli_json(account, argv);
}

static const json_t *estimate_model(const json_t *e)
{
    return json_array_get(json_object_get(e, "models"), 0);
}

static void estimates(const char *account, const char *path, redisContext *c, const char *prefix)
{
    /* off: nothing offloaded, the policy's cost is the live cost */
    json_t *e = estimate(account, path);
    const json_t *off = json_object_get(estimate_model(e), "offload");
    assert_string_equal(json_string_value(json_object_get(off, "mode")), "off");
    assert_int_equal(jnum(off, "marked_jobs"), N);
    assert_int_equal(jnum(off, "offloaded_jobs"), 0);
    assert_int_equal(jnum(off, "cost_low_nano_usd"), jnum(e, "cost_low_nano_usd"));
    assert_int_equal(jnum(off, "cost_high_nano_usd"), jnum(e, "cost_high_nano_usd"));
    json_decref(e);
    /* auto, as `llmq offload set --mode auto --horizon-s 60` stores it: 10
     * requests a minute admit 20 jobs within 60 s (the first window at once,
     * then one more), the other 20 are offloaded */
    worker_limits_set(account, MINI, "--rpm", 10, 60000);
    char key[256];
    assert_int_equal(llmq_key(key, sizeof(key), prefix, LLMQ_KEY_OFFLOAD, NULL, NULL), LLMQ_OK);
    freeReplyObject(
        redisCommand(c, "HSET %s %s %s", key, MINI, "{\"mode\":\"auto\",\"horizon_s\":60}"));
    e = estimate(account, path);
    off = json_object_get(estimate_model(e), "offload");
    assert_string_equal(json_string_value(json_object_get(off, "mode")), "auto");
    assert_int_equal(jnum(off, "offloaded_jobs"), N / 2);
    /* the live part: 20 jobs at 10 a minute, the first 10 at once */
    assert_int_equal(jnum(off, "finish_ms_live_part"), 60000);
    assert_int_equal(jnum(estimate_model(e), "finish_ms"), 3 * 60000);
    json_decref(e);
    /* all: every marked job, at the batch price (half of gpt-4o-mini's
     * list price, whose per-token prices are even) */
    offload_policy_all(account, MINI, 50000);
    e = estimate(account, path);
    off = json_object_get(estimate_model(e), "offload");
    assert_int_equal(jnum(off, "offloaded_jobs"), N);
    assert_int_equal(2 * jnum(off, "cost_low_nano_usd"), jnum(e, "cost_low_nano_usd"));
    assert_int_equal(2 * jnum(off, "cost_high_nano_usd"), jnum(e, "cost_high_nano_usd"));
    assert_int_equal(jnum(json_object_get(off, "batch_price"), "input"), 75);
    assert_int_equal(jnum(off, "finish_ms_live_part"), 0);
    json_decref(e);
}

static void visible(void **state)
{
    (void)state;
    struct sim_proc sim;
    /* a batch the provider holds long enough to be seen submitted (the wait
     * below is for that state, however slow the host) */
    const char *sim_args[] = {"--batch-pace-ms", "4000", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offvis");
    const char *path = "/tmp/offload-visible.jsonl";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    offload_write_jobs(f, "v-", N, MINI, 1, NULL);
    fclose(f);
    estimates(a.name, path, a.c, a.prefix);
    const char *est_argv[] = {"llmq", "estimate", path, "--json", NULL};
    json_t *est = cli_json(a.name, est_argv);
    long long prompt = jnum(est, "prompt_tokens");
    json_decref(est);

    /* nothing yet: the model has its policy and no jobs */
    json_t *m = status_offload(a.name, MINI);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "mode")), "all");
    assert_int_equal(jnum(m, "staged"), 0);
    assert_true(json_is_null(json_object_get(m, "queue_limit_tokens")));
    json_decref(m);
    char qlimit[24];
    snprintf(qlimit, sizeof(qlimit), "%d", QUEUE_LIMIT);
    const char *lim_argv[] = {"llmq", "limits", "set", MINI, "--batch-queue-tokens", qlimit, NULL};
    struct cli_run lr = cli_run(a.name, lim_argv);
    assert_int_equal(lr.status, 0);
    cli_free(&lr);

    worker_enqueue(a.name, path);
    m = status_offload(a.name, MINI);
    assert_int_equal(jnum(m, "staged"), N);
    assert_int_equal(jnum(m, "staged_ever"), N);
    assert_int_equal(jnum(m, "offloaded"), 0);
    assert_int_equal(jnum(m, "queue_limit_tokens"), QUEUE_LIMIT);
    json_decref(m);

    int port = llmq_test_free_port();
    char port_s[16], log[128];
    snprintf(port_s, sizeof(port_s), "%d", port);
    worker_log_path(log, "offvis", 0);
    const char *extra[] = {"--metrics-port", port_s, NULL};
    pid_t w = worker_start(a.name, &sim, log, extra);

    /* the batch submitted: its jobs' prompt tokens are enqueued */
    long long deadline = llmq_test_now_ms() + 60000;
    for (;;) {
        m = status_offload(a.name, MINI);
        if (jnum(json_object_get(m, "batches"), "submitted") == 1)
            break;
        json_decref(m);
        assert_true(llmq_test_now_ms() < deadline);
        usleep(50000);
    }
    assert_int_equal(jnum(m, "enqueued_tokens"), prompt);
    assert_int_equal(jnum(m, "offloaded"), N);
    assert_int_equal(jnum(m, "staged"), 0);
    json_decref(m);

    char *ids[N];
    for (int i = 0; i < N; i++) {
        char id[32];
        snprintf(id, sizeof(id), "v-%d", i);
        ids[i] = strdup(id);
    }
    offload_wait_all(a.c, a.prefix, ids, N);
    offload_wait_ended(a.c, a.prefix);
    /* what the batch price saved: (list - batch) x the usage of each line */
    long long saved_nusd = 0;
    char pb_id[128] = "";
    for (int i = 0; i < N; i++) {
        char *text = offload_result(a.c, a.prefix, ids[i]);
        json_t *l = json_loads(text, 0, NULL);
        assert_non_null(l);
        const json_t *u =
            json_object_get(json_object_get(json_object_get(l, "response"), "body"), "usage");
        saved_nusd +=
            jnum(u, "prompt_tokens") * (150 - 75) + jnum(u, "completion_tokens") * (600 - 300);
        snprintf(pb_id, sizeof(pb_id), "%s",
                 json_string_value(json_object_get(l, "provider_batch_id")));
        json_decref(l);
        free(text);
        free(ids[i]);
    }
    assert_true(saved_nusd > 0);
    m = status_offload(a.name, MINI);
    assert_int_equal(jnum(m, "staged"), 0);
    assert_int_equal(jnum(m, "offloaded"), 0);
    assert_int_equal(jnum(m, "enqueued_tokens"), 0);
    assert_int_equal(json_object_size(json_object_get(m, "batches")), 0);
    assert_int_equal(jnum(m, "staged_ever"), N);
    assert_int_equal(jnum(m, "offloaded_ever"), N);
    assert_int_equal(jnum(m, "done_ever"), N);
    assert_int_equal(jnum(m, "failed_ever"), 0);
    assert_int_equal(jnum(m, "batches_ended"), 1);
    assert_int_equal(llround(json_real_value(json_object_get(m, "saved_usd")) * 1e9), saved_nusd);
    json_decref(m);

    /* the texts */
    const char *st_argv[] = {"llmq", "status", NULL};
    struct cli_run r = cli_run(a.name, st_argv);
    assert_int_equal(r.status, 0);
    const char *section = strstr(r.out, "offload (provider batches");
    assert_non_null(section);
    assert_non_null(strstr(section, "OFFLOAD MODEL")); /* top's table (offload_table.h) */
    char row_start[96];
    snprintf(row_start, sizeof(row_start), "\n    %s ", MINI);
    const char *srow = strstr(section, row_start);
    assert_non_null(srow);
    char s_model[64], s_mode[16], s_open[32], s_tok[48], s_saved[32];
    long long s_staged = -1, s_off = -1, s_done = -1, s_failed = -1;
    assert_int_equal(sscanf(srow + 1, "%63s %15s %lld %lld %31s %47s %lld %lld %31s", s_model,
                            s_mode, &s_staged, &s_off, s_open, s_tok, &s_done, &s_failed, s_saved),
                     9);
    assert_int_equal(s_staged, 0);
    assert_int_equal(s_off, 0);
    assert_string_equal(s_open, "-");
    assert_int_equal(s_done, 40); /* jobs done 40, failed 0 */
    assert_int_equal(s_failed, 0);
    cli_free(&r);
    const char *top_argv[] = {"llmq", "top", "--once", NULL};
    r = cli_run(a.name, top_argv);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "OFFLOAD MODEL"));
    assert_non_null(strstr(r.out, "ENQUEUED/LIMIT"));
    char want[256];
    snprintf(want, sizeof(want), "0/%d", QUEUE_LIMIT);
    assert_non_null(strstr(r.out, want));
    cli_free(&r);
    const char *list_argv[] = {"llmq", "offload", "list", NULL};
    r = cli_run(a.name, list_argv);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, pb_id));
    assert_non_null(strstr(r.out, "TOKENS"));
    char *row = strstr(r.out, "\npb-");
    assert_non_null(row);
    char id[64], st[32], model[64], n[16], status[32], pbid[64], done[16], retried[16], dead[16],
        tokens[24];
    assert_int_equal(sscanf(row + 1, "%63s %31s %63s %15s %31s %63s %15s %15s %15s %23s", id, st,
                            model, n, status, pbid, done, retried, dead, tokens),
                     10);
    assert_string_equal(st, "ended");
    assert_string_equal(n, "40");
    assert_string_equal(status, "completed");
    assert_string_equal(pbid, pb_id);
    assert_string_equal(done, "40");
    assert_int_equal(strtoll(tokens, NULL, 10), prompt);
    cli_free(&r);
    const char *show_argv[] = {"llmq", "offload", "show", id, NULL};
    r = cli_run(a.name, show_argv);
    assert_int_equal(r.status, 0);
    snprintf(want, sizeof(want), "batch_id: %s\n", pb_id);
    assert_non_null(strstr(r.out, want));
    snprintf(want, sizeof(want), "qtok: %lld\n", prompt);
    assert_non_null(strstr(r.out, want));
    cli_free(&r);

    /* /metrics: the same counters, polled */
    snprintf(want, sizeof(want),
             "llmq_offload_jobs_total{account=\"%s\",model=\"%s\",state=\"done\"} %d\n", a.name,
             MINI, N);
    struct worker_page pg = worker_http_wait_for(port, "/metrics", want, 30000);
    if (strstr(pg.body, want) == NULL)
        fprintf(stderr, "want %s in:\n%s\n", want, pg.body);
    assert_non_null(strstr(pg.body, want));
    double saved = worker_metric_sum(pg.body, "llmq_offload_saved_usd_total", a.name);
    assert_int_equal(llround(saved * 1e9), saved_nusd);
    assert_true(worker_metric_sum(pg.body, "llmq_offload_batches_ended_total", a.name) == 1);
    assert_true(worker_metric_sum(pg.body, "llmq_offload_queue_limit_tokens", a.name) ==
                QUEUE_LIMIT);
    assert_true(worker_metric_sum(pg.body, "llmq_offload_enqueued_tokens", a.name) == 0);
    snprintf(want, sizeof(want),
             "llmq_offload_jobs_total{account=\"%s\",model=\"%s\",state=\"offloaded\"} %d\n",
             a.name, MINI, N);
    assert_non_null(strstr(pg.body, want));
    free(pg.body);

    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    llmq_test_account_close(&a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {cmocka_unit_test(visible)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
