/* A fallback model's price and spend budgets (docs/endpoints.md, "Model
 * fallbacks and budgets"): a job that runs on its model's fallback is
 * decided and charged as the fallback, at the fallback's price.
 *   - dear -> cheap: tenant a's USD budget cannot afford one job of the
 *     asked model at its price but affords every job at the fallback's:
 *     with the asked model's only endpoint out, every job runs on the
 *     fallback, and the budget's spend is exactly the results' usage at the
 *     fallback's price;
 *   - cheap -> dear: tenant b's budget affords every job as asked but only
 *     a few at the fallback's price: those few run on the fallback, the rest
 *     wait (queued, no attempt counted, nothing dead), spend never passes the
 *     budget and is exactly the usage at the fallback's price; once the
 *     asked model's endpoint is enabled again they run there, at its price.
 * Prices are the account's own (llmq prices set), 100x apart.
 *   - its cost too is the fallback's, estimated by the producer for the
 *     fallback model: an image job of gpt-4o falling back to gpt-4o-mini
 *     (33 times the image tokens) is charged gpt-4o-mini's tokens against a
 *     token budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"
#include "job_fields.h"
#include "spend_support.h"

#define DEAR_NUSD 100000 /* 100 USD per 1M tokens, in and out */
#define CHEAP_NUSD 1000  /* 1 USD per 1M tokens */
#define A_JOBS 10
#define A_LIMIT_NUSD 1000000LL /* $0.001: no job at the dear price, all at the cheap one */
#define B_JOBS 20
#define B_LIMIT_NUSD 10000000LL /* $0.01: all at the cheap price, a few at the dear one */

/* The states of jobs "<prefix>-<i>" (i < n) and what the done ones used,
 * each priced at the model that served it (its result line's "model"), in
 * nano-USD; by_model: the done jobs that model served_by (NULL: any) on
 * endpoint (NULL: any) served. */
struct fb_spend {
    long long done, queued, other, nusd, by_model, unattempted_queued;
};

static long long price_of(const char *model)
{
    return strncmp(model, "dear", 4) == 0 || strncmp(model, "fb-dear", 7) == 0 ? DEAR_NUSD
                                                                               : CHEAP_NUSD;
}

static struct fb_spend fb_spend_read(redisContext *c, const char *P, const char *prefix, int n,
                                     const char *served_by, const char *endpoint)
{
    struct fb_spend s = {0};
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s-%d", prefix, i);
        char *state = llmq_test_job_field(c, P, id, "state");
        const char *st = state ? state : "";
        if (strcmp(st, "queued") == 0) {
            s.queued++;
            s.unattempted_queued += llmq_test_job_int(c, P, id, "attempts", -1) == 0;
        } else if (strcmp(st, "done") != 0) {
            s.other++;
        }
        int done = strcmp(st, "done") == 0;
        free(state);
        if (!done)
            continue;
        s.done++;
        char *text = llmq_test_job_result(c, P, id);
        assert_non_null(text);
        json_t *line = json_loads(text, 0, NULL);
        free(text);
        assert_non_null(line);
        const char *model = json_string_value(json_object_get(line, "model"));
        const char *ep = json_string_value(json_object_get(line, "endpoint"));
        assert_non_null(model);
        if ((served_by == NULL || strcmp(model, served_by) == 0) &&
            (endpoint == NULL || (ep != NULL && strcmp(ep, endpoint) == 0)))
            s.by_model++;
        json_t *u =
            json_object_get(json_object_get(json_object_get(line, "response"), "body"), "usage");
        long long p = json_integer_value(json_object_get(u, "prompt_tokens"));
        long long o = json_integer_value(json_object_get(u, "completion_tokens"));
        assert_true(p > 0 && o > 0);
        s.nusd += (p + o) * price_of(model);
        json_decref(line);
    }
    return s;
}

/* One run: an account (spend_support.h), two endpoints ep0 and ep1 each
 * its own sim, and a worker holding both keys. */
struct fbc_run {
    struct spend_account a;
    char jobs[128];
    struct ep_sim eps[2];
    char logs[1][128];
    pid_t pid;
};

static void fbc_open(struct fbc_run *t, const char *tag)
{
    spend_account_open(&t->a, tag);
    snprintf(t->jobs, sizeof(t->jobs), "/tmp/llmq-%s-%d.jsonl", tag, (int)getpid());
    for (int i = 0; i < 2; i++) {
        ep_init(&t->eps[i], i);
        ep_sim_start(&t->eps[i], NULL);
        ep_add(t->a.name, &t->eps[i], "/v1", NULL);
    }
}

static void fbc_worker_start(struct fbc_run *t, const char *tag)
{
    char store[2][96];
    const char *args[2 + 2 * 2 + 1] = {"--concurrency", "64", NULL};
    ep_key_args(t->eps, 2, args, 2, store);
    worker_start_n(t->a.name, &t->eps[0].sim, tag, 1, t->logs, &t->pid, args);
}

/* Waits until the jobs "<prefix>-<i>" (i < n) ran or wait (30 s at most). */
static void fbc_settle(struct fbc_run *t, const char *prefix, int n)
{
    const char *groups[] = {prefix};
    const int counts[] = {n};
    assert_true(spend_wait_settled(&t->a, groups, counts, 1, 30000));
}

static long long fbc_spent(struct fbc_run *t, const char *budget)
{
    return spend_budget_field(&t->a, budget, "spent");
}

static void fbc_close(struct fbc_run *t)
{
    spend_workers_stop(&t->pid, 1);
    unlink(t->logs[0]);
    unlink(t->jobs);
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&t->eps[i]);
    spend_account_close(&t->a);
}

static void prices(const char *account, const char *model, const char *usd)
{
    struct cli_run r = ep_cli(account, 0, "prices", "set", model, "--input-usd-per-1m", usd,
                              "--output-usd-per-1m", usd, NULL);
    cli_free(&r);
}

static void test_fallback_priced_and_budgeted(void **state)
{
    (void)state;
    struct fbc_run t;
    fbc_open(&t, "epfbc");
    const char *acct = t.a.name;
    /* ep0 serves the models asked for, ep1 their fallbacks */
    ep_limit(acct, &t.eps[0], "dear", 1000, 60000);
    ep_limit(acct, &t.eps[0], "cheap", 1000, 60000);
    ep_limit(acct, &t.eps[1], "fb-cheap", 1000, 60000);
    ep_limit(acct, &t.eps[1], "fb-dear", 1000, 60000);
    prices(acct, "dear", "100");
    prices(acct, "fb-dear", "100");
    prices(acct, "cheap", "1");
    prices(acct, "fb-cheap", "1");
    struct cli_run r = ep_cli(acct, 0, "endpoints", "fallback", "dear", "fb-cheap", NULL);
    cli_free(&r);
    r = ep_cli(acct, 0, "endpoints", "fallback", "cheap", "fb-dear", NULL);
    cli_free(&r);
    r = ep_cli(acct, 0, "budgets", "set", "--tenant", "a", "--usd", "0.001", "--period", "month",
               NULL);
    cli_free(&r);
    r = ep_cli(acct, 0, "budgets", "set", "--tenant", "b", "--usd", "0.01", "--period", "month",
               NULL);
    cli_free(&r);
    r = ep_cli(acct, 0, "endpoints", "disable", "ep0", "--reason", "maintenance", NULL);
    cli_free(&r);
    worker_write_jobs(t.jobs, "a", A_JOBS, "dear", 20, "{\"tenant\":\"a\"}");
    worker_enqueue(acct, t.jobs);
    worker_write_jobs(t.jobs, "b", B_JOBS, "cheap", 20, "{\"tenant\":\"b\"}");
    worker_enqueue(acct, t.jobs);
    fbc_worker_start(&t, "epfbc");
    fbc_settle(&t, "a", A_JOBS);
    fbc_settle(&t, "b", B_JOBS);

    /* dear -> cheap: all on the fallback, charged at its price */
    struct fb_spend a = fb_spend_read(t.a.c, t.a.prefix, "a", A_JOBS, "fb-cheap", "ep1");
    long long a_spent = fbc_spent(&t, "t/a#usd/month");
    printf("# a: %lld done (%lld on fb-cheap), spent %lld nano-USD (usage at fb-cheap: %lld)\n",
           a.done, a.by_model, a_spent, a.nusd);
    assert_int_equal(a.done, A_JOBS);
    assert_int_equal(a.by_model, A_JOBS);
    assert_int_equal(a_spent, a.nusd);
    assert_true(a.nusd <= A_LIMIT_NUSD);

    /* cheap -> dear: a few on the fallback at its price, the rest wait */
    struct fb_spend b = fb_spend_read(t.a.c, t.a.prefix, "b", B_JOBS, "fb-dear", "ep1");
    long long b_spent = fbc_spent(&t, "t/b#usd/month");
    printf("# b: %lld done (%lld on fb-dear), %lld waiting, spent %lld of %lld nano-USD\n", b.done,
           b.by_model, b.queued, b_spent, B_LIMIT_NUSD);
    assert_true(b.done >= 1);
    assert_int_equal(b.by_model, b.done);
    assert_true(b_spent <= B_LIMIT_NUSD);
    assert_int_equal(b_spent, b.nusd);
    assert_int_equal(b.done + b.queued, B_JOBS);
    assert_int_equal(b.unattempted_queued, b.queued);
    assert_int_equal(b.other, 0);

    /* the asked model's endpoint back: the rest run there, at its price */
    long long fell_back = b.done;
    r = ep_cli(acct, 0, "endpoints", "enable", "ep0", NULL);
    cli_free(&r);
    fbc_settle(&t, "b", B_JOBS);
    b = fb_spend_read(t.a.c, t.a.prefix, "b", B_JOBS, "cheap", "ep0");
    b_spent = fbc_spent(&t, "t/b#usd/month");
    printf("# b after enable: %lld done (%lld on cheap), spent %lld nano-USD\n", b.done, b.by_model,
           b_spent);
    assert_int_equal(b.done, B_JOBS);
    assert_int_equal(b.by_model, B_JOBS - fell_back);
    assert_int_equal(b_spent, b.nusd);
    assert_true(b_spent <= B_LIMIT_NUSD);
    ep_assert_results(acct, "b", B_JOBS, A_JOBS + B_JOBS);
    fbc_close(&t);
}

/* Writes n chat jobs "<prefix>-<i>" of model and tenant, each with one
 * remote image (sized 1024 x 1024 at high detail by the estimate: 765
 * tokens on gpt-4o, 25501 on gpt-4o-mini, common/cost/image_size_tokens.c). */
static void write_image_jobs(const char *path, const char *prefix, int n, const char *model,
                             const char *tenant)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < n; i++)
        fprintf(
            f,
            "{\"custom_id\":\"%s-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
            "\"body\":{\"model\":\"%s\",\"max_tokens\":20,\"messages\":[{\"role\":\"user\","
            "\"content\":[{\"type\":\"text\",\"text\":\"what is in picture %d?\"},"
            "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/%d.png\"}}]}]},"
            "\"llmq\":{\"tenant\":\"%s\"}}\n",
            prefix, i, model, i, i, tenant);
    fclose(f);
}

#define IMG_JOBS 5
#define IMG_BUDGET_TOKENS 60000 /* 2 image jobs as gpt-4o-mini, all 5 as gpt-4o */

/* A fallback is charged its own cost, re-estimated for its model: an
 * image costs gpt-4o-mini 33 times the tokens it costs gpt-4o. A token
 * budget that affords every job as gpt-4o affords two as gpt-4o-mini: with
 * gpt-4o's endpoint out, at most two run on gpt-4o-mini and the rest wait. */
static void test_fallback_cost_reestimated(void **state)
{
    (void)state;
    struct fbc_run t;
    fbc_open(&t, "epfbi");
    const char *acct = t.a.name;
    ep_limit(acct, &t.eps[0], "gpt-4o", 1000, 60000);
    ep_limit(acct, &t.eps[1], "gpt-4o-mini", 1000, 60000);
    struct cli_run r = ep_cli(acct, 0, "endpoints", "fallback", "gpt-4o", "gpt-4o-mini", NULL);
    cli_free(&r);
    char limit[24];
    snprintf(limit, sizeof(limit), "%d", IMG_BUDGET_TOKENS);
    r = ep_cli(acct, 0, "budgets", "set", "--tenant", "i", "--tokens", limit, "--period", "month",
               NULL);
    cli_free(&r);
    r = ep_cli(acct, 0, "endpoints", "disable", "ep0", NULL);
    cli_free(&r);
    write_image_jobs(t.jobs, "i", IMG_JOBS, "gpt-4o", "i");
    worker_enqueue(acct, t.jobs);
    fbc_worker_start(&t, "epfbi");
    fbc_settle(&t, "i", IMG_JOBS);
    struct fb_spend s = fb_spend_read(t.a.c, t.a.prefix, "i", IMG_JOBS, "gpt-4o-mini", "ep1");
    printf("# image jobs: %lld done (%lld on gpt-4o-mini), %lld waiting\n", s.done, s.by_model,
           s.queued);
    assert_true(s.done >= 1 && s.done <= 2);
    assert_int_equal(s.by_model, s.done);
    assert_int_equal(s.queued, IMG_JOBS - s.done);
    assert_int_equal(s.unattempted_queued, s.queued);
    assert_true(fbc_spent(&t, "t/i#tokens/month") <= IMG_BUDGET_TOKENS);

    /* gpt-4o back: the rest run as asked, at its cost */
    r = ep_cli(acct, 0, "endpoints", "enable", "ep0", NULL);
    cli_free(&r);
    fbc_settle(&t, "i", IMG_JOBS);
    long long fell_back = s.done;
    s = fb_spend_read(t.a.c, t.a.prefix, "i", IMG_JOBS, "gpt-4o", "ep0");
    assert_int_equal(s.done, IMG_JOBS);
    assert_int_equal(s.by_model, IMG_JOBS - fell_back);
    fbc_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fallback_priced_and_budgeted),
        cmocka_unit_test(test_fallback_cost_reestimated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
