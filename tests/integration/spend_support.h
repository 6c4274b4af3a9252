/* Helpers of the spend budget tests (tests/integration/spend_*.c): an
 * account with workers against openai-sim, jobs per tenant and user, what
 * the run really spent (from the results' usage), and waiting until every
 * job has either run or parked. Header-only: each test is its own
 * executable. */
#ifndef LLMQ_TEST_SPEND_SUPPORT_H
#define LLMQ_TEST_SPEND_SUPPORT_H

#include "job_fields.h"
#include "worker_support.h"

#define SPEND_MODEL "gpt-4o-mini"
/* data/prices.json's gpt-4o-mini, nano-USD per token */
#define SPEND_IN_NUSD 150
#define SPEND_CACHED_NUSD 75
#define SPEND_OUT_NUSD 600

struct spend_account {
    char name[64];
    char prefix[128];
    redisContext *c;
};

static inline void spend_account_open(struct spend_account *a, const char *tag)
{
    llmq_test_unique_name(a->name, sizeof(a->name), tag);
    snprintf(a->prefix, sizeof(a->prefix), "llmq:{%s}:", a->name);
    a->c = llmq_test_redis_connect();
    assert_non_null(a->c);
}

static inline void spend_account_close(struct spend_account *a)
{
    redisFree(a->c);
}

/* Runs `llmq ARGS` (NULL-ended) for a; asserts exit status want; returns its
 * stdout (new). */
static inline char *spend_cli(const struct spend_account *a, int want, const char *const *argv)
{
    struct cli_run r = cli_run(a->name, argv);
    if (r.status != want)
        fprintf(stderr, "llmq %s: exit %d (want %d): %s%s\n", argv[1], r.status, want, r.out,
                r.err);
    assert_int_equal(r.status, want);
    free(r.err);
    return r.out;
}

/* Writes n chat jobs "<prefix>-<i>" of tenant and user (NULL: none) with
 * max_tokens to path. */
static inline void spend_write_jobs(const char *path, const char *prefix, int n, const char *tenant,
                                    const char *user, int max_tokens)
{
    char opts[256];
    snprintf(opts, sizeof(opts), "{%s%s%s%s%s%s%s}", tenant ? "\"tenant\":\"" : "",
             tenant ? tenant : "", tenant ? "\"" : "", tenant && user ? "," : "",
             user ? "\"user\":\"" : "", user ? user : "", user ? "\"" : "");
    worker_write_jobs(path, prefix, n, SPEND_MODEL, max_tokens, opts);
}

/* What the done jobs "<prefix>-0".."<prefix>-<n-1>" really used (their
 * results' usage) and the states of all of them. */
struct spend_real {
    long long done, queued, running, delayed, dead, other;
    long long prompt, cached, completion, total;
    long long nusd;       /* at data/prices.json's gpt-4o-mini price */
    long long attempts_1; /* done jobs that took exactly one attempt */
};

static inline struct spend_real spend_real_read(const struct spend_account *a, const char *prefix,
                                                int n)
{
    struct spend_real s = {0};
    for (int i = 0; i < n; i++) {
        char id[128];
        snprintf(id, sizeof(id), "%s-%d", prefix, i);
        char *state = llmq_test_job_field(a->c, a->prefix, id, "state");
        const char *st = state ? state : "";
        long long attempts = llmq_test_job_int(a->c, a->prefix, id, "attempts", -1);
        int done = strcmp(st, "done") == 0;
        s.done += done;
        s.queued += strcmp(st, "queued") == 0;
        s.running += strcmp(st, "running") == 0;
        s.delayed += strcmp(st, "delayed") == 0;
        s.dead += strcmp(st, "dead") == 0;
        s.other += !done && strcmp(st, "queued") && strcmp(st, "running") &&
                   strcmp(st, "delayed") && strcmp(st, "dead");
        free(state);
        if (!done)
            continue;
        s.attempts_1 += attempts == 1;
        char *text = llmq_test_job_result(a->c, a->prefix, id);
        assert_non_null(text);
        json_t *line = json_loads(text, 0, NULL);
        free(text);
        json_t *u =
            json_object_get(json_object_get(json_object_get(line, "response"), "body"), "usage");
        assert_non_null(u);
        long long p = json_integer_value(json_object_get(u, "prompt_tokens"));
        long long c = json_integer_value(
            json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
        long long o = json_integer_value(json_object_get(u, "completion_tokens"));
        s.prompt += p;
        s.cached += c;
        s.completion += o;
        s.total += json_integer_value(json_object_get(u, "total_tokens"));
        s.nusd += (p - c) * SPEND_IN_NUSD + c * SPEND_CACHED_NUSD + o * SPEND_OUT_NUSD;
        json_decref(line);
    }
    return s;
}

/* Waits (up to timeout_ms) until no job of the groups (prefix, count pairs,
 * n_groups of them) is running or delayed and the done count has not moved
 * for 600 ms: every job has run or parked. Returns 1, or 0 on timeout. */
static inline int spend_wait_settled(const struct spend_account *a, const char *const *prefixes,
                                     const int *counts, int n_groups, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms, last_done = -1, since = 0;
    while (llmq_test_now_ms() < deadline) {
        long long done = 0, busy = 0;
        for (int g = 0; g < n_groups; g++) {
            struct spend_real s = spend_real_read(a, prefixes[g], counts[g]);
            done += s.done + s.dead;
            busy += s.running + s.delayed;
        }
        if (busy == 0 && done == last_done && llmq_test_now_ms() - since >= 600)
            return 1;
        if (busy != 0 || done != last_done) {
            last_done = busy == 0 ? done : -1;
            since = llmq_test_now_ms();
        }
        usleep(100000);
    }
    return 0;
}

/* A budget of `llmq budgets list --json` by id: field (an integer). */
static inline long long spend_budget_field(const struct spend_account *a, const char *id,
                                           const char *field)
{
    const char *argv[] = {"llmq", "budgets", "list", "--json", NULL};
    char *out = spend_cli(a, 0, argv);
    json_t *arr = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(arr);
    long long v = -1;
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "id")), id) == 0)
            v = json_integer_value(json_object_get(o, field));
    }
    json_decref(arr);
    return v;
}

/* Stops workers pids[0..n) with SIGTERM (they drain) and asserts each
 * exits 0. */
static inline void spend_workers_stop(const pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGTERM);
    worker_wait_n(pids, n, 20000);
}

#endif
