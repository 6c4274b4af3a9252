/* Helpers of the offload tests on named endpoints and Azure
 * (offload_endpoints*.c): the sims' batches, input files and access logs
 * read with each endpoint's own key, marked jobs, the workers' logs.
 * Header-only: each test is its own executable. */
#ifndef LLMQ_TEST_OFFLOAD_ENDPOINTS_SUPPORT_H
#define LLMQ_TEST_OFFLOAD_ENDPOINTS_SUPPORT_H

#include "account.h"
#include "endpoints_support.h"
#include "offload_support.h"

#define MINI "gpt-4o-mini"

/* GET path on e's sim with its key (api-key header when azure, else
 * Bearer); the JSON answer (new). */
static inline json_t *ep_get(const struct ep_sim *e, const char *path, int azure)
{
    char h[160];
    snprintf(h, sizeof(h), "%s%s", azure ? "api-key: " : "Authorization: Bearer ", e->key);
    const char *hs[] = {h, NULL};
    struct sim_resp r;
    sim_http(&e->sim, path, NULL, hs, &r);
    assert_int_equal(r.status, 200);
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
        char h[160];
        snprintf(h, sizeof(h), "%s%s", azure ? "api-key: " : "Authorization: Bearer ", e->key);
        const char *hs[] = {h, NULL};
        struct sim_resp r;
        sim_http(&e->sim, path, NULL, hs, &r);
        assert_int_equal(r.status, 200);
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
