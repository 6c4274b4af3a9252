/* Offload under policy `all`, end to end: real Redis, two real llmq-workers,
 * openai-sim's Batch API (docs/DESIGN.md §3.10).
 *   - 5,000 jobs marked completion_window 24h over two models (the issue's
 *     size), with files of at most 600 requests, end as provider batches of
 *     at most 600 jobs, each
 *     submitted once; every job is answered exactly once, its result line
 *     shaped like a live one plus "offloaded": true and the provider batch
 *     id, and none of them is ever called live;
 *   - 20 unmarked jobs of the same model in the same account run live;
 *   - a line the provider fails once (500) is retried in a later batch and
 *     ends done; a line it refuses (400) is dead-lettered with its reason;
 *   - the day's spend is the offloaded usage at the batch price (half the
 *     list price) plus the live usage at the list price, to the nano-dollar;
 *   - `llmq offload list` and `show` name each batch, its provider batch id,
 *     state and counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "account.h"
#include "offload_support.h"

#define NANO "gpt-4.1-nano"
/* eligible jobs per model (the issue: 5,000 over two models) and the
 * models' file limit, low to force several files */
#define N_PER_MODEL 2500
#define FILE_MAX 600

struct job_set {
    char *ids[N_PER_MODEL * 2 + 20];
    size_t n;
};

static void add_ids(struct job_set *s, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) {
        char id[96];
        snprintf(id, sizeof(id), "%s%d", prefix, i);
        s->ids[s->n++] = strdup(id);
    }
}

static int is_bad(const char *id)
{
    return strcmp(id, "m-2") == 0 || strcmp(id, "n-5") == 0;
}

/* The set of member names of object o, as one sorted, comma-joined string. */
static void keys_of(const json_t *o, char *out, size_t n)
{
    const char *names[32];
    size_t k = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        if (k < 32)
            names[k++] = key;
    }
    for (size_t i = 1; i < k; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    out[0] = '\0';
    for (size_t i = 0; i < k; i++) {
        strncat(out, names[i], n - strlen(out) - 1);
        strncat(out, ",", n - strlen(out) - 1);
    }
}

/* Usage at a price: prompt and completion tokens of a result's body. */
static long long usage_nusd(const json_t *line, long long in_nusd, long long out_nusd)
{
    const json_t *u =
        json_object_get(json_object_get(json_object_get(line, "response"), "body"), "usage");
    return json_integer_value(json_object_get(u, "prompt_tokens")) * in_nusd +
           json_integer_value(json_object_get(u, "completion_tokens")) * out_nusd;
}

/* The sum of field over the account's spend:<day> hashes. */
static long long spend_field(redisContext *c, const char *prefix, const char *field)
{
    redisReply *k = redisCommand(c, "KEYS %sspend:*", prefix);
    long long sum = 0;
    for (size_t i = 0; k != NULL && i < k->elements; i++) {
        redisReply *v = redisCommand(c, "HGET %s %s", k->element[i]->str, field);
        if (v != NULL && v->type == REDIS_REPLY_STRING)
            sum += strtoll(v->str, NULL, 10);
        freeReplyObject(v);
    }
    freeReplyObject(k);
    return sum;
}

/* 1 when the sim's access log shows a live call (a chat completion) of job id. */
static int called_live(const char *log, const char *id)
{
    char needle[160];
    snprintf(needle, sizeof(needle), "\"client_request_id\":\"%s\"", id);
    for (const char *p = strstr(log, needle); p != NULL; p = strstr(p + 1, needle)) {
        const char *bol = p;
        while (bol > log && bol[-1] != '\n')
            bol--;
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - bol) : strlen(bol);
        if (memmem(bol, n, "\"path\":\"/v1/chat/completions\"", 29) != NULL)
            return 1;
    }
    return 0;
}

static void five_thousand_jobs_as_provider_batches(void **state)
{
    (void)state;
    struct sim_proc sim;
    const char *sim_args[] = {"--batch-pace-ms", "300", "--batch-fail-once", "flaky", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offall");
    offload_policy_all(a.name, MINI, FILE_MAX);
    offload_policy_all(a.name, NANO, FILE_MAX);
    const char *path = "/tmp/offload-all.jsonl";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    const char *bad[] = {"m-2", "n-5", NULL};
    offload_write_jobs(f, "m-", N_PER_MODEL - 3, MINI, 1, bad);
    offload_write_jobs(f, "m-flaky-", 3, MINI, 1, NULL);
    offload_write_jobs(f, "n-", N_PER_MODEL, NANO, 1, bad);
    offload_write_jobs(f, "live-", 20, MINI, 0, NULL);
    fclose(f);
    worker_enqueue(a.name, path);
    struct job_set marked = {0}, live = {0};
    add_ids(&marked, "m-", N_PER_MODEL - 3);
    add_ids(&marked, "m-flaky-", 3);
    add_ids(&marked, "n-", N_PER_MODEL);
    add_ids(&live, "live-", 20);

    pid_t w[2];
    for (int i = 0; i < 2; i++)
        w[i] = offload_worker_start(a.name, &sim, "offall", i, NULL);
    offload_wait_all(a.c, a.prefix, marked.ids, marked.n);
    offload_wait_done(a.c, a.prefix, live.ids, live.n);
    for (int i = 0; i < 2; i++)
        offload_worker_stop(w[i]);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* the live results: their shape is the reference */
    char live_keys[512] = "", keys[512];
    long long want_mini = 0, want_nano = 0;
    char *log = llmq_test_read_file(sim.log_file, NULL);
    assert_non_null(log);
    for (size_t i = 0; i < live.n; i++) {
        char *text = offload_result(a.c, a.prefix, live.ids[i]);
        json_t *l = json_loads(text, 0, NULL);
        assert_non_null(l);
        assert_null(json_object_get(l, "offloaded"));
        assert_true(called_live(log, live.ids[i]));
        keys_of(l, live_keys, sizeof(live_keys));
        want_mini += usage_nusd(l, 150, 600); /* list price, nano-USD per token */
        json_decref(l);
        free(text);
    }
    /* the offloaded ones: the same shape plus offloaded and the provider batch */
    char want_keys[600];
    snprintf(want_keys, sizeof(want_keys), "%s", live_keys);
    for (size_t i = 0; i < marked.n; i++) {
        char *text = offload_result(a.c, a.prefix, marked.ids[i]);
        json_t *l = json_loads(text, 0, NULL);
        assert_non_null(l);
        assert_false(called_live(log, marked.ids[i]));
        assert_true(json_is_true(json_object_get(l, "offloaded")));
        const char *pbid = json_string_value(json_object_get(l, "provider_batch_id"));
        assert_non_null(pbid);
        assert_int_equal(strncmp(pbid, "batch_", 6), 0);
        assert_string_equal(json_string_value(json_object_get(l, "custom_id")), marked.ids[i]);
        int status =
            (int)json_integer_value(json_object_get(json_object_get(l, "response"), "status_code"));
        if (is_bad(marked.ids[i])) {
            assert_int_equal(status, 400);
            assert_true(json_is_object(json_object_get(l, "error")));
        } else {
            assert_int_equal(status, 200);
            assert_true(json_is_null(json_object_get(l, "error")));
            json_object_del(l, "offloaded");
            json_object_del(l, "provider_batch_id");
            keys_of(l, keys, sizeof(keys));
            assert_string_equal(keys, want_keys);
            if (strncmp(marked.ids[i], "n-", 2) == 0)
                want_nano += usage_nusd(l, 50, 200); /* batch price: half */
            else
                want_mini += usage_nusd(l, 75, 300);
        }
        json_decref(l);
        free(text);
    }
    free(log);
    /* dead letters: the refused lines, with the provider's reason */
    redisReply *d = redisCommand(a.c, "XRANGE %sdead - +", a.prefix);
    assert_int_equal(d->elements, 2);
    for (size_t i = 0; i < 2; i++) {
        const redisReply *fv = d->element[i]->element[1];
        for (size_t k = 0; k + 1 < fv->elements; k += 2)
            if (strcmp(fv->element[k]->str, "reason") == 0)
                assert_non_null(strstr(fv->element[k + 1]->str, "'temperature'"));
    }
    freeReplyObject(d);
    /* each job answered once */
    assert_int_equal(redis_int(a.c, "HGET %sstats %s", a.prefix, "done"), 2 * N_PER_MODEL - 2 + 20);
    assert_int_equal(redis_int(a.c, "HGET %sstats %s", a.prefix, "dead"), 2);
    /* the provider batches: within the file limit, each submitted once */
    redisReply *ids = redisCommand(a.c, "ZRANGE %spbl 0 -1", a.prefix);
    /* N_PER_MODEL jobs of each model, at most FILE_MAX a file */
    assert_true(ids->elements >= 2 * ((N_PER_MODEL + FILE_MAX - 1) / FILE_MAX));
    long long done = 0, retried = 0, dead = 0;
    const char *list[] = {"llmq", "offload", "list", "--limit", "1000", NULL};
    struct cli_run lr = cli_run(a.name, list);
    assert_int_equal(lr.status, 0);
    for (size_t i = 0; i < ids->elements; i++) {
        redisReply *b = redisCommand(a.c, "HMGET %spb:%s n state done retried dead batch_id",
                                     a.prefix, ids->element[i]->str);
        /* the list and show print it */
        assert_non_null(strstr(lr.out, ids->element[i]->str));
        assert_non_null(strstr(lr.out, b->element[5]->str));
        const char *show[] = {"llmq", "offload", "show", ids->element[i]->str, NULL};
        struct cli_run sr = cli_run(a.name, show);
        assert_int_equal(sr.status, 0);
        char want[256];
        snprintf(want, sizeof(want), "batch_id: %s\n", b->element[5]->str);
        assert_non_null(strstr(sr.out, want));
        assert_non_null(strstr(sr.out, "state: ended\n"));
        assert_non_null(strstr(sr.out, "status: completed\n"));
        cli_free(&sr);
        assert_true(strtoll(b->element[0]->str, NULL, 10) <= FILE_MAX);
        assert_string_equal(b->element[1]->str, "ended");
        done += strtoll(b->element[2]->str, NULL, 10);
        retried += strtoll(b->element[3]->str, NULL, 10);
        dead += strtoll(b->element[4]->str, NULL, 10);
        freeReplyObject(b);
    }
    freeReplyObject(ids);
    cli_free(&lr);
    assert_int_equal(done, 2 * N_PER_MODEL - 2);
    assert_int_equal(retried, 3);
    assert_int_equal(dead, 2);
    /* spend: offloaded at the batch price, live at the list price */
    assert_int_equal(spend_field(a.c, a.prefix, MINI "|||nusd"), want_mini);
    assert_int_equal(spend_field(a.c, a.prefix, NANO "|||nusd"), want_nano);
    for (size_t i = 0; i < marked.n; i++)
        free(marked.ids[i]);
    for (size_t i = 0; i < live.n; i++)
        free(live.ids[i]);
    llmq_test_account_close(&a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(five_thousand_jobs_as_provider_batches),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
