/* The provider's batch queue limit (enqueued prompt tokens per model) as a
 * bucket of offload, end to end: real Redis, two real llmq-workers,
 * openai-sim's Batch API with its enqueued-token limit (docs/DESIGN.md
 * §3.10). 300 jobs marked completion_window 24h under policy `all`, files
 * of at most 25 lines.
 *   - `llmq limits set --batch-queue-tokens` at a third of the jobs'
 *     estimated prompt tokens, the sim's limit the same: batches are
 *     submitted as earlier ones end, the sim never holds more than the limit
 *     (its own record) and refuses none; every job is answered once and the
 *     charge is all given back at the end;
 *   - the sim's limit half of llmq's: the first token_limit_exceeded teaches
 *     llmq the limit the provider named; every refused batch was made before
 *     that (nothing made after it is refused: learnt, not looped), no
 *     attempt is counted, every job is answered once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "account.h"
#include "offload_support.h"

#define N_JOBS 300

struct run {
    struct llmq_test_account a;
    struct sim_proc sim;
    char *ids[N_JOBS];
    long long tokens; /* the jobs' estimated prompt tokens */
    long long limit;  /* llmq's configured queue limit */
};

/* Enqueues the jobs (staged at once under `all`) and sums their estimated
 * prompt tokens as llmq stored them. */
static void stage_jobs(struct run *r, const char *tag)
{
    llmq_test_account_open(&r->a, tag);
    offload_policy_all(r->a.name, MINI, 25);
    char path[128];
    snprintf(path, sizeof(path), "/tmp/offload-queue-%s.jsonl", tag);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    offload_write_jobs(f, "q-", N_JOBS, MINI, 1, NULL);
    fclose(f);
    worker_enqueue(r->a.name, path);
    r->tokens = 0;
    for (int i = 0; i < N_JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "q-%d", i);
        r->ids[i] = strdup(id);
        long long t = redis_int(r->a.c, "HGET %sjob:%s est_prompt_tokens", r->a.prefix, id);
        assert_true(t > 0);
        r->tokens += t;
    }
}

static void queue_limit_set(struct run *r, long long tokens)
{
    char n[24];
    snprintf(n, sizeof(n), "%lld", tokens);
    const char *argv[] = {"llmq", "limits", "set", MINI, "--batch-queue-tokens", n, NULL};
    struct cli_run c = cli_run(r->a.name, argv);
    assert_int_equal(c.status, 0);
    assert_non_null(strstr(c.out, "batch_queue_tokens="));
    cli_free(&c);
    r->limit = tokens;
}

/* Runs two workers against a sim whose queue limit is sim_limit until every
 * job is answered and every provider batch ended; returns the sim's batch
 * list (new), read before it stops. */
static json_t *run_all(struct run *r, long long sim_limit, const char *tag)
{
    char lim[24];
    snprintf(lim, sizeof(lim), "%lld", sim_limit);
    const char *sim_args[] = {"--batch-pace-ms", "300", "--batch-queue-tokens", lim, NULL};
    assert_int_equal(sim_proc_start(&r->sim, sim_args), 0);
    pid_t w[2];
    char logs[2][128];
    for (int i = 0; i < 2; i++) {
        worker_log_path(logs[i], tag, i);
        char consumer[64];
        snprintf(consumer, sizeof(consumer), "%s-w%d", tag, i);
        const char *extra[] = {"--consumer", consumer, NULL};
        w[i] = worker_start(r->a.name, &r->sim, logs[i], extra);
    }
    offload_wait_all(r->a.c, r->a.prefix, r->ids, N_JOBS);
    offload_wait_ended(r->a.c, r->a.prefix);
    for (int i = 0; i < 2; i++) {
        kill(w[i], SIGTERM);
        assert_int_equal(worker_wait(w[i], 60000), 0);
    }
    json_t *list = offload_sim_list(&r->sim, "/v1/batches");
    assert_int_equal(sim_proc_stop(&r->sim), 0);
    /* every job answered once, offloaded, none dead */
    assert_int_equal(redis_int(r->a.c, "HGET %sstats %s", r->a.prefix, "done"), N_JOBS);
    assert_int_equal(redis_int(r->a.c, "XLEN %sdead%s", r->a.prefix, ""), 0);
    for (int i = 0; i < N_JOBS; i++) {
        char *text = offload_result(r->a.c, r->a.prefix, r->ids[i]);
        assert_non_null(text);
        assert_non_null(strstr(text, "\"offloaded\":true"));
        free(text);
    }
    /* the queue's charge is all given back */
    assert_int_equal(redis_int(r->a.c, "HGET %spbq:%s used", r->a.prefix, MINI), 0);
    return list;
}

static void run_free(struct run *r)
{
    for (int i = 0; i < N_JOBS; i++)
        free(r->ids[i]);
    llmq_test_account_close(&r->a);
}

static long long sim_queue(const json_t *list, const char *field)
{
    return json_integer_value(json_object_get(json_object_get(list, "sim_queue"), field));
}

static void batches_wait_for_room(void **state)
{
    (void)state;
    struct run r;
    stage_jobs(&r, "offq");
    queue_limit_set(&r, r.tokens / 3);
    /* the option goes alone: mixed with a live limit it is refused */
    const char *mixed[] = {"llmq", "limits", "set", MINI, "--rpm", "5", "--batch-queue-tokens",
                           "5",    NULL};
    struct cli_run m = cli_run(r.a.name, mixed);
    assert_int_equal(m.status, 2);
    assert_non_null(strstr(m.err, "--batch-queue-tokens goes alone"));
    cli_free(&m);
    assert_int_equal(redis_int(r.a.c, "HGET %spbq:%s limit", r.a.prefix, MINI), r.limit);
    json_t *list = run_all(&r, r.limit, "offq");
    size_t created = json_array_size(json_object_get(list, "data"));
    fprintf(stderr,
            "offload_queue_limit: %lld tokens, limit %lld, sim held at most %lld, %zu "
            "batches\n",
            r.tokens, r.limit, sim_queue(list, "max_tokens"), created);
    /* the sim's own record: never over the limit, nothing refused */
    assert_int_equal(sim_queue(list, "limit"), r.limit);
    assert_true(sim_queue(list, "max_tokens") > 0);
    assert_true(sim_queue(list, "max_tokens") <= r.limit);
    assert_int_equal(sim_queue(list, "refused"), 0);
    /* a third at a time: at least three rounds of batches */
    assert_true(created >= 12); /* 300 jobs, 25 a file */
    json_decref(list);
    run_free(&r);
}

static void token_limit_exceeded_is_learnt(void **state)
{
    (void)state;
    struct run r;
    stage_jobs(&r, "offql");
    queue_limit_set(&r, r.tokens / 3);
    long long sim_limit = r.limit / 2;
    json_t *list = run_all(&r, sim_limit, "offql");
    long long refused = sim_queue(list, "refused");
    size_t created = json_array_size(json_object_get(list, "data"));
    fprintf(stderr, "offload_queue_limit: llmq limit %lld, sim limit %lld: %lld refused of %zu\n",
            r.limit, sim_limit, refused, created);
    assert_true(refused >= 1);
    assert_true(sim_queue(list, "max_tokens") <= sim_limit);
    /* the limit the provider named is learnt */
    assert_int_equal(redis_int(r.a.c, "HGET %spbq:%s learned", r.a.prefix, MINI), sim_limit);
    long long learned_at = redis_int(r.a.c, "HGET %spbq:%s learned_at", r.a.prefix, MINI);
    assert_true(learned_at > 0);
    /* each refused batch was made before the limit was learnt: nothing made
     * after it went into the full queue again */
    redisReply *ids = redisCommand(r.a.c, "ZRANGE %spbl 0 -1", r.a.prefix);
    long long refused_llmq = 0;
    for (size_t i = 0; i < ids->elements; i++) {
        redisReply *b = redisCommand(r.a.c, "HMGET %spb:%s reason created_ms qtok", r.a.prefix,
                                     ids->element[i]->str);
        const char *why = b->element[0]->type == REDIS_REPLY_STRING ? b->element[0]->str : "";
        if (strstr(why, "Enqueued token limit") != NULL) {
            refused_llmq++;
            assert_true(strtoll(b->element[1]->str, NULL, 10) <= learned_at);
        }
        /* its charge was given back (the queue's used is 0: run) and its
         * qtok stays as the record of what it held */
        assert_true(strtoll(b->element[2]->str, NULL, 10) > 0);
        freeReplyObject(b);
    }
    freeReplyObject(ids);
    assert_int_equal(refused_llmq, refused);
    json_decref(list);
    run_free(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batches_wait_for_room),
        cmocka_unit_test(token_limit_exceeded_is_learnt),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
