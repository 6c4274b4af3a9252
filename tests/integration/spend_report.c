/* What `llmq estimate` says a file will cost before it runs, and what `llmq
 * spend` reports after (docs/spend.md). The estimate writes nothing
 * (the account's keys are the same before and after); its prompt tokens are
 * exactly what the API counted (openai-sim counts as tiktoken does), and the
 * run's real cost (usage at the gpt-4o-mini price) lies within its cost
 * range. The spend report's totals, by model, tenant, user and day, are the
 * results' usage. Under a token budget smaller than the file, the estimate
 * says the file waits for roll-overs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "spend_support.h"

#define N 40

/* Writes N jobs of tenant acme, users u0..u3, max_tokens 20..59. */
static void write_file(const char *path)
{
    FILE *f = fopen(path, "w");
    for (int i = 0; i < N; i++)
        fprintf(f,
                "{\"custom_id\":\"e-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"%s\",\"max_tokens\":%d,\"messages\":[{\"role\":\"system\","
                "\"content\":\"You answer in one line.\"},{\"role\":\"user\",\"content\":\"Tell "
                "me fact number %d about the number %d\"}]},\"llmq\":{\"tenant\":\"acme\","
                "\"user\":\"u%d\"}}\n",
                i, SPEND_MODEL, 20 + i, i, i * 7919, i % 4);
    fclose(f);
}

static long long account_keys(const struct spend_account *a)
{
    char pat[160];
    snprintf(pat, sizeof(pat), "%s*", a->prefix);
    long long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(a->c, "SCAN %s MATCH %s COUNT 1000", cursor, pat);
        assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        n += (long long)r->element[1]->elements;
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return n;
}

static json_t *cli_json(const struct spend_account *a, const char *const *argv)
{
    char *out = spend_cli(a, 0, argv);
    json_t *j = json_loads(out, 0, NULL);
    if (j == NULL)
        fprintf(stderr, "not JSON: %s\n", out);
    free(out);
    assert_non_null(j);
    return j;
}

static long long jint(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static void test_estimate_then_spend(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spendrep");
    char file[128];
    snprintf(file, sizeof(file), "/tmp/llmq-spendrep-%d.jsonl", (int)getpid());
    write_file(file);
    const char *b[] = {"llmq",  "budgets", "set",      "--tenant", "acme",
                       "--usd", "5",       "--period", "month",    NULL};
    free(spend_cli(&a, 0, b));
    long long keys = account_keys(&a);
    const char *est[] = {"llmq", "estimate", file, "--json", NULL};
    json_t *e = cli_json(&a, est);
    const char *est_text[] = {"llmq", "estimate", file, NULL};
    char *text = spend_cli(&a, 0, est_text);
    printf("%s", text);
    assert_non_null(strstr(text, "nothing written"));
    free(text);
    assert_int_equal(account_keys(&a), keys); /* nothing written */
    assert_int_equal(jint(e, "jobs"), N);

    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    worker_enqueue(a.name, file);
    char logs[2][128];
    pid_t pids[2];
    worker_start_n(a.name, &sim, "spendrep", 2, logs, pids, NULL);
    const char *groups[] = {"e"};
    const int counts[] = {N};
    assert_true(spend_wait_settled(&a, groups, counts, 1, 30000));
    spend_workers_stop(pids, 2);
    assert_int_equal(sim_proc_stop(&sim), 0);
    struct spend_real r = spend_real_read(&a, "e", N);
    assert_int_equal(r.done, N);
    printf("# estimate: prompt %lld, cost %lld..%lld nano-USD; run: prompt %lld, cost %lld\n",
           jint(e, "prompt_tokens"), jint(e, "cost_low_nano_usd"), jint(e, "cost_high_nano_usd"),
           r.prompt, r.nusd);
    assert_int_equal(jint(e, "prompt_tokens"), r.prompt);
    assert_true(jint(e, "cost_low_nano_usd") <= r.nusd);
    assert_true(r.nusd <= jint(e, "cost_high_nano_usd"));
    assert_true(jint(e, "cost_low_nano_usd") < jint(e, "cost_high_nano_usd"));
    json_decref(e);

    /* llmq spend: the results' usage, whatever the grouping */
    const char *by[] = {"model", "tenant", "user", "day"};
    for (int i = 0; i < 4; i++) {
        const char *sp[] = {"llmq", "spend", "--by", by[i], "--json", NULL};
        json_t *s = cli_json(&a, sp);
        json_t *t = json_object_get(s, "total");
        assert_int_equal(jint(t, "jobs"), N);
        assert_int_equal(jint(t, "prompt_tokens"), r.prompt);
        assert_int_equal(jint(t, "completion_tokens"), r.completion);
        assert_int_equal(jint(t, "total_tokens"), r.total);
        assert_int_equal(jint(t, "nano_usd"), r.nusd);
        size_t rows = json_array_size(json_object_get(s, "rows"));
        assert_int_equal(rows, i == 2 ? 4 : 1); /* four users; one model, tenant, day */
        json_decref(s);
    }
    const char *one[] = {"llmq", "spend", "--tenant", "acme", "--user", "u1", "--json", NULL};
    json_t *s = cli_json(&a, one);
    assert_int_equal(jint(json_object_get(s, "total"), "jobs"), N / 4);
    json_decref(s);
    const char *other[] = {"llmq", "spend", "--tenant", "nobody", "--json", NULL};
    s = cli_json(&a, other);
    assert_int_equal(jint(json_object_get(s, "total"), "jobs"), 0);
    json_decref(s);
    const char *table[] = {"llmq", "spend", "--by", "user", NULL};
    text = spend_cli(&a, 0, table);
    printf("%s", text);
    assert_non_null(strstr(text, "acme/u3"));
    free(text);
    const char *bad[] = {"llmq", "spend", "--by", "color", NULL};
    free(spend_cli(&a, 2, bad));

    /* a token budget smaller than the file: it waits for roll-overs */
    const char *small[] = {"llmq",     "budgets", "set",        "--tenant", "acme",
                           "--tokens", "1000",    "--period-s", "600",      NULL};
    free(spend_cli(&a, 0, small));
    e = cli_json(&a, est);
    json_t *bud = NULL;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(e, "budgets"), i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "id")), "t/acme#tokens/600s") == 0)
            bud = o;
    }
    assert_non_null(bud);
    assert_true(jint(bud, "need_worst") > 1000);
    assert_true(jint(bud, "rollovers") >= 1);
    assert_true(jint(e, "finish_ms") > 0);
    json_decref(e);
    unlink(file);
    unlink(sim.log_file);
    for (int k = 0; k < 2; k++)
        unlink(logs[k]);
    spend_account_close(&a);
}

static void test_unpriced_model_refused(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spendnoprice");
    const char *b[] = {"llmq", "budgets", "set", "--usd", "1", "--period", "day", NULL};
    free(spend_cli(&a, 0, b));
    char file[128];
    snprintf(file, sizeof(file), "/tmp/llmq-spendnoprice-%d.jsonl", (int)getpid());
    /* 100 priced jobs, then one of a model without a price: nothing written */
    FILE *f = fopen(file, "w");
    for (int i = 0; i < 101; i++)
        fprintf(
            f,
            "{\"custom_id\":\"p-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
            "\"body\":{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}\n",
            i, i == 100 ? "my-finetune" : SPEND_MODEL);
    fclose(f);
    const char *enq[] = {"llmq", "enqueue", file, NULL};
    struct cli_run r = cli_run(a.name, enq);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "my-finetune has no price"));
    assert_non_null(strstr(r.err, "account#usd/day"));
    cli_free(&r);
    assert_int_equal(llmq_test_job_exists(a.c, a.prefix, "p-0"), 0);
    /* priced by the account: accepted */
    const char *price[] = {
        "llmq", "prices", "set", "my-finetune", "--input-usd-per-1m", "3", "--output-usd-per-1m",
        "12",   NULL};
    free(spend_cli(&a, 0, price));
    r = cli_run(a.name, enq);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    assert_int_equal(llmq_test_job_exists(a.c, a.prefix, "p-0"), 1);
    const char *list[] = {"llmq", "prices", "list", NULL};
    char *out = spend_cli(&a, 0, list);
    assert_non_null(strstr(out, "taken 20"));
    assert_non_null(strstr(out, "my-finetune"));
    free(out);
    unlink(file);
    spend_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate_then_spend),
        cmocka_unit_test(test_unpriced_model_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
