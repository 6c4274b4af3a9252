/* A provider batch's life, line by line, end to end: real Redis, real
 * llmq-workers, openai-sim's Batch API (docs/DESIGN.md §3.10).
 *   - a line the provider answers 429 once is retried in a later provider
 *     batch and ends done; one answered 429 every time is retried under the
 *     job's attempts and then dead-lettered with the provider's reason; a
 *     line the provider refuses (400) dead-letters that job alone, after one
 *     batch, with the provider's message;
 *   - a batch that expires keeps its finished lines (their results stored)
 *     and its other jobs go back to staging without an attempt, to end done
 *     in a later batch;
 *   - a batch that fails validation as a whole sends its jobs back once
 *     (no attempt, no dead letter); the second failure dead-letters the job
 *     on the line the provider names, with its reason, and the others end
 *     done in a third batch;
 *   - a result file larger than --max-response-bytes is downloaded (it has
 *     its own bound); one larger than --offload-max-file-bytes ends the
 *     collection with a clear reason, its jobs staged again with an attempt,
 *     so they end dead after their attempts instead of a download loop;
 *   - a result line longer than --max-response-bytes + 64 KiB dead-letters
 *     its job alone (response_too_big): the batch ends, the others done;
 *   - spend budgets cap offloaded jobs: with a token budget that fits two
 *     jobs' worst case at a time, two are offloaded and three wait staged
 *     (parked, no attempt, never in a provider batch), the budget's spend
 *     never over its limit; raised, the budget lets the rest go;
 *   - a provider slower than the lease (--batch-api-slow-ms: the upload and
 *     the create take effect, and answer, three leases late) is not called
 *     twice by a second worker: the lease is renewed while the call runs
 *     (the sim's access log, read once it stopped, shows one upload and one
 *     create: a taker's call still in flight counts too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "account.h"
#include "test_case.h"
#include "offload_support.h"

/* Appends chat job id of MINI to f, marked for the batch window, with at
 * most max_attempts attempts; bad: a body llmq takes and the provider
 * refuses (400: a stream flag that is no boolean). */
static void job_line(FILE *f, const char *id, int max_attempts, int bad)
{
    fprintf(f,
            "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
            "\"body\":{\"model\":\"" MINI "\",%s\"messages\":[{\"role\":\"user\",\"content\":"
            "\"tell me about %s\"}]},\"llmq\":{\"completion_window\":\"24h\","
            "\"max_attempts\":%d}}\n",
            id, bad ? "\"stream\":\"no\"," : "", id, max_attempts);
}

/* n ids "<prefix><i>" (new strings) into ids[]. */
static void make_ids(char **ids, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s%d", prefix, i);
        ids[i] = strdup(id);
    }
}

static void free_ids(char **ids, int n)
{
    for (int i = 0; i < n; i++)
        free(ids[i]);
}

/* The result line of job id as JSON (new); fails the test when it has none. */
static json_t *result_of(struct llmq_test_account *a, const char *id)
{
    char *text = offload_result(a->c, a->prefix, id);
    assert_non_null(text);
    json_t *l = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(l);
    return l;
}

/* The reason job id was dead-lettered with ("" when it is not in P dead;
 * static buffer). */
static const char *dead_reason(struct llmq_test_account *a, const char *id)
{
    static char out[512];
    out[0] = '\0';
    redisReply *d = redisCommand(a->c, "XRANGE %sdead - +", a->prefix);
    for (size_t i = 0; d != NULL && i < d->elements; i++) {
        const redisReply *fv = d->element[i]->element[1];
        const char *jid = NULL, *reason = NULL;
        for (size_t k = 0; k + 1 < fv->elements; k += 2) {
            if (strcmp(fv->element[k]->str, "id") == 0)
                jid = fv->element[k + 1]->str;
            else if (strcmp(fv->element[k]->str, "reason") == 0)
                reason = fv->element[k + 1]->str;
        }
        if (jid != NULL && reason != NULL && strcmp(jid, id) == 0)
            snprintf(out, sizeof(out), "%s", reason);
    }
    freeReplyObject(d);
    return out;
}

static long long dead_count(struct llmq_test_account *a)
{
    redisReply *d = redisCommand(a->c, "XLEN %sdead", a->prefix);
    long long n = d != NULL && d->type == REDIS_REPLY_INTEGER ? d->integer : -1;
    freeReplyObject(d);
    return n;
}

/* The account's provider batches (llmq ids), oldest first (new reply). */
static redisReply *batches(struct llmq_test_account *a)
{
    redisReply *r = redisCommand(a->c, "ZRANGE %spbl 0 -1", a->prefix);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    return r;
}

/* Field name of provider batch id (static buffer; "" when none). */
static const char *pb_field(struct llmq_test_account *a, const char *id, const char *name)
{
    static char v[512];
    redisReply *r = redisCommand(a->c, "HGET %spb:%s %s", a->prefix, id, name);
    snprintf(v, sizeof(v), "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    return v;
}

/* The provider batch id a result line names. */
static const char *line_pb(const json_t *l)
{
    const char *s = json_string_value(json_object_get(l, "provider_batch_id"));
    return s ? s : "";
}

/* One case's parts: openai-sim started with its arguments, an account
 * whose MINI runs under offload policy 'all' (files of at most 100
 * requests), and the case's jobs file, open for writing. */
struct lines_case {
    struct sim_proc sim;
    struct llmq_test_account a;
    char path[96];
    FILE *f;
};

static void case_open(struct lines_case *k, const char *tag, const char *const *sim_args)
{
    assert_int_equal(sim_proc_start(&k->sim, sim_args), 0);
    llmq_test_account_open(&k->a, tag);
    offload_policy_all(k->a.name, MINI, 100);
    snprintf(k->path, sizeof(k->path), "/tmp/offload-lines-%s-%d.jsonl", tag, (int)getpid());
    k->f = fopen(k->path, "w");
    assert_non_null(k->f);
}

/* Writes n jobs "<prefix><i>" (job_line, max_attempts each) to the jobs
 * file; their ids (new) into ids. */
static void case_jobs(struct lines_case *k, char **ids, const char *prefix, int n, int max_attempts)
{
    make_ids(ids, prefix, n);
    for (int i = 0; i < n; i++)
        job_line(k->f, ids[i], max_attempts, 0);
}

/* Enqueues the jobs file, then opens it empty again for more. */
static void case_enqueue(struct lines_case *k)
{
    fclose(k->f);
    worker_enqueue(k->a.name, k->path);
    k->f = fopen(k->path, "w");
    assert_non_null(k->f);
}

/* Stops the sim (it exits 0) and drops the jobs file. */
static void case_stop_sim(struct lines_case *k)
{
    assert_int_equal(sim_proc_stop(&k->sim), 0);
    fclose(k->f);
    unlink(k->path);
}

/* Each of jobs ids[0..n) has a result line of a provider batch
 * ("offloaded"), answered 200 when ok200. */
static void assert_offloaded(struct lines_case *k, char **ids, int n, int ok200)
{
    for (int i = 0; i < n; i++) {
        json_t *l = result_of(&k->a, ids[i]);
        assert_true(json_is_true(json_object_get(l, "offloaded")));
        if (ok200)
            assert_int_equal(
                json_integer_value(json_object_get(json_object_get(l, "response"), "status_code")),
                200);
        json_decref(l);
    }
}

static void line_errors_retried_invalid_dead(void **state)
{
    (void)state;
    const char *sim_args[] = {"--batch-pace-ms",
                              "200",
                              "--batch-fail-once",
                              "flaky",
                              "--batch-fail-always",
                              "doomed",
                              "--batch-fail-status",
                              "429",
                              NULL};
    struct lines_case k;
    case_open(&k, "offlines", sim_args);
    struct llmq_test_account *a = &k.a;
    char *ok[8], *flaky[2];
    case_jobs(&k, ok, "ok-", 8, 3);
    case_jobs(&k, flaky, "flaky-", 2, 3);
    job_line(k.f, "doomed-0", 3, 0);
    job_line(k.f, "bad-0", 3, 1);
    case_enqueue(&k);
    pid_t w = offload_worker_start(a->name, &k.sim, "offlines", 0, NULL);
    char *all[] = {ok[0], ok[1], ok[2],    ok[3],    ok[4],      ok[5],
                   ok[6], ok[7], flaky[0], flaky[1], "doomed-0", "bad-0"};
    offload_wait_done(a->c, a->prefix, all, 12);
    offload_worker_stop(w);
    case_stop_sim(&k);

    redisReply *pbs = batches(a);
    /* doomed is tried in 3 batches (its attempts); flaky in 2 */
    assert_int_equal(pbs->elements, 3);
    const char *first = pbs->element[0]->str;
    assert_offloaded(&k, ok, 8, 0);
    /* the 429 once: done, in a later provider batch than the first */
    char first_pb[128];
    snprintf(first_pb, sizeof(first_pb), "%s", pb_field(a, first, "batch_id"));
    for (int i = 0; i < 2; i++) {
        json_t *l = result_of(a, flaky[i]);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(l, "response"), "status_code")),
            200);
        assert_string_not_equal(line_pb(l), first_pb);
        json_decref(l);
    }
    /* the 429 every time: dead after its 3 attempts, with the provider's reason */
    assert_non_null(strstr(dead_reason(a, "doomed-0"), "rate_limit_exceeded"));
    /* the refused line: dead at once with the provider's message, alone */
    assert_non_null(strstr(dead_reason(a, "bad-0"), "must be a boolean"));
    json_t *l = result_of(a, "bad-0");
    assert_string_equal(line_pb(l), first_pb);
    json_decref(l);
    assert_int_equal(dead_count(a), 2);
    /* counts per batch: the first settled 8 done, 2 + 1 retried, 1 dead */
    assert_string_equal(pb_field(a, first, "done"), "8");
    assert_string_equal(pb_field(a, first, "retried"), "3");
    assert_string_equal(pb_field(a, first, "dead"), "1");
    freeReplyObject(pbs);
    free_ids(ok, 8);
    free_ids(flaky, 2);
    llmq_test_account_close(a);
}

static void expired_batch_keeps_finished_lines(void **state)
{
    (void)state;
    /* the first batch expires half-way: its first 5 of 10 lines done */
    const char *sim_args[] = {"--batch-pace-ms", "1000", "--batch-expire-after-ms", "500", NULL};
    struct lines_case k;
    case_open(&k, "offexpire", sim_args);
    struct llmq_test_account *a = &k.a;
    char *ids[10];
    case_jobs(&k, ids, "e-", 10, 1); /* one attempt: a counted one would kill it */
    case_enqueue(&k);
    pid_t w = offload_worker_start(a->name, &k.sim, "offexpire", 0, NULL);
    offload_wait_done(a->c, a->prefix, ids, 10);
    offload_worker_stop(w);
    case_stop_sim(&k);
    redisReply *pbs = batches(a);
    assert_int_equal(pbs->elements, 2);
    const char *first = pbs->element[0]->str;
    assert_string_equal(pb_field(a, first, "status"), "expired");
    assert_string_equal(pb_field(a, first, "done"), "5");
    assert_string_equal(pb_field(a, first, "restaged"), "5");
    char pb1[128], pb2[128];
    snprintf(pb1, sizeof(pb1), "%s", pb_field(a, first, "batch_id"));
    snprintf(pb2, sizeof(pb2), "%s", pb_field(a, pbs->element[1]->str, "batch_id"));
    int in_first = 0;
    for (int i = 0; i < 10; i++) {
        json_t *l = result_of(a, ids[i]);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(l, "response"), "status_code")),
            200);
        /* the lines done before the expiry are the first five of the file */
        assert_string_equal(line_pb(l), i < 5 ? pb1 : pb2);
        in_first += strcmp(line_pb(l), pb1) == 0;
        json_decref(l);
    }
    assert_int_equal(in_first, 5);
    assert_int_equal(dead_count(a), 0);
    freeReplyObject(pbs);
    free_ids(ids, 10);
    llmq_test_account_close(a);
}

static void failed_validation_once_then_named_dead(void **state)
{
    (void)state;
    const char *sim_args[] = {"--batch-pace-ms", "200", "--batch-invalid", "poison", NULL};
    struct lines_case k;
    case_open(&k, "offfailed", sim_args);
    struct llmq_test_account *a = &k.a;
    char *ids[6];
    make_ids(ids, "v-", 6);
    for (int i = 0; i < 6; i++) {
        if (i == 3)
            job_line(k.f, "poison-0", 1, 0);
        job_line(k.f, ids[i], 1, 0);
    }
    case_enqueue(&k);
    char log[128];
    worker_log_path(log, "offfailed", 0);
    pid_t w = offload_worker_start(a->name, &k.sim, "offfailed", 0, NULL);
    offload_wait_all(a->c, a->prefix, ids, 6);
    char *p[] = {"poison-0"};
    offload_wait_done(a->c, a->prefix, p, 1);
    offload_worker_stop(w);
    case_stop_sim(&k);
    redisReply *pbs = batches(a);
    assert_int_equal(pbs->elements, 3);
    assert_string_equal(pb_field(a, pbs->element[0]->str, "status"), "failed");
    assert_string_equal(pb_field(a, pbs->element[0]->str, "restaged"), "7");
    assert_string_equal(pb_field(a, pbs->element[0]->str, "dead"), "0");
    assert_string_equal(pb_field(a, pbs->element[1]->str, "status"), "failed");
    assert_string_equal(pb_field(a, pbs->element[1]->str, "restaged"), "6");
    assert_string_equal(pb_field(a, pbs->element[1]->str, "dead"), "1");
    assert_string_equal(pb_field(a, pbs->element[2]->str, "status"), "completed");
    assert_string_equal(pb_field(a, pbs->element[2]->str, "done"), "6");
    /* the named job, dead with the provider's reason; the others done (one
     * attempt each: the failures counted none) */
    assert_int_equal(dead_count(a), 1);
    assert_non_null(strstr(dead_reason(a, "poison-0"), "--batch-invalid names it"));
    assert_offloaded(&k, ids, 6, 0);
    /* the reason logged once per failure */
    assert_int_equal(worker_log_count(log, "the provider failed the batch"), 2);
    freeReplyObject(pbs);
    free_ids(ids, 6);
    llmq_test_account_close(a);
}

static void result_file_bounds(void **state)
{
    (void)state;
    const char *sim_args[] = {"--batch-pace-ms", "200", NULL};
    struct lines_case k;
    case_open(&k, "offfile", sim_args);
    struct llmq_test_account *a = &k.a;
    /* 1. an output file over --max-response-bytes: it has its own bound */
    char *ids[20];
    case_jobs(&k, ids, "big-", 20, 2);
    case_enqueue(&k);
    const char *small[] = {"--max-response-bytes", "1024", NULL};
    pid_t w = offload_worker_start(a->name, &k.sim, "offfile", 0, small);
    offload_wait_done(a->c, a->prefix, ids, 20);
    offload_worker_stop(w);
    redisReply *pbs = batches(a);
    assert_int_equal(pbs->elements, 1);
    assert_string_equal(pb_field(a, pbs->element[0]->str, "done"), "20");
    freeReplyObject(pbs);
    /* 2. one over --offload-max-file-bytes: never downloaded, the jobs back
     * with an attempt each, dead after their two, the reason named */
    char *more[20];
    case_jobs(&k, more, "huge-", 20, 2);
    case_enqueue(&k);
    const char *tiny[] = {"--offload-max-file-bytes", "2048", NULL};
    w = offload_worker_start(a->name, &k.sim, "offfile", 1, tiny);
    offload_wait_done(a->c, a->prefix, more, 20);
    offload_worker_stop(w);
    case_stop_sim(&k);
    pbs = batches(a);
    assert_int_equal(pbs->elements, 1 + 2); /* one batch per attempt, no loop */
    for (int i = 0; i < 20; i++)
        assert_non_null(strstr(dead_reason(a, more[i]), "--offload-max-file-bytes 2048"));
    freeReplyObject(pbs);
    free_ids(ids, 20);
    free_ids(more, 20);
    llmq_test_account_close(a);
}

static void over_long_line_dead_alone(void **state)
{
    (void)state;
    /* an answer without max_tokens is 100,000 tokens long */
    const char *sim_args[] = {"--batch-pace-ms", "200", "--completion-tokens", "100000:100000",
                              NULL};
    struct lines_case k;
    case_open(&k, "offlong", sim_args);
    struct llmq_test_account *a = &k.a;
    char *ids[4];
    make_ids(ids, "fine-", 3);
    ids[3] = strdup("long-0");
    for (int i = 0; i < 4; i++)
        fprintf(k.f,
                "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"" MINI "\",%s\"messages\":[{\"role\":\"user\","
                "\"content\":\"tell me about %s\"}]},\"llmq\":{\"completion_window\":\"24h\"}}\n",
                ids[i], i < 3 ? "\"max_tokens\":16," : "", ids[i]);
    case_enqueue(&k);
    /* a line may be 1024 + 65536 bytes: long-0's is far longer */
    const char *small[] = {"--max-response-bytes", "1024", NULL};
    pid_t w = offload_worker_start(a->name, &k.sim, "offlong", 0, small);
    offload_wait_done(a->c, a->prefix, ids, 4);
    offload_worker_stop(w);
    case_stop_sim(&k);
    redisReply *pbs = batches(a);
    assert_int_equal(pbs->elements, 1); /* the batch ended: not stuck, not retried */
    assert_string_equal(pb_field(a, pbs->element[0]->str, "state"), "ended");
    assert_string_equal(pb_field(a, pbs->element[0]->str, "done"), "3");
    assert_string_equal(pb_field(a, pbs->element[0]->str, "dead"), "1");
    freeReplyObject(pbs);
    assert_offloaded(&k, ids, 3, 1);
    assert_non_null(
        strstr(dead_reason(a, "long-0"), "over 66560 bytes (--max-response-bytes + 65536)"));
    json_t *l = result_of(a, "long-0");
    assert_string_equal(json_string_value(json_object_get(json_object_get(l, "error"), "code")),
                        "response_too_big");
    assert_true(json_is_true(json_object_get(l, "offloaded")));
    json_decref(l);
    assert_int_equal(dead_count(a), 1);
    free_ids(ids, 4);
    llmq_test_account_close(a);
}

static void slow_provider_called_once(void **state)
{
    (void)state;
    /* the upload and the create take effect (and answer) 6 s late: three
     * leases of 2 s */
    const char *sim_args[] = {"--batch-pace-ms",
                              "200",
                              "--batch-api-slow-ms",
                              "6000",
                              "--batch-api-slow-first",
                              "2",
                              NULL};
    struct lines_case k;
    case_open(&k, "offslow", sim_args);
    struct llmq_test_account *a = &k.a;
    char *ids[10];
    case_jobs(&k, ids, "s-", 10, 1);
    case_enqueue(&k);
    const char *lease[] = {"--offload-lease-ms", "2000", NULL};
    pid_t w0 = offload_worker_start(a->name, &k.sim, "offslow", 0, lease);
    pid_t w1 = offload_worker_start(a->name, &k.sim, "offslow", 1, lease);
    offload_wait_done(a->c, a->prefix, ids, 10);
    offload_worker_stop(w0);
    offload_worker_stop(w1);
    redisReply *pbs = batches(a);
    assert_int_equal(pbs->elements, 1);
    const char *id = pbs->element[0]->str;
    int files, created;
    offload_sim_count(&k.sim, id, &files, &created);
    assert_int_equal(files, 1);
    assert_int_equal(created, 1);
    assert_string_equal(pb_field(a, id, "done"), "10");
    case_stop_sim(&k);
    /* what the provider was sent, not only what it shows: a second
     * worker's upload or create still on its way when the batch ended (it
     * becomes visible 6 s after it is sent) is in the access log */
    assert_int_equal(offload_sim_calls(&k.sim, id, "/v1/files"), 1);
    assert_int_equal(offload_sim_calls(&k.sim, id, "/v1/batches"), 1);
    freeReplyObject(pbs);
    free_ids(ids, 10);
    llmq_test_account_close(a);
}

/* Field name of job id's hash (static buffer; "" none). */
static const char *job_field(struct llmq_test_account *a, const char *id, const char *name)
{
    static char v[256];
    redisReply *r = redisCommand(a->c, "HGET %sjob:%s %s", a->prefix, id, name);
    snprintf(v, sizeof(v), "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    return v;
}

static void budget_caps_offloaded_jobs(void **state)
{
    (void)state;
    /* every answer uses its whole max_tokens: a job spends about its cost */
    const char *sim_args[] = {"--batch-pace-ms", "200", "--completion-tokens", "500:500", NULL};
    struct lines_case k;
    case_open(&k, "offbudget", sim_args);
    struct llmq_test_account *a = &k.a;
    char *ids[5];
    make_ids(ids, "u-", 5);
    for (int i = 0; i < 5; i++)
        fprintf(k.f,
                "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"" MINI "\",\"max_tokens\":500,\"messages\":[{\"role\":"
                "\"user\",\"content\":\"the same question\"}]},\"llmq\":{\"completion_window\":"
                "\"24h\"}}\n",
                ids[i]);
    case_enqueue(&k);
    long long cost = strtoll(job_field(a, "u-0", "cost"), NULL, 10);
    assert_true(cost > 500);
    char limit[24];
    snprintf(limit, sizeof(limit), "%lld", cost * 5 / 2); /* two worst cases, not three */
    const char *set[] = {"llmq", "budgets", "set", "--tokens", limit, "--period", "day", NULL};
    struct cli_run r = cli_run(a->name, set);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    pid_t w = offload_worker_start(a->name, &k.sim, "offbudget", 0, NULL);
    char *first[] = {ids[0], ids[1]};
    offload_wait_all(a->c, a->prefix, first, 2);
    redisReply *pbs = batches(a);
    assert_int_equal(pbs->elements, 1);
    assert_string_equal(pb_field(a, pbs->element[0]->str, "n"), "2"); /* the budget's two */
    while (strcmp(pb_field(a, pbs->element[0]->str, "state"), "ended") != 0)
        usleep(50 * 1000);
    /* the worker looked again since: the list is parked (P pbp), not empty */
    redisReply *pk = NULL;
    do {
        freeReplyObject(pk);
        usleep(50 * 1000);
        pk = redisCommand(a->c, "HLEN %spbp", a->prefix);
    } while (pk->integer == 0);
    freeReplyObject(pk);
    freeReplyObject(pbs);
    pbs = batches(a);
    assert_int_equal(pbs->elements, 1);
    assert_string_equal(pb_field(a, pbs->element[0]->str, "n"), "2");
    freeReplyObject(pbs);
    for (int i = 2; i < 5; i++) {
        assert_string_equal(job_field(a, ids[i], "state"), "staged");
        assert_int_equal(strtol(job_field(a, ids[i], "attempts"), NULL, 10), 0);
        char *none = offload_result(a->c, a->prefix, ids[i]);
        assert_null(none);
    }
    /* what was spent fits the budget */
    redisReply *b = redisCommand(a->c, "KEYS %sbudget:*", a->prefix);
    assert_int_equal(b->elements, 1);
    redisReply *spent = redisCommand(a->c, "HGET %s spent", b->element[0]->str);
    assert_int_equal(spent->type, REDIS_REPLY_STRING);
    assert_true(strtoll(spent->str, NULL, 10) <= cost * 5 / 2);
    assert_true(strtoll(spent->str, NULL, 10) > cost); /* two jobs' usage */
    freeReplyObject(spent);
    freeReplyObject(b);
    /* raised, the budget lets the parked jobs go (within the park's 10 s) */
    snprintf(limit, sizeof(limit), "%lld", cost * 100);
    const char *raise[] = {"llmq", "budgets", "set", "--tokens", limit, "--period", "day", NULL};
    r = cli_run(a->name, raise);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    offload_wait_all(a->c, a->prefix, ids, 5);
    offload_worker_stop(w);
    case_stop_sim(&k);
    assert_offloaded(&k, ids, 5, 0);
    free_ids(ids, 5);
    llmq_test_account_close(a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(line_errors_retried_invalid_dead),
        cmocka_unit_test(expired_batch_keeps_finished_lines),
        cmocka_unit_test(failed_validation_once_then_named_dead),
        cmocka_unit_test(result_file_bounds),
        cmocka_unit_test(over_long_line_dead_alone),
        cmocka_unit_test(budget_caps_offloaded_jobs),
        cmocka_unit_test(slow_provider_called_once),
    };
    if (LLMQ_TEST_CASE_SELECT(tests) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
