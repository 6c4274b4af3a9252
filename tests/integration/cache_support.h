/* Helpers of the response cache's tests (cache_*.c): one case's account,
 * openai-sim and Redis connection, a worker run until idle, the sim's
 * upstream calls, a job's result line and state. Header-only: each test is
 * its own executable. */
#ifndef LLMQ_TEST_CACHE_SUPPORT_H
#define LLMQ_TEST_CACHE_SUPPORT_H

#include "job_fields.h"
#include "worker_support.h"

#define MODEL "gpt-4o-mini"
#define BODY                                                                                       \
    "{\"model\":\"" MODEL "\",\"max_tokens\":100,\"messages\":[{\"role\":\"user\",\"content\":"    \
    "\"the same question every time\"}]}"

struct cache_case {
    char account[64];
    char prefix[128];
    char jobs[128];
    char log[128];
    struct sim_proc sim;
    redisContext *c;
};

static inline void case_open(struct cache_case *k, const char *const *sim_args)
{
    llmq_test_unique_name(k->account, sizeof(k->account), "cache");
    snprintf(k->prefix, sizeof(k->prefix), "llmq:{%s}:", k->account);
    snprintf(k->jobs, sizeof(k->jobs), "/tmp/llmq-cache-%d.jsonl", (int)getpid());
    snprintf(k->log, sizeof(k->log), "/tmp/llmq-cache-%d.log", (int)getpid());
    assert_int_equal(sim_proc_start(&k->sim, sim_args), 0);
    worker_limits_set(k->account, MODEL, "--rpm", 1000, 60000);
    k->c = llmq_test_redis_connect();
}

static inline void case_close(struct cache_case *k)
{
    assert_int_equal(sim_proc_stop(&k->sim), 0);
    redisFree(k->c);
    unlink(k->jobs);
    unlink(k->log);
    unlink(k->sim.log_file);
}

/* Runs a worker until it has been idle a while. */
static inline void run_worker(struct cache_case *k)
{
    const char *args[] = {
        "--backoff-base-ms", "50", "--backoff-cap-ms", "200", "--exit-when-idle-ms", "1500", NULL};
    pid_t w = worker_start(k->account, &k->sim, k->log, args);
    assert_int_equal(worker_wait(w, 120000), 0);
}

/* Upstream calls the sim saw: all, and answered in *ok (when not NULL). */
static inline size_t upstream_calls(const struct cache_case *k, int *ok)
{
    size_t n = 0;
    int limited = 0;
    struct sim_entry *e = sim_log_read(k->sim.log_file, &n);
    int answered = 0;
    sim_log_outcomes(e, n, ok != NULL ? ok : &answered, &limited);
    free(e);
    return n;
}

/* Job id's result line parsed (asserts it has one). */
static inline json_t *result_of(struct cache_case *k, const char *id)
{
    char *line = llmq_test_job_result(k->c, k->prefix, id);
    if (line == NULL)
        fail_msg("job %s has no result", id);
    json_t *o = json_loads(line, 0, NULL);
    assert_non_null(o);
    free(line);
    return o;
}

static inline int is_cached(const json_t *line)
{
    return json_is_true(json_object_get(line, "cached"));
}

static inline const char *answer_text(const json_t *line)
{
    const json_t *body = json_object_get(json_object_get(line, "response"), "body");
    const json_t *ch = json_array_get(json_object_get(body, "choices"), 0);
    return json_string_value(json_object_get(json_object_get(ch, "message"), "content"));
}

static inline char *state_of(struct cache_case *k, const char *id)
{
    char *st = llmq_test_job_field(k->c, k->prefix, id, "state");
    assert_non_null(st);
    return st;
}

static inline void assert_state(struct cache_case *k, const char *id, const char *want)
{
    char *st = state_of(k, id);
    if (strcmp(st, want) != 0)
        fail_msg("job %s: state %s, expected %s", id, st, want);
    free(st);
}

#endif
