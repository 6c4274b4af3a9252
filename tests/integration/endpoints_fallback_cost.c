/* A fallback model's price and spend budgets (README "Endpoints", "Model
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
        char id[64], key[256];
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
        snprintf(key, sizeof(key), "%sres:%s", P, id);
        redisReply *r = redisCommand(c, "GET %s", key);
        assert_true(r != NULL && r->type == REDIS_REPLY_STRING);
        json_t *line = json_loads(r->str, 0, NULL);
        freeReplyObject(r);
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

/* The spent of budget id (llmq budgets list --json). */
static long long budget_spent(const char *account, const char *id)
{
    struct cli_run r = ep_cli(account, 0, "budgets", "list", "--json", NULL);
    json_t *arr = json_loads(r.out, 0, NULL);
    cli_free(&r);
    assert_non_null(arr);
    long long v = -1;
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "id")), id) == 0)
            v = json_integer_value(json_object_get(o, "spent"));
    }
    json_decref(arr);
    return v;
}

/* Waits (up to 30 s) until no job of "<prefix>-<i>" (i < n) is running or
 * delayed and the done count held still for 800 ms. */
static void wait_settled(redisContext *c, const char *P, const char *prefix, int n)
{
    long long deadline = llmq_test_now_ms() + 30000, since = llmq_test_now_ms(), last = -1;
    while (llmq_test_now_ms() < deadline) {
        long long done = 0, busy = 0;
        for (int i = 0; i < n; i++) {
            char id[64];
            snprintf(id, sizeof(id), "%s-%d", prefix, i);
            char *st = llmq_test_job_field(c, P, id, "state");
            done += st != NULL && strcmp(st, "done") == 0;
            busy += st != NULL && (strcmp(st, "running") == 0 || strcmp(st, "delayed") == 0);
            free(st);
        }
        if (busy > 0 || done != last) {
            last = busy > 0 ? -1 : done;
            since = llmq_test_now_ms();
        } else if (llmq_test_now_ms() - since >= 800) {
            return;
        }
        usleep(100000);
    }
    fail_msg("jobs %s-* did not settle within 30 s", prefix);
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
    char account[64], P[128], jobs[128];
    llmq_test_unique_name(account, sizeof(account), "epfbc");
    snprintf(P, sizeof(P), "llmq:{%s}:", account);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epfbc-%d.jsonl", (int)getpid());
    redisContext *c = llmq_test_redis_connect();
    struct ep_sim eps[2];
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], NULL);
        ep_add(account, &eps[i], "/v1", NULL);
    }
    /* ep0 serves the models asked for, ep1 their fallbacks */
    ep_limit(account, &eps[0], "dear", 1000, 60000);
    ep_limit(account, &eps[0], "cheap", 1000, 60000);
    ep_limit(account, &eps[1], "fb-cheap", 1000, 60000);
    ep_limit(account, &eps[1], "fb-dear", 1000, 60000);
    prices(account, "dear", "100");
    prices(account, "fb-dear", "100");
    prices(account, "cheap", "1");
    prices(account, "fb-cheap", "1");
    struct cli_run r = ep_cli(account, 0, "endpoints", "fallback", "dear", "fb-cheap", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "endpoints", "fallback", "cheap", "fb-dear", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "budgets", "set", "--tenant", "a", "--usd", "0.001", "--period", "month",
               NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "budgets", "set", "--tenant", "b", "--usd", "0.01", "--period", "month",
               NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "endpoints", "disable", "ep0", "--reason", "maintenance", NULL);
    cli_free(&r);
    worker_write_jobs(jobs, "a", A_JOBS, "dear", 20, "{\"tenant\":\"a\"}");
    worker_enqueue(account, jobs);
    worker_write_jobs(jobs, "b", B_JOBS, "cheap", 20, "{\"tenant\":\"b\"}");
    worker_enqueue(account, jobs);

    char logs[1][128], store[2][96];
    const char *args[4 + 2 * 2 + 1] = {"--concurrency", "64", NULL};
    ep_key_args(eps, 2, args, 2, store);
    pid_t pid;
    worker_start_n(account, &eps[0].sim, "epfbc", 1, logs, &pid, args);
    wait_settled(c, P, "a", A_JOBS);
    wait_settled(c, P, "b", B_JOBS);

    /* dear -> cheap: all on the fallback, charged at its price */
    struct fb_spend a = fb_spend_read(c, P, "a", A_JOBS, "fb-cheap", "ep1");
    printf("# a: %lld done (%lld on fb-cheap), spent %lld nano-USD (usage at fb-cheap: %lld)\n",
           a.done, a.by_model, budget_spent(account, "t/a#usd/month"), a.nusd);
    assert_int_equal(a.done, A_JOBS);
    assert_int_equal(a.by_model, A_JOBS);
    assert_int_equal(budget_spent(account, "t/a#usd/month"), a.nusd);
    assert_true(a.nusd <= A_LIMIT_NUSD);

    /* cheap -> dear: a few on the fallback at its price, the rest wait */
    struct fb_spend b = fb_spend_read(c, P, "b", B_JOBS, "fb-dear", "ep1");
    long long b_spent = budget_spent(account, "t/b#usd/month");
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
    r = ep_cli(account, 0, "endpoints", "enable", "ep0", NULL);
    cli_free(&r);
    wait_settled(c, P, "b", B_JOBS);
    b = fb_spend_read(c, P, "b", B_JOBS, "cheap", "ep0");
    b_spent = budget_spent(account, "t/b#usd/month");
    printf("# b after enable: %lld done (%lld on cheap), spent %lld nano-USD\n", b.done, b.by_model,
           b_spent);
    assert_int_equal(b.done, B_JOBS);
    assert_int_equal(b.by_model, B_JOBS - fell_back);
    assert_int_equal(b_spent, b.nusd);
    assert_true(b_spent <= B_LIMIT_NUSD);
    ep_assert_results(account, "b", B_JOBS, A_JOBS + B_JOBS);

    kill(pid, SIGTERM);
    worker_wait_n(&pid, 1, 20000);
    unlink(logs[0]);
    unlink(jobs);
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
    redisFree(c);
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
    char account[64], P[128], jobs[128];
    llmq_test_unique_name(account, sizeof(account), "epfbi");
    snprintf(P, sizeof(P), "llmq:{%s}:", account);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epfbi-%d.jsonl", (int)getpid());
    redisContext *c = llmq_test_redis_connect();
    struct ep_sim eps[2];
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], NULL);
        ep_add(account, &eps[i], "/v1", NULL);
    }
    ep_limit(account, &eps[0], "gpt-4o", 1000, 60000);
    ep_limit(account, &eps[1], "gpt-4o-mini", 1000, 60000);
    struct cli_run r = ep_cli(account, 0, "endpoints", "fallback", "gpt-4o", "gpt-4o-mini", NULL);
    cli_free(&r);
    char limit[24];
    snprintf(limit, sizeof(limit), "%d", IMG_BUDGET_TOKENS);
    r = ep_cli(account, 0, "budgets", "set", "--tenant", "i", "--tokens", limit, "--period",
               "month", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "endpoints", "disable", "ep0", NULL);
    cli_free(&r);
    write_image_jobs(jobs, "i", IMG_JOBS, "gpt-4o", "i");
    worker_enqueue(account, jobs);

    char logs[1][128], store[2][96];
    const char *args[2 + 2 * 2 + 1] = {"--concurrency", "16", NULL};
    ep_key_args(eps, 2, args, 2, store);
    pid_t pid;
    worker_start_n(account, &eps[0].sim, "epfbi", 1, logs, &pid, args);
    wait_settled(c, P, "i", IMG_JOBS);
    struct fb_spend s = fb_spend_read(c, P, "i", IMG_JOBS, "gpt-4o-mini", "ep1");
    printf("# image jobs: %lld done (%lld on gpt-4o-mini), %lld waiting\n", s.done, s.by_model,
           s.queued);
    assert_true(s.done >= 1 && s.done <= 2);
    assert_int_equal(s.by_model, s.done);
    assert_int_equal(s.queued, IMG_JOBS - s.done);
    assert_int_equal(s.unattempted_queued, s.queued);
    assert_true(budget_spent(account, "t/i#tokens/month") <= IMG_BUDGET_TOKENS);

    /* gpt-4o back: the rest run as asked, at its cost */
    r = ep_cli(account, 0, "endpoints", "enable", "ep0", NULL);
    cli_free(&r);
    wait_settled(c, P, "i", IMG_JOBS);
    long long fell_back = s.done;
    s = fb_spend_read(c, P, "i", IMG_JOBS, "gpt-4o", "ep0");
    assert_int_equal(s.done, IMG_JOBS);
    assert_int_equal(s.by_model, IMG_JOBS - fell_back);

    kill(pid, SIGTERM);
    worker_wait_n(&pid, 1, 20000);
    unlink(logs[0]);
    unlink(jobs);
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
    redisFree(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fallback_priced_and_budgeted),
        cmocka_unit_test(test_fallback_cost_reestimated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
