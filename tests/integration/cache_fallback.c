/* The response cache and model fallbacks (docs/cache.md "What is stored"):
 * gpt-4o's only endpoint disabled and fallback gpt-4o -> gpt-4o-mini, a
 * job of gpt-4o with cache mode use runs on gpt-4o-mini; that answer is not
 * stored (it would be served as gpt-4o's): the same request again is a
 * miss and calls the API. With gpt-4o's endpoint back, its own answer is
 * stored and the same request again is a hit. (Mutation spec
 * cache_stores_fallback.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"
#include "job_fields.h"

#define BODY                                                                                       \
    "{\"model\":\"gpt-4o\",\"max_tokens\":100,\"messages\":[{\"role\":\"user\",\"content\":"       \
    "\"asked of gpt-4o\"}]}"

/* Enqueues one job "<tag>-0" of BODY with cache mode use. */
static void enqueue_one(const char *account, const char *path, const char *tag)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"custom_id\":\"%s-0\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
            "\"body\":" BODY ",\"llmq\":{\"cache\":\"use\"}}\n",
            tag);
    fclose(f);
    worker_enqueue(account, path);
}

static void run_worker(const char *account, struct ep_sim *eps, int n, const char *tag)
{
    char logs[1][128], store[4][96];
    const char *args[4 + 2 * 4 + 1] = {"--concurrency", "4", "--exit-when-idle-ms", "1200"};
    ep_key_args(eps, n, args, 4, store);
    pid_t pid;
    worker_start_n(account, &eps[0].sim, tag, 1, logs, &pid, args);
    worker_wait_n(&pid, 1, 60000);
    unlink(logs[0]);
}

static char *field(redisContext *c, const char *prefix, const char *id, const char *name)
{
    char *v = llmq_test_job_field(c, prefix, id, name);
    assert_non_null(v);
    return v;
}

/* The job's result line (asserts one). */
static json_t *result_of(redisContext *c, const char *prefix, const char *id)
{
    char *text = llmq_test_job_result(c, prefix, id);
    assert_non_null(text);
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    free(text);
    return o;
}

/* The account's count of stored answers (0 before the first). */
static long long stored(redisContext *c, const char *stats)
{
    long long v = redis_int(c, "HGET %s %s", stats, "stored");
    return v < 0 ? 0 : v;
}

static void test_fallback_answer_not_stored(void **state)
{
    (void)state;
    char account[64], prefix[128], jobs[128], stats[160];
    llmq_test_unique_name(account, sizeof(account), "cachefb");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(stats, sizeof(stats), "%scaches", prefix);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-cachefb-%d.jsonl", (int)getpid());
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
    r = ep_cli(account, 0, "endpoints", "disable", "ep0", NULL);
    cli_free(&r);
    redisContext *c = llmq_test_redis_connect();

    /* served by the fallback: done, and nothing stored */
    enqueue_one(account, jobs, "a");
    run_worker(account, eps, 2, "cachefb1");
    json_t *a = result_of(c, prefix, "a-0");
    assert_string_equal(json_string_value(json_object_get(a, "model")), "gpt-4o-mini");
    assert_string_equal(json_string_value(json_object_get(a, "asked_model")), "gpt-4o");
    json_decref(a);
    assert_int_equal(stored(c, stats), 0);
    /* the same request again is no hit: it waits for the API */
    enqueue_one(account, jobs, "b");
    char *st = field(c, prefix, "b-0", "state");
    assert_string_equal(st, "queued");
    free(st);

    /* gpt-4o's endpoint back: b runs there, and its answer is stored */
    r = ep_cli(account, 0, "endpoints", "enable", "ep0", NULL);
    cli_free(&r);
    run_worker(account, eps, 2, "cachefb2");
    json_t *b = result_of(c, prefix, "b-0");
    assert_false(json_is_true(json_object_get(b, "cached")));
    assert_string_equal(json_string_value(json_object_get(b, "model")), "gpt-4o");
    json_decref(b);
    assert_int_equal(stored(c, stats), 1);
    enqueue_one(account, jobs, "c");
    json_t *cl = result_of(c, prefix, "c-0");
    assert_true(json_is_true(json_object_get(cl, "cached")));
    json_decref(cl);

    redisFree(c);
    unlink(jobs);
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fallback_answer_not_stored),
    };
    return cmocka_run_group_tests_name("cache_fallback", tests, NULL, NULL);
}
