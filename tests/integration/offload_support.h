/* Helpers of the offload tests (offload_*.c): a sim with the Batch API, a
 * policy, eligible and live job files, waiting for results, the provider's
 * files and batches as the sim lists them; and, for the tests on named
 * endpoints and Azure (offload_endpoints*.c), the sims' batches, input
 * files and access logs read with each endpoint's own key, marked jobs, the
 * workers' logs. Header-only: each test is its own executable. */
#ifndef LLMQ_TEST_OFFLOAD_SUPPORT_H
#define LLMQ_TEST_OFFLOAD_SUPPORT_H

#include "account.h"
#include "endpoints_support.h"
#include "jobs/job_result.h"
#include "jobs_cli_run.h"
#include "openai_sim_support.h"
#include "worker_support.h"

/* The model the offload tests mark for the batch window. */
#define MINI "gpt-4o-mini"

/* Sets model's offload policy to all in account, files of at most
 * max_requests lines, polled every 100 ms. */
static inline void offload_policy_all(const char *account, const char *model, int max_requests)
{
    char maxr[24];
    snprintf(maxr, sizeof(maxr), "%d", max_requests);
    const char *argv[] = {"llmq", "offload",        "set", model, "--mode", "all", "--poll-ms",
                          "100",  "--max-requests", maxr,  NULL};
    struct cli_run r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    cli_free(&r);
}

/* Appends n chat jobs "<prefix><i>" of model to file f, marked
 * completion_window 24h when marked; the ids listed in bad (NULL-ended)
 * ask for temperature 5, which the provider refuses (400) and llmq does
 * not check. */
static inline void offload_write_jobs(FILE *f, const char *prefix, int n, const char *model,
                                      int marked, const char *const *bad)
{
    for (int i = 0; i < n; i++) {
        char id[96];
        snprintf(id, sizeof(id), "%s%d", prefix, i);
        int is_bad = 0;
        for (int k = 0; bad != NULL && bad[k] != NULL; k++)
            is_bad |= strcmp(bad[k], id) == 0;
        fprintf(f,
                "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"%s\",%s\"messages\":[{\"role\":\"user\",\"content\":"
                "\"tell me about %s\"}]}%s}\n",
                id, model, is_bad ? "\"temperature\":5," : "", id,
                marked ? ",\"llmq\":{\"completion_window\":\"24h\"}" : "");
    }
}

/* The ended record's output line of job id (new), or NULL while it has none. */
static inline char *offload_result(redisContext *c, const char *prefix, const char *id)
{
    struct llmq_job_result res;
    memset(&res, 0, sizeof(res));
    const char *ids[] = {id};
    if (llmq_job_result_read(c, prefix, ids, 1, &res, NULL) != LLMQ_OK)
        return NULL;
    char *line = res.line;
    res.line = NULL;
    llmq_job_result_clear(&res);
    return line;
}

/* Waits until every job of ids[0..n) has ended (the ctest timeout bounds a
 * hang: no timing threshold here). */
static inline void offload_wait_all(redisContext *c, const char *prefix, char **ids, size_t n)
{
    for (size_t i = 0; i < n;) {
        char *line = offload_result(c, prefix, ids[i]);
        if (line == NULL) {
            usleep(100 * 1000);
            continue;
        }
        free(line);
        i++;
    }
}

/* Waits until every provider batch of the account has ended (its results
 * may all be stored before its end is recorded). */
static inline void offload_wait_ended(redisContext *c, const char *prefix)
{
    for (;;) {
        redisReply *due = redisCommand(c, "ZCARD %spba", prefix);
        redisReply *staged = redisCommand(c, "SCARD %spbsi", prefix);
        int idle = due->integer == 0 && staged->integer == 0;
        freeReplyObject(due);
        freeReplyObject(staged);
        if (idle)
            return;
        usleep(100 * 1000);
    }
}

/* Waits until every job of ids[0..n) has ended and then every provider
 * batch of the account (offload_wait_all, offload_wait_ended). */
static inline void offload_wait_done(redisContext *c, const char *prefix, char **ids, size_t n)
{
    offload_wait_all(c, prefix, ids, n);
    offload_wait_ended(c, prefix);
}

/* Starts llmq-worker number i of the test tagged tag for account against
 * sim: consumer "<tag>-w<i>", its log at worker_log_path(tag, i), more
 * arguments (NULL-ended, at most 12; NULL none). Returns its pid. */
static inline pid_t offload_worker_start(const char *account, const struct sim_proc *sim,
                                         const char *tag, int i, const char *const *more)
{
    char log[128], consumer[96];
    worker_log_path(log, tag, i);
    snprintf(consumer, sizeof(consumer), "%s-w%d", tag, i);
    const char *extra[16] = {"--consumer", consumer};
    int n = 2;
    for (int k = 0; more != NULL && more[k] != NULL && n < 14; k++)
        extra[n++] = more[k];
    extra[n] = NULL;
    return worker_start(account, sim, log, extra);
}

/* Stops worker pid (SIGTERM: it drains) and asserts it exits 0 (within a
 * minute: a bound against a hang, not a timing check). */
static inline void offload_worker_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    assert_int_equal(worker_wait(pid, 60000), 0);
}

/* The sim's list (GET path: /v1/files or /v1/batches) as JSON (new). */
static inline json_t *offload_sim_list(const struct sim_proc *sim, const char *path)
{
    const char *h[] = {"Authorization: Bearer " WORKER_TEST_KEY, NULL};
    struct sim_resp r;
    sim_http(sim, path, NULL, h, &r);
    assert_int_equal(r.status, 200);
    json_t *j = sim_json(&r);
    sim_resp_free(&r);
    assert_non_null(j);
    return j;
}

/* How many of the provider's input files are named "<id>.jsonl" and how many
 * batches carry metadata llmq_batch_id = id. */
static inline void offload_sim_count(const struct sim_proc *sim, const char *id, int *files,
                                     int *batches)
{
    char name[128];
    snprintf(name, sizeof(name), "%s.jsonl", id);
    json_t *fl = offload_sim_list(sim, "/v1/files");
    json_t *bl = offload_sim_list(sim, "/v1/batches");
    size_t i;
    json_t *x;
    *files = *batches = 0;
    json_array_foreach(json_object_get(fl, "data"), i, x)
    {
        const char *fn = json_string_value(json_object_get(x, "filename"));
        *files += fn != NULL && strcmp(fn, name) == 0;
    }
    json_array_foreach(json_object_get(bl, "data"), i, x)
    {
        const char *m =
            json_string_value(json_object_get(json_object_get(x, "metadata"), "llmq_batch_id"));
        *batches += m != NULL && strcmp(m, id) == 0;
    }
    json_decref(fl);
    json_decref(bl);
}

/* How many requests the sim received for provider batch id (the worker
 * sends its llmq id as X-Client-Request-Id) on exactly path ("/v1/files":
 * uploads, "/v1/batches": creates; lists and polls carry a query or an id).
 * Reads the access log: call after sim_proc_stop, when every request,
 * answered or not (a worker gone mid-call), has its line. */
static inline int offload_sim_calls(const struct sim_proc *sim, const char *id, const char *path)
{
    FILE *f = fopen(sim->log_file, "r");
    assert_non_null(f);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        const char *p = json_string_value(json_object_get(o, "path"));
        const char *cid = json_string_value(json_object_get(o, "client_request_id"));
        n += p != NULL && cid != NULL && strcmp(p, path) == 0 && strcmp(cid, id) == 0;
        json_decref(o);
    }
    fclose(f);
    return n;
}

/* ---- offload on named endpoints (offload_endpoints*.c) ---- */
/* GET path on e's sim with its key (api-key header when azure, else
 * Bearer) into *r (the caller frees it); asserts a 200. */
static inline void ep_fetch(const struct ep_sim *e, const char *path, int azure, struct sim_resp *r)
{
    char h[160];
    snprintf(h, sizeof(h), "%s%s", azure ? "api-key: " : "Authorization: Bearer ", e->key);
    const char *hs[] = {h, NULL};
    sim_http(&e->sim, path, NULL, hs, r);
    assert_int_equal(r->status, 200);
}

/* GET path on e's sim with its key; the JSON answer (new). */
static inline json_t *ep_get(const struct ep_sim *e, const char *path, int azure)
{
    struct sim_resp r;
    ep_fetch(e, path, azure, &r);
    json_t *j = sim_json(&r);
    sim_resp_free(&r);
    assert_non_null(j);
    return j;
}

/* The input file lines of every batch e's sim holds: for each line, its
 * custom_id is counted in seen (job index from "<prefix><i>"), its model
 * checked against model and its url against url. Returns the number of
 * batches. */
static inline size_t ep_count_lines(const struct ep_sim *e, int azure, const char *prefix,
                                    int *seen, int n, const char *model, const char *url)
{
    const char *q = azure ? "?api-version=2024-10-21" : "";
    char path[256];
    snprintf(path, sizeof(path), "%s/batches%s", azure ? "/openai" : "/v1", q);
    json_t *bl = ep_get(e, path, azure);
    size_t i, nb = json_array_size(json_object_get(bl, "data"));
    json_t *b;
    json_array_foreach(json_object_get(bl, "data"), i, b)
    {
        assert_string_equal(json_string_value(json_object_get(b, "endpoint")), url);
        assert_string_equal(json_string_value(json_object_get(b, "status")), "completed");
        snprintf(path, sizeof(path), "%s/files/%s/content%s", azure ? "/openai" : "/v1",
                 json_string_value(json_object_get(b, "input_file_id")), q);
        struct sim_resp r;
        ep_fetch(e, path, azure, &r);
        const char *p = r.body, *end = r.body + r.body_len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            json_t *l = len ? json_loadb(p, len, 0, NULL) : NULL;
            if (l != NULL) {
                const char *cid = json_string_value(json_object_get(l, "custom_id"));
                assert_non_null(cid);
                assert_int_equal(strncmp(cid, prefix, strlen(prefix)), 0);
                int k = (int)strtol(cid + strlen(prefix), NULL, 10);
                assert_true(k >= 0 && k < n);
                seen[k]++;
                assert_string_equal(json_string_value(json_object_get(l, "url")), url);
                assert_string_equal(
                    json_string_value(json_object_get(json_object_get(l, "body"), "model")), model);
                json_decref(l);
            }
            p = nl ? nl + 1 : end;
        }
        sim_resp_free(&r);
    }
    json_decref(bl);
    return nb;
}

/* Checks e's access log: every request answered 200 (so with e's own key:
 * its sim refuses any other with a 401), on a Files/Batches path of the
 * form (azure or not), naming a provider batch of account P recorded on
 * endpoint e. Returns how many requests it saw. */
static inline size_t ep_check_log(redisContext *c, const char *P, const struct ep_sim *e, int azure)
{
    FILE *f = fopen(e->sim.log_file, "r");
    assert_non_null(f);
    char line[4096];
    size_t n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        if (o == NULL)
            continue;
        const char *path = json_string_value(json_object_get(o, "path"));
        const char *cid = json_string_value(json_object_get(o, "client_request_id"));
        if (json_integer_value(json_object_get(o, "status")) != 200)
            fprintf(stderr, "%s: %s answered %lld\n", e->name, path,
                    (long long)json_integer_value(json_object_get(o, "status")));
        assert_int_equal(json_integer_value(json_object_get(o, "status")), 200);
        assert_non_null(path);
        const char *head = azure ? "/openai/" : "/v1/";
        assert_int_equal(strncmp(path, head, strlen(head)), 0);
        assert_true(strstr(path, "/files") != NULL || strstr(path, "/batches") != NULL);
        assert_non_null(cid);
        redisReply *ep = redisCommand(c, "HGET %spb:%s ep", P, cid);
        assert_int_equal(ep->type, REDIS_REPLY_STRING);
        assert_string_equal(ep->str, e->name);
        freeReplyObject(ep);
        json_decref(o);
        n++;
    }
    fclose(f);
    return n;
}

/* Writes n marked jobs "<prefix><i>" of MINI and enqueues them. */
static inline void enqueue_marked(const char *account, const char *tag, const char *prefix, int n)
{
    char path[128];
    snprintf(path, sizeof(path), "/tmp/offload-ep-%s-%d.jsonl", tag, (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    offload_write_jobs(f, prefix, n, MINI, 1, NULL);
    fclose(f);
    worker_enqueue(account, path);
    unlink(path);
}

/* Waits for every job "<prefix><i>" and every provider batch to end; asserts
 * each result is offloaded and nothing is dead. */
static inline void wait_results(struct llmq_test_account *a, const char *prefix, int n)
{
    char **ids = calloc((size_t)n, sizeof(*ids));
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s%d", prefix, i);
        ids[i] = strdup(id);
    }
    offload_wait_all(a->c, a->prefix, ids, (size_t)n);
    offload_wait_ended(a->c, a->prefix);
    for (int i = 0; i < n; i++) {
        char *text = offload_result(a->c, a->prefix, ids[i]);
        assert_non_null(text);
        assert_non_null(strstr(text, "\"offloaded\":true"));
        free(text);
        free(ids[i]);
    }
    free(ids);
    assert_int_equal(redis_int(a->c, "XLEN %sdead%s", a->prefix, ""), 0);
}

/* Every "offload pb-..." id in log_path is a batch recorded on endpoint
 * name; returns how many lines named one. */
static inline int log_batches_on(redisContext *c, const char *P, const char *log_path,
                                 const char *name)
{
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        assert_null(strstr(line, "no key for endpoint"));
        const char *p = strstr(line, "offload pb-");
        if (p == NULL)
            continue;
        char id[64];
        if (sscanf(p + 8, "%63[^ :(]", id) != 1)
            continue;
        redisReply *ep = redisCommand(c, "HGET %spb:%s ep", P, id);
        assert_int_equal(ep->type, REDIS_REPLY_STRING);
        if (strcmp(ep->str, name) != 0)
            fprintf(stderr, "%s names batch %s of endpoint %s\n", log_path, id, ep->str);
        assert_string_equal(ep->str, name);
        freeReplyObject(ep);
        n++;
    }
    fclose(f);
    return n;
}

#endif
