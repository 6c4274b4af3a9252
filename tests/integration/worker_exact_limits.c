/* llmq configured with exactly the API's limits and period (and only the
 * default arrival guard), against openai-sim counting as OpenAI does (exact
 * prompt tokens + max_tokens x n at admission, never refunded): 3 runs of
 * 2,000 mixed jobs (prompt lengths, max_tokens and n vary) through 4
 * workers. In every run: one result per job, no limit 429 at the API, and
 * >= 97% of the binding budget (TPM) used while the backlog lasted.
 *
 * The jobs cost 2.2 windows' budget, so the backlog keeps the limit binding
 * for k = 2 full periods from the first arrival t0; utilisation = tokens the
 * API admitted in [t0, t0 + k x period) / (k x TPM) (as worker_shared_limit
 * measures it).
 *
 * Also printed (a measurement, not asserted): the delay from each request's
 * admission in Redis (the job's run_ms, Redis TIME) to its arrival at the API
 * (the access log's t_ms, the same host clock) —
 * what the window's arrival guard must cover. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define RUNS 3
#define JOBS 2000
#define WORKERS 4
#define PERIOD_MS 6000
#define MODEL "gpt-4o-mini"

/* The jobs: prompts of 1..13 phrases, max_tokens 16..315, every 7th n = 2. */
static void write_mixed_jobs(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < JOBS; i++) {
        char content[1024] = "";
        size_t len = 0;
        for (int k = 0; k <= i % 13; k++)
            len += (size_t)snprintf(content + len, sizeof(content) - len,
                                    "phrase %d of question %d, ", k, i);
        fprintf(f,
                "{\"custom_id\":\"x-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"" MODEL "\",\"max_tokens\":%d,\"n\":%d,\"messages\":"
                "[{\"role\":\"user\",\"content\":\"%s\"}]}}\n",
                i, 16 + (i * 53) % 300, i % 7 == 0 ? 2 : 1, content);
    }
    fclose(f);
}

struct arrival {
    long long t_ms, charged, delay_ms;
};

static int cmp_arrival(const void *a, const void *b)
{
    const struct arrival *x = a, *y = b;
    return (x->t_ms > y->t_ms) - (x->t_ms < y->t_ms);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Reads the sim's log: every ok request's arrival, charge and delay since
 * its admission (run_ms of its job). Counts limit 429s into *limited, and
 * lines it could not read (not JSON, a job without run_ms) into *bad: the
 * caller asserts once this has freed what it held. */
static struct arrival *read_arrivals(const char *log, const char *prefix, size_t *n, int *limited,
                                     int *bad)
{
    struct arrival *a = calloc(JOBS + 16, sizeof(*a));
    *n = 0;
    *limited = 0;
    *bad = 0;
    FILE *f = fopen(log, "r");
    if (f == NULL) {
        (*bad)++;
        return a;
    }
    redisContext *c = llmq_test_redis_connect();
    char line[4096];
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        const char *outcome = json_string_value(json_object_get(o, "outcome"));
        *bad += o == NULL;
        if (outcome != NULL && strncmp(outcome, "limit_", 6) == 0)
            (*limited)++;
        if (outcome != NULL && strcmp(outcome, "ok") == 0 && *n < JOBS + 16) {
            struct arrival *e = &a[(*n)++];
            e->t_ms = json_integer_value(json_object_get(o, "t_ms"));
            e->charged = json_integer_value(json_object_get(o, "charged_tokens"));
            const char *id = json_string_value(json_object_get(o, "client_request_id"));
            char *run_ms = c ? llmq_test_job_field(c, prefix, id ? id : "", "run_ms") : NULL;
            *bad += run_ms == NULL;
            e->delay_ms = e->t_ms - (run_ms ? strtoll(run_ms, NULL, 10) : e->t_ms);
            free(run_ms);
        }
        json_decref(o);
    }
    fclose(f);
    if (c != NULL)
        redisFree(c);
    return a;
}

/* One run; returns the utilisation of the TPM budget. */
static double one_run(int run, long long tpm)
{
    char account[64], jobs[128], logs[WORKERS][128], tpm_s[24], period_s[16];
    llmq_test_unique_name(account, sizeof(account), "exact");
    snprintf(tpm_s, sizeof(tpm_s), "%lld", tpm);
    snprintf(period_s, sizeof(period_s), "%d", PERIOD_MS);
    struct sim_proc sim;
    const char *sim_args[] = {"--tpm", tpm_s, "--period-ms", period_s, "--latency-ms", "20", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    worker_limits_set(account, MODEL, "--tpm", tpm, PERIOD_MS);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-exact-%d-%d.jsonl", (int)getpid(), run);
    write_mixed_jobs(jobs);
    worker_enqueue(account, jobs);
    pid_t pids[WORKERS];
    const char *args[] = {"--concurrency", "64", NULL};
    char tag[32], prefix[128], key[256];
    snprintf(tag, sizeof(tag), "exact-%d", run);
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    worker_start_n(account, &sim, tag, WORKERS, logs, pids, args);
    /* stopped once every job is settled (not after an idle wait longer than
     * a window's hold: 8 s a run) */
    worker_stop_n_when_settled(prefix, JOBS, pids, WORKERS, 240000);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* Everything is measured and freed before anything is asserted: a failed
     * assertion leaves the function (cmocka's longjmp), and what it held
     * would be a leak report on top of the failure. */
    redisContext *c = llmq_test_redis_connect();
    long long events = worker_event_jobs(c, prefix);
    int missing = 0;
    for (int i = 0; i < JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "x-%d", i);
        snprintf(key, sizeof(key), "%sres:%s", prefix, id);
        missing += redis_int(c, "EXISTS %s%s", key, "") != 1;
    }
    redisFree(c);

    size_t n;
    int limited, bad;
    struct arrival *a = read_arrivals(sim.log_file, prefix, &n, &limited, &bad);
    qsort(a, n, sizeof(*a), cmp_arrival);
    long long *d = malloc((n + 1) * sizeof(*d));
    for (size_t i = 0; i < n; i++)
        d[i] = a[i].delay_ms;
    qsort(d, n, sizeof(*d), cmp_ll);
    if (n > 0)
        printf("# run %d: %d limit 429s; admission->arrival ms: min %lld p50 %lld p99 %lld "
               "p99.9 %lld max %lld\n",
               run, limited, d[0], d[n / 2], d[n * 99 / 100], d[n * 999 / 1000], d[n - 1]);
    long long t0 = n > 0 ? a[0].t_ms : 0, k = n > 0 ? (a[n - 1].t_ms - t0) / PERIOD_MS : 0;
    long long spent = 0;
    for (size_t i = 0; i < n && a[i].t_ms < t0 + k * PERIOD_MS; i++)
        spent += a[i].charged;
    double util = k > 0 ? (double)spent / (double)(k * tpm) : 0;
    printf("# run %d: %.2f%% of the budget in the first %lld periods\n", run, util * 100, k);
    free(d);
    free(a);
    unlink(jobs);
    for (int i = 0; i < WORKERS; i++)
        unlink(logs[i]);
    unlink(sim.log_file);
    assert_int_equal(bad, 0);
    assert_int_equal(events, JOBS);
    assert_int_equal(missing, 0);
    assert_int_equal(limited, 0);
    assert_int_equal((int)n, JOBS);
    assert_true(k >= 2); /* the backlog outlasted two windows */
    return util;
}

static void test_exact_limits_no_429_budget_used(void **state)
{
    (void)state;
    /* The budget: what the jobs are charged in all / 2.2. The charges are
     * the API's own count, read from one run against an unlimited sim. */
    char jobs[128];
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-exact-%d-probe.jsonl", (int)getpid());
    write_mixed_jobs(jobs);
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "exactprobe");
    worker_enqueue(account, jobs);
    const char *args[] = {"--concurrency", "256", NULL};
    char log[128], prefix[128];
    snprintf(log, sizeof(log), "/tmp/llmq-exact-%d-probe.log", (int)getpid());
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    pid_t w = worker_start(account, &sim, log, args);
    worker_stop_n_when_settled(prefix, JOBS, &w, 1, 240000);
    assert_int_equal(sim_proc_stop(&sim), 0);
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    free(e);
    FILE *f = fopen(sim.log_file, "r");
    long long total = 0;
    char line[4096];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        total += json_integer_value(json_object_get(o, "charged_tokens"));
        json_decref(o);
    }
    if (f != NULL)
        fclose(f);
    assert_int_equal((int)n, JOBS);
    unlink(sim.log_file);
    unlink(jobs);
    unlink(log);
    long long tpm = total * 10 / 22;
    for (int run = 0; run < RUNS; run++)
        assert_true(one_run(run, tpm) >= 0.97);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_limits_no_429_budget_used),
    };
    return cmocka_run_group_tests_name("worker_exact_limits", tests, NULL, NULL);
}
