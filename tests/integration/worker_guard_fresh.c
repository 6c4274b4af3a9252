/* A model no one has used yet, on a loaded host, sees no limit 429 from the
 * first window on (issue 34): the arrival guard starts safe and learns from
 * what the workers measure, not from the API's refusals.
 *
 * A new account and model (nothing learned in Redis), llmq configured with
 * exactly the API's limit and period (2 s, tokens), openai-sim counting as
 * OpenAI does (prompt + max_tokens at arrival, answers after 50-200 ms),
 * mixed jobs (prompts of 10-200 words, max_tokens 16-512) through 3 workers
 * of 40, while BUSY processes spin beside them on the host's cores (started
 * here, ended by the teardown). Asserted: every job has its result, the
 * API answered no limit 429 at all, and what the guard learnt is in Redis
 * in the model's bucket (the safe start's first use, the lateness samples
 * the workers measured). Printed, not asserted: admission->arrival delays
 * and the lateness measured. The version before this test fails it on
 * what is stored; on the 2-core host it was written on, that version met
 * no limit 429 here either (0 in 260, 500 and 400 requests: its header
 * learning, limiter_learn, absorbed the late arrivals), so the 429 count
 * guards against a regression rather than showing the old fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define JOBS 400
#define WORKERS 3
#define BUSY 4
#define PERIOD_MS 2000
#define TPM 40000
#define MODEL "gpt-4o"

static pid_t busy[BUSY];

/* BUSY processes that spin until killed (a host with other work on it). */
static void busy_start(void)
{
    for (int i = 0; i < BUSY; i++) {
        busy[i] = llmq_test_fork();
        assert_true(busy[i] >= 0);
        if (busy[i] == 0) {
            execl("/bin/sh", "sh", "-c", "while :; do :; done", (char *)NULL);
            _exit(127);
        }
    }
}

static int busy_stop(void **state)
{
    (void)state;
    for (int i = 0; i < BUSY; i++)
        if (busy[i] > 0) {
            kill(busy[i], SIGKILL);
            waitpid(busy[i], NULL, 0);
            busy[i] = 0;
        }
    return 0;
}

/* The jobs: prompts of 10..200 words, max_tokens 16..512, every 5th n = 1
 * of a shorter question; deterministic. */
static void write_mixed_jobs(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < JOBS; i++) {
        char content[2048] = "";
        size_t len = 0;
        int words = 10 + (i * 37) % 191;
        for (int k = 0; k < words; k++)
            len += (size_t)snprintf(content + len, sizeof(content) - len, "w%d ", k % 10);
        fprintf(f,
                "{\"custom_id\":\"f-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"" MODEL "\",\"max_tokens\":%d,\"messages\":"
                "[{\"role\":\"user\",\"content\":\"%s\"}]}}\n",
                i, 16 + (i * 89) % 497, content);
    }
    fclose(f);
}

static long long bucket_field(redisContext *c, const char *account, const char *field)
{
    char key[256];
    snprintf(key, sizeof(key), "llmq:{%s}:limit:" MODEL, account);
    return redis_int(c, "HGET %s %s", key, field);
}

static void test_fresh_model_loaded_host_no_429(void **state)
{
    (void)state;
    char account[64], jobs[128], logs[WORKERS][128], tpm_s[24], period_s[16];
    llmq_test_unique_name(account, sizeof(account), "fresh");
    snprintf(tpm_s, sizeof(tpm_s), "%d", TPM);
    snprintf(period_s, sizeof(period_s), "%d", PERIOD_MS);
    struct sim_proc sim;
    const char *sim_args[] = {
        "--tpm", tpm_s, "--period-ms", period_s, "--latency-ms", "50", "--latency-jitter-ms",
        "150",   NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    worker_limits_set(account, MODEL, "--tpm", TPM, PERIOD_MS);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-fresh-%d.jsonl", (int)getpid());
    write_mixed_jobs(jobs);
    worker_enqueue(account, jobs);
    busy_start();
    pid_t pids[WORKERS];
    const char *args[] = {"--concurrency", "40", "--exit-when-idle-ms", "4000", NULL};
    worker_start_n(account, &sim, "fresh", WORKERS, logs, pids, args);
    worker_wait_n(pids, WORKERS, 240000);
    busy_stop(NULL);
    assert_int_equal(sim_proc_stop(&sim), 0);

    redisContext *c = llmq_test_redis_connect();
    char prefix[128], key[256];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    int missing = 0;
    for (int i = 0; i < JOBS; i++) {
        snprintf(key, sizeof(key), "%sres:f-%d", prefix, i);
        missing += redis_int(c, "EXISTS %s", key, "") != 1;
    }
    assert_int_equal(missing, 0);

    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    sim_log_sort(e, n);
    int ok = 0, limited = 0, first = 0;
    long long t0 = n > 0 ? e[0].t_ms : 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        int lim = strncmp(e[i].outcome, "limit_", 6) == 0;
        ok += strcmp(e[i].outcome, "ok") == 0;
        limited += lim;
        first += lim && e[i].t_ms < t0 + 2 * PERIOD_MS;
        char *run_ms = llmq_test_job_field(c, prefix, e[i].job, "run_ms");
        if (run_ms != NULL && strcmp(e[i].outcome, "ok") == 0) {
            long long d = e[i].t_ms - strtoll(run_ms, NULL, 10);
            worst = d > worst ? d : worst;
        }
        free(run_ms);
    }
    long long late = bucket_field(c, account, "late_ms"),
              prev = bucket_field(c, account, "late_prev_ms"),
              born = bucket_field(c, account, "guard_born_ms");
    printf("# %d requests, %d limit 429s (%d in the first two windows); admission->arrival "
           "max %lld ms; lateness measured %lld / %lld ms; span %lld ms\n",
           (int)n, limited, first, worst, late, prev, n > 0 ? e[n - 1].t_ms - t0 : 0);
    free(e);
    assert_int_equal(limited, 0);
    assert_int_equal(ok, JOBS);
    /* what was learnt is kept per model in Redis */
    assert_true(born > 0);
    assert_true(late >= 0);
    assert_true(bucket_field(c, account, "late_at") > 0);
    redisFree(c);
    unlink(jobs);
    for (int i = 0; i < WORKERS; i++)
        unlink(logs[i]);
    unlink(sim.log_file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fresh_model_loaded_host_no_429, busy_stop),
    };
    return cmocka_run_group_tests_name("worker_guard_fresh", tests, NULL, NULL);
}
