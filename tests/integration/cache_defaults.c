/* The response cache's account settings and what a hit saves (docs/cache.md;
 * issue 37), through `llmq enqueue`, llmq-worker and an openai-sim whose
 * access log counts the upstream calls.
 *   model_default      `llmq cache set MODEL --mode use`: lines that ask
 *                      nothing use the cache (the second is a hit); a
 *                      line's own "cache": "off" wins over the default;
 *                      a tenant's own default (--mode off) wins over the
 *                      model's; the hit's original call is counted as saved
 *                      at the account's price, in `llmq cache stats`, `llmq
 *                      spend` and a worker's /metrics, and nothing is spent;
 *   shared_namespace   tenants acme and globex set to one namespace share
 *                      an entry (globex's request is a hit of acme's
 *                      answer); initech, not in it, does not;
 *   store_truncated    an answer cut off at max_tokens is stored when its
 *                      request asked (cache_store_truncated) and served to
 *                      a request that asks; a request that does not ask is
 *                      not served it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cache_support.h"
#include "test_case.h"

/* openai-sim answers max_tokens 5 with 5 tokens and finish_reason "length" */
#define CUT_BODY                                                                                   \
    "{\"model\":\"" MODEL "\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":"      \
    "\"a long answer\"}]}"

/* Runs `llmq ARGS...` on the case's account; asserts exit 0. */
static char *llmq_ok(struct cache_case *k, const char *const *argv)
{
    struct cli_run r = cli_run(k->account, argv);
    if (r.status != 0)
        fail_msg("%s %s: exit %d: %s", argv[1], argv[2], r.status, r.err);
    free(r.err);
    return r.out;
}

/* Enqueues one line of body with id id and llmq options opts. */
static void enqueue_one(struct cache_case *k, const char *id, const char *body, const char *opts)
{
    FILE *f = fopen(k->jobs, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
            "\"body\":%s,\"llmq\":{%s}}\n",
            id, body, opts);
    fclose(f);
    worker_enqueue(k->account, k->jobs);
}

static int cached(struct cache_case *k, const char *id)
{
    json_t *o = result_of(k, id);
    int v = is_cached(o);
    json_decref(o);
    return v;
}

/* The usage of job id's result priced at 1 USD (input), 0.5 (cached input)
 * and 4 (output) per 1M tokens, in nano-USD: what the price set below makes. */
static long long priced_usage(struct cache_case *k, const char *id)
{
    json_t *o = result_of(k, id);
    json_t *u = json_object_get(json_object_get(json_object_get(o, "response"), "body"), "usage");
    long long in = json_integer_value(json_object_get(u, "prompt_tokens"));
    long long out = json_integer_value(json_object_get(u, "completion_tokens"));
    long long cached_in = json_integer_value(
        json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    json_decref(o);
    assert_true(in > 0 && out > 0);
    return (in - cached_in) * 1000 + cached_in * 500 + out * 4000;
}

static json_t *cli_json(struct cache_case *k, const char *const *argv)
{
    char *out = llmq_ok(k, argv);
    json_t *o = json_loads(out, 0, NULL);
    if (o == NULL)
        fail_msg("%s %s: no JSON: %s", argv[1], argv[2], out);
    free(out);
    return o;
}

static void test_model_default(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    const char *price[] = {"llmq",
                           "prices",
                           "set",
                           MODEL,
                           "--input-usd-per-1m",
                           "1",
                           "--output-usd-per-1m",
                           "4",
                           "--cached-input-usd-per-1m",
                           "0.5",
                           NULL};
    free(llmq_ok(&k, price));
    const char *set[] = {"llmq", "cache", "set", MODEL, "--mode", "use", NULL};
    free(llmq_ok(&k, set));
    const char *off[] = {"llmq", "cache",    "set",    MODEL, "--mode",
                         "off",  "--tenant", "globex", NULL};
    free(llmq_ok(&k, off));
    const char *show[] = {"llmq", "cache", "show", NULL};
    char *shown = llmq_ok(&k, show);
    assert_non_null(strstr(shown, MODEL " mode=use ttl_s=86400"));
    assert_non_null(strstr(shown, MODEL "/t/globex mode=off"));
    free(shown);

    enqueue_one(&k, "a", BODY, "\"tenant\":\"acme\"");
    run_worker(&k);
    assert_state(&k, "a", "done");
    assert_int_equal(upstream_calls(&k, NULL), 1);
    const char *spend_argv[] = {"llmq", "spend", "--json", NULL};
    json_t *spend0 = cli_json(&k, spend_argv);

    /* asks nothing: the model's default (use) answers it from a's entry */
    enqueue_one(&k, "b", BODY, "\"tenant\":\"acme\"");
    assert_state(&k, "b", "done");
    assert_true(cached(&k, "b"));
    /* its own "off" wins over the default; globex's own default is off */
    enqueue_one(&k, "c", BODY, "\"tenant\":\"acme\",\"cache\":\"off\"");
    assert_state(&k, "c", "queued");
    enqueue_one(&k, "d", BODY, "\"tenant\":\"globex\"");
    assert_state(&k, "d", "queued");
    /* not even a leader: it uses no cache, so it is still a plain record
     * (a job of the cache is a hash with its entry's name, field ck) */
    assert_int_equal(redis_int(k.c, "EXISTS %s%s", k.prefix, "jr:d"), 1);
    assert_int_equal(redis_int(k.c, "EXISTS %s%s", k.prefix, "job:d"), 0);

    /* saved: the hit's original call at the account's price, spent by none */
    long long want = priced_usage(&k, "a");
    const char *stats[] = {"llmq", "cache", "stats", "--json", NULL};
    json_t *st = cli_json(&k, stats);
    assert_int_equal(json_integer_value(json_object_get(st, "hits")), 1);
    assert_int_equal(json_integer_value(json_object_get(st, "saved_nano_usd")), want);
    json_decref(st);
    json_t *spend1 = cli_json(&k, spend_argv);
    json_t *t0 = json_object_get(spend0, "total"), *t1 = json_object_get(spend1, "total");
    assert_int_equal(json_integer_value(json_object_get(t1, "nano_usd")),
                     json_integer_value(json_object_get(t0, "nano_usd")));
    assert_int_equal(json_integer_value(json_object_get(t1, "jobs")),
                     json_integer_value(json_object_get(t0, "jobs")));
    assert_int_equal(json_integer_value(json_object_get(t1, "cache_hits")), 1);
    assert_int_equal(json_integer_value(json_object_get(t1, "saved_nano_usd")), want);
    json_decref(spend0);
    json_decref(spend1);

    /* a worker's /metrics shows it (and runs c and d: two more calls) */
    int port = llmq_test_free_port();
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *args[] = {"--metrics-port", port_s, NULL};
    pid_t w = worker_start(k.account, &k.sim, k.log, args);
    char want_m[256];
    snprintf(want_m, sizeof(want_m), "llmq_cache_saved_usd{account=\"%s\"}", k.account);
    struct worker_page pg = worker_http_wait_for(port, "/metrics", want_m, 30000);
    double usd = worker_metric_sum(pg.body, "llmq_cache_saved_usd", k.account);
    if (usd * 1e9 < (double)want - 0.5 || usd * 1e9 > (double)want + 0.5)
        fail_msg("llmq_cache_saved_usd %.9f, expected %lld nano-USD:\n%s", usd, want, pg.body);
    free(pg.body);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 60000), 0);
    case_close(&k);
}

static void test_shared_namespace(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    const char *acme[] = {"llmq", "cache",       "set",      "--tenant",
                          "acme", "--namespace", "partners", NULL};
    const char *globex[] = {"llmq",   "cache",       "set",      "--tenant",
                            "globex", "--namespace", "partners", NULL};
    free(llmq_ok(&k, acme));
    free(llmq_ok(&k, globex));
    enqueue_one(&k, "a", BODY, "\"tenant\":\"acme\",\"cache\":\"use\"");
    run_worker(&k);
    assert_state(&k, "a", "done");
    /* globex shares acme's entry on purpose: a hit */
    enqueue_one(&k, "g", BODY, "\"tenant\":\"globex\",\"cache\":\"use\"");
    assert_state(&k, "g", "done");
    assert_true(cached(&k, "g"));
    /* initech is in no namespace: its own scope, a miss */
    enqueue_one(&k, "i", BODY, "\"tenant\":\"initech\",\"cache\":\"use\"");
    assert_state(&k, "i", "queued");
    run_worker(&k);
    assert_false(cached(&k, "i"));
    assert_int_equal(upstream_calls(&k, NULL), 2);
    const char *purge[] = {"llmq", "cache", "stats", "--namespace", "partners", "--json", NULL};
    json_t *st = cli_json(&k, purge);
    assert_int_equal(json_integer_value(json_object_get(st, "entries")), 1);
    json_decref(st);
    /* out of the namespace again: globex's own scope, a miss */
    const char *unset[] = {"llmq", "cache", "unset", "--tenant", "globex", NULL};
    free(llmq_ok(&k, unset));
    enqueue_one(&k, "g2", BODY, "\"tenant\":\"globex\",\"cache\":\"use\"");
    assert_state(&k, "g2", "queued");
    case_close(&k);
}

static void test_store_truncated(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    enqueue_one(&k, "a", CUT_BODY, "\"cache\":\"use\",\"cache_store_truncated\":true");
    run_worker(&k);
    assert_state(&k, "a", "done");
    /* a request that does not ask is not served the cut-off answer */
    enqueue_one(&k, "n", CUT_BODY, "\"cache\":\"use\"");
    assert_state(&k, "n", "queued");
    run_worker(&k);
    assert_false(cached(&k, "n"));
    /* one that asks is */
    enqueue_one(&k, "b", CUT_BODY, "\"cache\":\"use\",\"cache_store_truncated\":true");
    assert_state(&k, "b", "done");
    assert_true(cached(&k, "b"));
    json_t *b = result_of(&k, "b");
    const json_t *ch = json_array_get(
        json_object_get(json_object_get(json_object_get(b, "response"), "body"), "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "length");
    json_decref(b);
    assert_int_equal(upstream_calls(&k, NULL), 2);
    case_close(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_default),
        cmocka_unit_test(test_shared_namespace),
        cmocka_unit_test(test_store_truncated),
    };
    if (LLMQ_TEST_CASE_SELECT(tests) != 0)
        return 1;
    return cmocka_run_group_tests_name("cache_defaults", tests, NULL, NULL);
}
