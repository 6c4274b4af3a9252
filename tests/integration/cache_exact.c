/* The response cache through the real parts (docs/cache.md): jobs enqueued
 * with `llmq enqueue` (llmq.cache in the Batch line), llmq-worker, and an
 * openai-sim whose access log counts the upstream calls.
 *   hit_spends_nothing  the same request twice, one after the other: one
 *                       upstream call; the second ends done at enqueue with
 *                       "cached": true, and the account+model bucket and the
 *                       spend counters are what they were after the first;
 *                       a worker's /metrics shows the hit, the miss and the
 *                       stored answer (llmq_cache_*);
 *   tenant_scoped       tenant A's stored answer is not tenant B's: B's
 *                       identical request is a miss and calls the API
 *                       (tests/mutation/specs/cache_key_without_tenant);
 *   single_flight       50 identical requests enqueued together: one
 *                       upstream call, 50 answers, 49 of them cached;
 *   leader_fails        the same with one attempt each and the first call
 *                       answered 500: the leader ends dead and one waiter
 *                       calls again: two upstream calls, 49 answers;
 *   errors_not_stored   a request that failed leaves nothing stored: the
 *                       same again is a miss;
 *   waiter_deadline     a request waiting for an identical one in flight
 *                       (its leader held back by the rate limit) ends
 *                       expired at its own deadline, not with the leader;
 *   cut_off_not_stored  an answer cut off at max_tokens (finish_reason
 *                       "length") is not stored: the same again is a miss;
 *   refresh_and_off     refresh calls the API and replaces the entry; off
 *                       neither reads nor writes;
 *   ttl_expiry          an entry with cache_ttl_s 1 is gone after it: the
 *                       same request is a miss;
 *   purge_by_tenant     `llmq cache stats` counts two tenants' entries;
 *                       `llmq cache purge --tenant acme` deletes acme's
 *                       only: acme's request is a miss, globex's a hit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "cache_support.h"
#include "test_case.h"

/* Writes n lines of the same request, ids "<tag>-<i>", with llmq options
 * opts (the text inside the "llmq" object), and enqueues them. */
static void enqueue_body(struct cache_case *k, const char *tag, int n, const char *body,
                         const char *opts)
{
    FILE *f = fopen(k->jobs, "w");
    assert_non_null(f);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "{\"custom_id\":\"%s-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":%s,\"llmq\":{%s}}\n",
                tag, i, body, opts);
    fclose(f);
    worker_enqueue(k->account, k->jobs);
}

static void enqueue_same(struct cache_case *k, const char *tag, int n, const char *opts)
{
    enqueue_body(k, tag, n, BODY, opts);
}

/* The text of HGETALL of key (fields and values, in Redis's order). */
static char *hash_text(redisContext *c, const char *key)
{
    redisReply *r = redisCommand(c, "HGETALL %s", key);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
    size_t cap = 16, len = 0;
    char *s = calloc(1, cap);
    for (size_t i = 0; i < r->elements; i++) {
        size_t need = len + r->element[i]->len + 2;
        while (need > cap)
            s = realloc(s, cap *= 2);
        memcpy(s + len, r->element[i]->str, r->element[i]->len);
        len += r->element[i]->len;
        s[len++] = i % 2 ? '\n' : '=';
        s[len] = '\0';
    }
    freeReplyObject(r);
    return s;
}

static long long cache_stat(struct cache_case *k, const char *field)
{
    char key[256];
    snprintf(key, sizeof(key), "%scaches", k->prefix);
    long long v = redis_int(k->c, "HGET %s %s", key, field);
    return v < 0 ? 0 : v; /* a counter never written is 0 */
}

/* The hashes of the keys matching pattern (of the account: prefix first),
 * as one text: what the spend counters and budgets hold. */
static char *hashes_text(struct cache_case *k, const char *pattern)
{
    char pat[256];
    snprintf(pat, sizeof(pat), "%s%s", k->prefix, pattern);
    redisReply *keys = redisCommand(k->c, "KEYS %s", pat);
    assert_true(keys != NULL && keys->type == REDIS_REPLY_ARRAY);
    size_t len = 0;
    char *all = calloc(1, 1);
    for (size_t i = 0; i < keys->elements; i++) {
        char *h = hash_text(k->c, keys->element[i]->str);
        size_t room = keys->element[i]->len + strlen(h) + 4;
        all = realloc(all, len + room);
        len += (size_t)snprintf(all + len, room, "%s:\n%s\n", keys->element[i]->str, h);
        free(h);
    }
    freeReplyObject(keys);
    return all;
}

/* Drops the lines of the response cache's hits and savings ("...|hits=",
 * "...|saved=") from text of hashes_text, in place. */
static void drop_saved(char *text)
{
    char *w = text;
    for (char *line = text; *line != '\0';) {
        char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) + 1 : strlen(line);
        char *eq = memchr(line, '=', len);
        size_t name = eq != NULL ? (size_t)(eq - line) : len;
        int saved = eq != NULL && ((name > 5 && memcmp(eq - 5, "|hits", 5) == 0) ||
                                   (name > 6 && memcmp(eq - 6, "|saved", 6) == 0));
        if (!saved) {
            memmove(w, line, len);
            w += len;
        }
        line += len;
    }
    *w = '\0';
}

/* A worker's /metrics shows the account's cache counters after one miss
 * (stored) and one hit. */
static void assert_cache_metrics(struct cache_case *k)
{
    int port = llmq_test_free_port();
    char port_s[16], want[256];
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *args[] = {"--metrics-port", port_s, NULL};
    pid_t w = worker_start(k->account, &k->sim, k->log, args);
    snprintf(want, sizeof(want), "llmq_cache_requests{account=\"%s\",result=\"hit\"} 1\n",
             k->account);
    struct worker_page pg = worker_http_wait_for(port, "/metrics", want, 30000);
    if (strstr(pg.body, want) == NULL)
        fail_msg("no %s in /metrics:\n%s", want, pg.body);
    snprintf(want, sizeof(want), "llmq_cache_requests{account=\"%s\",result=\"miss\"} 1\n",
             k->account);
    assert_non_null(strstr(pg.body, want));
    assert_int_equal(worker_metric_sum(pg.body, "llmq_cache_stored_answers", k->account), 1);
    assert_true(worker_metric_sum(pg.body, "llmq_cache_stored_bytes", k->account) > 0);
    assert_true(worker_metric_sum(pg.body, "llmq_cache_saved_tokens", k->account) > 0);
    free(pg.body);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 60000), 0);
}

static void test_hit_spends_nothing(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    const char *budget[] = {"llmq",     "budgets", "set",      "--tenant", "acme",
                            "--tokens", "100000",  "--period", "month",    NULL};
    struct cli_run br = cli_run(k.account, budget);
    assert_int_equal(br.status, 0);
    cli_free(&br);
    enqueue_same(&k, "a", 1, "\"cache\":\"use\",\"tenant\":\"acme\"");
    run_worker(&k);
    assert_state(&k, "a-0", "done");
    char bucket[256];
    snprintf(bucket, sizeof(bucket), "%slimit:%s", k.prefix, MODEL);
    long long n0 = redis_int(k.c, "HGET %s %s", bucket, "n");
    long long tok0 = redis_int(k.c, "HGET %s %s", bucket, "tok");
    assert_int_equal(n0, 1);
    char *spend0 = hashes_text(&k, "spend:*"), *budget0 = hashes_text(&k, "budget:*");
    assert_non_null(strstr(spend0, "acme")); /* the first call was counted */

    enqueue_same(&k, "b", 1, "\"cache\":\"use\",\"tenant\":\"acme\"");
    /* answered at enqueue: no worker runs */
    assert_state(&k, "b-0", "done");
    json_t *a = result_of(&k, "a-0"), *b = result_of(&k, "b-0");
    assert_false(is_cached(a));
    assert_true(is_cached(b));
    assert_true(json_is_integer(json_object_get(b, "cache_age_s")));
    assert_string_equal(json_string_value(json_object_get(b, "custom_id")), "b-0");
    assert_non_null(answer_text(a));
    assert_string_equal(answer_text(a), answer_text(b));
    json_decref(a);
    json_decref(b);
    int ok = 0;
    assert_int_equal(upstream_calls(&k, &ok), 1);
    assert_int_equal(redis_int(k.c, "HGET %s %s", bucket, "n"), n0);
    assert_int_equal(redis_int(k.c, "HGET %s %s", bucket, "tok"), tok0);
    char *spend1 = hashes_text(&k, "spend:*"), *budget1 = hashes_text(&k, "budget:*");
    drop_saved(spend1); /* the hit is counted as saved (cache_defaults), never as spent */
    assert_string_equal(spend0, spend1);
    assert_string_equal(budget0, budget1);
    free(spend0);
    free(spend1);
    free(budget0);
    free(budget1);
    assert_int_equal(cache_stat(&k, "hits"), 1);
    assert_int_equal(cache_stat(&k, "misses"), 1);
    assert_cache_metrics(&k);
    case_close(&k);
}

static void test_tenant_scoped(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    enqueue_same(&k, "a", 1, "\"cache\":\"use\",\"tenant\":\"acme\"");
    run_worker(&k);
    assert_state(&k, "a-0", "done");
    enqueue_same(&k, "b", 1, "\"cache\":\"use\",\"tenant\":\"globex\"");
    /* not answered from acme's entry: queued for the API */
    assert_state(&k, "b-0", "queued");
    run_worker(&k);
    json_t *b = result_of(&k, "b-0");
    assert_false(is_cached(b));
    json_decref(b);
    int ok = 0;
    assert_int_equal(upstream_calls(&k, &ok), 2);
    /* and acme's own request again is a hit */
    enqueue_same(&k, "c", 1, "\"cache\":\"use\",\"tenant\":\"acme\"");
    assert_state(&k, "c-0", "done");
    json_t *c = result_of(&k, "c-0");
    assert_true(is_cached(c));
    json_decref(c);
    case_close(&k);
}

/* 50 identical jobs with opts; returns how many ended done with an answer
 * and how many of those were cached; *dead the dead ones. */
static void count_answers(struct cache_case *k, int n, int *done, int *cached, int *dead)
{
    *done = *cached = *dead = 0;
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "s-%d", i);
        char *st = state_of(k, id);
        if (strcmp(st, "dead") == 0) {
            (*dead)++;
        } else {
            assert_string_equal(st, "done");
            json_t *o = result_of(k, id);
            assert_non_null(answer_text(o));
            assert_string_equal(json_string_value(json_object_get(o, "custom_id")), id);
            (*done)++;
            *cached += is_cached(o);
            json_decref(o);
        }
        free(st);
    }
}

static void test_single_flight(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    enqueue_same(&k, "s", 50, "\"cache\":\"use\"");
    assert_int_equal(cache_stat(&k, "coalesced"), 49);
    assert_state(&k, "s-1", "coalesced");
    run_worker(&k);
    int done, cached, dead, ok = 0;
    count_answers(&k, 50, &done, &cached, &dead);
    assert_int_equal(done, 50);
    assert_int_equal(cached, 49);
    assert_int_equal(dead, 0);
    assert_int_equal(upstream_calls(&k, &ok), 1);
    case_close(&k);
}

static void test_leader_fails(void **state)
{
    (void)state;
    struct cache_case k;
    const char *sim_args[] = {"--fail-first", "1", NULL};
    case_open(&k, sim_args);
    enqueue_same(&k, "s", 50, "\"cache\":\"use\",\"max_attempts\":1");
    run_worker(&k);
    int done, cached, dead, ok = 0;
    count_answers(&k, 50, &done, &cached, &dead);
    assert_int_equal(dead, 1);
    assert_int_equal(done, 49);
    assert_int_equal(cached, 48);
    assert_int_equal(upstream_calls(&k, &ok), 2);
    assert_int_equal(ok, 1);
    case_close(&k);
}

static void test_errors_not_stored(void **state)
{
    (void)state;
    struct cache_case k;
    const char *sim_args[] = {"--fail-first", "1", NULL};
    case_open(&k, sim_args);
    enqueue_same(&k, "a", 1, "\"cache\":\"use\",\"max_attempts\":1");
    run_worker(&k);
    assert_state(&k, "a-0", "dead");
    enqueue_same(&k, "b", 1, "\"cache\":\"use\"");
    assert_state(&k, "b-0", "queued");
    run_worker(&k);
    json_t *b = result_of(&k, "b-0");
    assert_false(is_cached(b));
    json_decref(b);
    assert_int_equal(cache_stat(&k, "stored"), 1);
    case_close(&k);
}

/* Waits (bounded generously) until job id's state is want. */
static void wait_state(struct cache_case *k, const char *id, const char *want)
{
    long long deadline = llmq_test_now_ms() + 60000;
    for (;;) {
        char *st = state_of(k, id);
        int done = strcmp(st, want) == 0;
        free(st);
        if (done)
            return;
        if (llmq_test_now_ms() >= deadline)
            assert_state(k, id, want);
        usleep(50000);
    }
}

static void test_waiter_deadline(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    /* one request a minute, and x takes it: the leader a waits for the next */
    worker_limits_set(k.account, MODEL, "--rpm", 1, 60000);
    const char *other = "{\"model\":\"" MODEL "\",\"max_tokens\":100,\"messages\":[{\"role\":"
                        "\"user\",\"content\":\"another question\"}]}";
    enqueue_body(&k, "x", 1, other, "");
    enqueue_same(&k, "a", 1, "\"cache\":\"use\"");
    enqueue_same(&k, "w", 1, "\"cache\":\"use\",\"ttl_ms\":1500");
    assert_state(&k, "w-0", "coalesced");
    pid_t wk = worker_start(k.account, &k.sim, k.log, NULL);
    wait_state(&k, "x-0", "done");
    wait_state(&k, "w-0", "dead");
    json_t *w = result_of(&k, "w-0");
    assert_string_equal(json_string_value(json_object_get(json_object_get(w, "error"), "code")),
                        "expired");
    json_decref(w);
    assert_state(&k, "a-0", "queued"); /* the leader still waits its turn */
    kill(wk, SIGTERM);
    assert_int_equal(worker_wait(wk, 60000), 0);
    case_close(&k);
}

static void test_cut_off_not_stored(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    /* openai-sim answers max_tokens 5 with 5 tokens and finish_reason "length" */
    const char *cut = "{\"model\":\"" MODEL "\",\"max_tokens\":5,\"messages\":[{\"role\":"
                      "\"user\",\"content\":\"a long answer\"}]}";
    enqueue_body(&k, "a", 1, cut, "\"cache\":\"use\"");
    run_worker(&k);
    json_t *a = result_of(&k, "a-0");
    const json_t *ch = json_array_get(
        json_object_get(json_object_get(json_object_get(a, "response"), "body"), "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "length");
    json_decref(a);
    assert_int_equal(cache_stat(&k, "stored"), 0);
    enqueue_body(&k, "b", 1, cut, "\"cache\":\"use\"");
    assert_state(&k, "b-0", "queued"); /* a miss: called again */
    run_worker(&k);
    int ok = 0;
    assert_int_equal(upstream_calls(&k, &ok), 2);
    case_close(&k);
}

static void test_refresh_and_off(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    enqueue_same(&k, "a", 1, "\"cache\":\"use\"");
    run_worker(&k);
    /* off: neither reads (queued, called) nor writes (stored stays 1) */
    enqueue_same(&k, "o", 1, "\"cache\":\"off\"");
    assert_state(&k, "o-0", "queued");
    run_worker(&k);
    assert_int_equal(cache_stat(&k, "stored"), 1);
    /* refresh: called although an entry is stored, and stores again */
    enqueue_same(&k, "r", 1, "\"cache\":\"refresh\"");
    assert_state(&k, "r-0", "queued");
    run_worker(&k);
    assert_int_equal(cache_stat(&k, "stored"), 2);
    json_t *r = result_of(&k, "r-0");
    assert_false(is_cached(r));
    json_decref(r);
    int ok = 0;
    assert_int_equal(upstream_calls(&k, &ok), 3);
    /* the entry is the refreshed answer: a hit now is young, its line the refresh's */
    enqueue_same(&k, "u", 1, "\"cache\":\"use\"");
    assert_state(&k, "u-0", "done");
    json_t *u = result_of(&k, "u-0");
    assert_true(is_cached(u));
    r = result_of(&k, "r-0");
    assert_string_equal(json_string_value(json_object_get(u, "id")),
                        json_string_value(json_object_get(r, "id")));
    json_decref(u);
    json_decref(r);
    case_close(&k);
}

static void test_ttl_expiry(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    enqueue_same(&k, "a", 1, "\"cache\":\"use\",\"cache_ttl_s\":1");
    run_worker(&k);
    assert_int_equal(cache_stat(&k, "stored"), 1);
    /* wait for Redis to expire it (an event, bounded generously) */
    char pat[256];
    snprintf(pat, sizeof(pat), "%scache:*", k.prefix);
    long long deadline = llmq_test_now_ms() + 60000;
    for (;;) {
        redisReply *r = redisCommand(k.c, "KEYS %s", pat);
        assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
        size_t n = r->elements;
        freeReplyObject(r);
        if (n == 0)
            break;
        assert_true(llmq_test_now_ms() < deadline);
        usleep(100000);
    }
    enqueue_same(&k, "b", 1, "\"cache\":\"use\"");
    assert_state(&k, "b-0", "queued");
    case_close(&k);
}

/* `llmq cache ARGS...` for the case's account: its stdout (new). */
static char *cache_cli(struct cache_case *k, const char *const *args)
{
    struct cli_run r = cli_run(k->account, args);
    if (r.status != 0)
        fail_msg("llmq cache: exit %d: %s", r.status, r.err);
    char *out = strdup(r.out);
    cli_free(&r);
    return out;
}

static long long stats_entries(struct cache_case *k)
{
    const char *args[] = {"llmq", "cache", "stats", "--json", NULL};
    char *out = cache_cli(k, args);
    json_t *o = json_loads(out, 0, NULL);
    assert_non_null(o);
    long long n = json_integer_value(json_object_get(o, "entries"));
    json_decref(o);
    free(out);
    return n;
}

static void test_purge_by_tenant(void **state)
{
    (void)state;
    struct cache_case k;
    case_open(&k, NULL);
    enqueue_same(&k, "a", 1, "\"cache\":\"use\",\"tenant\":\"acme\"");
    enqueue_same(&k, "g", 1, "\"cache\":\"use\",\"tenant\":\"globex\"");
    run_worker(&k);
    assert_int_equal(stats_entries(&k), 2);
    const char *purge[] = {"llmq", "cache", "purge", "--tenant", "acme", NULL};
    char *out = cache_cli(&k, purge);
    assert_non_null(strstr(out, "purged 1 entries"));
    free(out);
    assert_int_equal(stats_entries(&k), 1);
    enqueue_same(&k, "b", 1, "\"cache\":\"use\",\"tenant\":\"acme\"");
    assert_state(&k, "b-0", "queued");
    enqueue_same(&k, "h", 1, "\"cache\":\"use\",\"tenant\":\"globex\"");
    assert_state(&k, "h-0", "done");
    case_close(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_spends_nothing), cmocka_unit_test(test_tenant_scoped),
        cmocka_unit_test(test_single_flight),      cmocka_unit_test(test_leader_fails),
        cmocka_unit_test(test_errors_not_stored),  cmocka_unit_test(test_waiter_deadline),
        cmocka_unit_test(test_cut_off_not_stored), cmocka_unit_test(test_refresh_and_off),
        cmocka_unit_test(test_ttl_expiry),         cmocka_unit_test(test_purge_by_tenant),
    };
    if (LLMQ_TEST_CASE_SELECT(tests) != 0)
        return 1;
    return cmocka_run_group_tests_name("cache_exact", tests, NULL, NULL);
}
