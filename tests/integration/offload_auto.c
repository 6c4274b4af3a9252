/* Offload under policy `auto`, end to end: real Redis, two real
 * llmq-workers, openai-sim's live API and Batch API (docs/DESIGN.md §3.10).
 * 300 urgent (unmarked) jobs and 3,000 eligible ones (marked
 * completion_window 24h) of one model, whose live limit (100 requests a
 * second, low priority filling 80% of it) finishes about 800 jobs within the
 * 10 s horizon:
 *   - every urgent job runs live, exactly once (the sim's access log);
 *   - eligible jobs fill the live room left (some run live) and the rest go
 *     to provider batches (some are offloaded);
 *   - no job is both: each eligible job is either one live call and a result
 *     without "offloaded", or one line of one provider batch's input file
 *     (as the sim stores them) and a result with "offloaded": true; never a
 *     live call and a batch line, never two of either;
 *   - every job is answered exactly once (3,300 done, each result present). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "account.h"
#include "offload_support.h"

#define N_URGENT 300
#define N_ELIGIBLE 3000

static char **ids_make(const char *prefix, int n)
{
    char **ids = calloc((size_t)n, sizeof(*ids));
    assert_non_null(ids);
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s%d", prefix, i);
        ids[i] = strdup(id);
    }
    return ids;
}

static void ids_free(char **ids, int n)
{
    for (int i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

static long long count_of(json_t *counts, const char *id)
{
    return json_integer_value(json_object_get(counts, id));
}

static void count_add(json_t *counts, const char *id)
{
    json_object_set_new(counts, id, json_integer(count_of(counts, id) + 1));
}

/* Per job id, the live calls the sim answered (its access log: status 200). */
static json_t *live_calls(const char *log_path)
{
    size_t n = 0;
    struct sim_entry *e = sim_log_read(log_path, &n);
    json_t *counts = json_object();
    for (size_t i = 0; i < n; i++)
        if (e[i].status == 200 && e[i].job[0] != '\0')
            count_add(counts, e[i].job);
    free(e);
    return counts;
}

/* Per job id, the lines of the provider's batch input files that name it
 * (custom_id), read back from the sim's Files API. */
static json_t *batch_lines(const struct sim_proc *sim)
{
    json_t *counts = json_object();
    json_t *fl = offload_sim_list(sim, "/v1/files");
    size_t i;
    json_t *f;
    const char *h[] = {"Authorization: Bearer " WORKER_TEST_KEY, NULL};
    json_array_foreach(json_object_get(fl, "data"), i, f)
    {
        const char *purpose = json_string_value(json_object_get(f, "purpose"));
        if (purpose == NULL || strcmp(purpose, "batch") != 0)
            continue; /* an output or error file */
        char path[160];
        snprintf(path, sizeof(path), "/v1/files/%s/content",
                 json_string_value(json_object_get(f, "id")));
        struct sim_resp r;
        sim_http(sim, path, NULL, h, &r);
        assert_int_equal(r.status, 200);
        for (char *line = r.body; line != NULL && *line != '\0';) {
            char *nl = strchr(line, '\n');
            json_t *o = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
            const char *cid = json_string_value(json_object_get(o, "custom_id"));
            if (cid != NULL)
                count_add(counts, cid);
            json_decref(o);
            line = nl ? nl + 1 : NULL;
        }
        sim_resp_free(&r);
    }
    json_decref(fl);
    return counts;
}

/* 1 when job id's result says "offloaded": true, 0 when it has no such
 * member (a live result); fails the test when it has no result. */
static int result_offloaded(struct llmq_test_account *a, const char *id)
{
    char *text = offload_result(a->c, a->prefix, id);
    assert_non_null(text);
    json_t *l = json_loads(text, 0, NULL);
    assert_non_null(l);
    int status =
        (int)json_integer_value(json_object_get(json_object_get(l, "response"), "status_code"));
    assert_int_equal(status, 200);
    const json_t *off = json_object_get(l, "offloaded");
    int offloaded = json_is_true(off);
    assert_true(off == NULL || offloaded);
    json_decref(l);
    free(text);
    return offloaded;
}

static void urgent_live_eligible_fill_the_rest_offloaded(void **state)
{
    (void)state;
    struct sim_proc sim;
    const char *sim_args[] = {"--batch-pace-ms", "300", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offauto");
    /* 100 requests a second, smooth (GCRA, bursts of 20): low priority may
     * use 80 a second, 800 within the 10 s horizon */
    const char *lim[] = {"llmq", "limits",           "set", MINI, "--rpm", "6000", "--mode",
                         "gcra", "--burst-requests", "20",  NULL};
    struct cli_run lr = cli_run(a.name, lim);
    assert_int_equal(lr.status, 0);
    cli_free(&lr);
    const char *pol[] = {"llmq",           "offload",     "set", MINI,        "--mode",
                         "auto",           "--horizon-s", "10",  "--poll-ms", "100",
                         "--max-requests", "500",         NULL};
    struct cli_run pr = cli_run(a.name, pol);
    assert_int_equal(pr.status, 0);
    cli_free(&pr);

    const char *path = "/tmp/offload-auto.jsonl";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    offload_write_jobs(f, "e-", N_ELIGIBLE, MINI, 1, NULL);
    offload_write_jobs(f, "u-", N_URGENT, MINI, 0, NULL);
    fclose(f);
    worker_enqueue(a.name, path);
    char **urgent = ids_make("u-", N_URGENT), **eligible = ids_make("e-", N_ELIGIBLE);

    pid_t w[2];
    char logs[2][128];
    for (int i = 0; i < 2; i++) {
        worker_log_path(logs[i], "offauto", i);
        const char *extra[] = {"--consumer", i ? "offauto-w1" : "offauto-w0", NULL};
        w[i] = worker_start(a.name, &sim, logs[i], extra);
    }
    offload_wait_all(a.c, a.prefix, urgent, N_URGENT);
    offload_wait_all(a.c, a.prefix, eligible, N_ELIGIBLE);
    offload_wait_ended(a.c, a.prefix);
    for (int i = 0; i < 2; i++) {
        kill(w[i], SIGTERM);
        assert_int_equal(worker_wait(w[i], 60000), 0);
    }
    json_t *lines = batch_lines(&sim);
    assert_int_equal(sim_proc_stop(&sim), 0);
    json_t *calls = live_calls(sim.log_file);

    for (int i = 0; i < N_URGENT; i++) {
        assert_int_equal(count_of(calls, urgent[i]), 1);
        assert_int_equal(count_of(lines, urgent[i]), 0);
        assert_false(result_offloaded(&a, urgent[i]));
    }
    int live = 0, offloaded = 0;
    for (int i = 0; i < N_ELIGIBLE; i++) {
        long long c = count_of(calls, eligible[i]), l = count_of(lines, eligible[i]);
        if (c + l != 1)
            fail_msg("job %s: %lld live calls and %lld batch lines", eligible[i], c, l);
        int off = result_offloaded(&a, eligible[i]);
        assert_int_equal(off, l == 1);
        live += !off;
        offloaded += off;
    }
    fprintf(stderr, "offload_auto: %d eligible jobs ran live, %d were offloaded\n", live,
            offloaded);
    assert_true(live > 0);
    assert_true(offloaded > 0);
    assert_int_equal(redis_int(a.c, "HGET %sstats %s", a.prefix, "done"), N_URGENT + N_ELIGIBLE);
    assert_int_equal(redis_int(a.c, "XLEN %sdead%s", a.prefix, ""), 0);
    json_decref(calls);
    json_decref(lines);
    ids_free(urgent, N_URGENT);
    ids_free(eligible, N_ELIGIBLE);
    llmq_test_account_close(&a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(urgent_live_eligible_fill_the_rest_offloaded),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
