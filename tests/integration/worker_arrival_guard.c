/* The arrival guard (docs/limiter.md "What a bucket is charged"), end to end against
 * openai-sim:
 *   - the part llmq controls is bounded: a grant whose connection is ready
 *     only after its lifetime (a slow connect: the sim accepts nothing, its
 *     backlog of 0 is full, so the worker's SYN is dropped and resent ~1 s
 *     later) is handed back unsent, refunded, granted again and sent, its
 *     attempt uncounted;
 *   - the part it does not control is learned: limit 429s the ledger did not
 *     predict (the sim counting some arrivals late, and not saying so in
 *     openai-processing-ms) grow the model's guard, which decays back to its
 *     floor once the windows are clean (worker_guard_fresh: the lateness
 *     the worker measures, without a 429);
 *   - a limit 429 that another client on the key explains (the API counted
 *     far more ahead of the request than llmq had sent) does not grow it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "job_fields.h"
#include "test_case.h"
#include "worker_support.h"

#define MODEL "gpt-4o-mini"

/* `llmq limits get --json`'s value of field of account's MODEL bucket; -1
 * when it has none. */
static long long limits_get_field(const char *account, const char *field)
{
    const char *argv[] = {"llmq", "limits", "get", "--json", NULL};
    struct cli_run r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    json_t *doc = json_loads(r.out, 0, NULL);
    assert_non_null(doc);
    json_t *v = json_object_get(json_object_get(json_object_get(doc, "limits"), MODEL), field);
    long long out = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    json_decref(doc);
    cli_free(&r);
    return out;
}

/* A field of account's MODEL bucket hash (-1: none). */
static long long bucket_field(redisContext *c, const char *account, const char *field)
{
    char key[256];
    snprintf(key, sizeof(key), "llmq:{%s}:limit:" MODEL, account);
    return redis_int(c, "HGET %s %s", key, field);
}

/* Limit 429s and all requests of the access log whose job id starts with tag. */
static int limited_of(const char *log, const char *tag, int *requests)
{
    size_t n;
    struct sim_entry *e = sim_log_read(log, &n);
    int limited = 0;
    *requests = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(e[i].job, tag, strlen(tag)) != 0)
            continue;
        (*requests)++;
        limited += strncmp(e[i].outcome, "limit_", 6) == 0;
    }
    free(e);
    return limited;
}

/* The count after label ("dispatched ", "handed back ") in the worker's exit
 * summary line of the log at path; -1 when there is none. */
static long long summary_count(const char *path, const char *label)
{
    char *log = cli_slurp(path);
    const char *line = strstr(log, "summary: ");
    const char *at = line != NULL ? strstr(line, label) : NULL;
    long long v = at != NULL ? strtoll(at + strlen(label), NULL, 10) : -1;
    free(log);
    return v;
}

/* Waits (a deadline against hanging) until job id of account has state. */
static void wait_state(redisContext *c, const char *account, const char *id, const char *state)
{
    char key[256];
    snprintf(key, sizeof(key), "llmq:{%s}:job:%s", account, id);
    long long deadline = llmq_test_now_ms() + 30000;
    for (;;) {
        redisReply *r = redisCommand(c, "HGET %s state", key);
        int there = r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, state) == 0;
        freeReplyObject(r);
        if (there)
            return;
        assert_true(llmq_test_now_ms() < deadline);
        usleep(20000);
    }
}

static void test_stale_grant_handed_back_and_sent_later(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "stale");
    struct sim_proc sim;
    const char *sim_args[] = {"--accept-paused", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    /* One connection fills the paused sim's queue: the worker's SYN is
     * dropped, and its connection is ready only after a resend. */
    int dummy = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)sim.port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(dummy, (struct sockaddr *)&a, sizeof(a)), 0);
    /* A 2 s window: grants live 50 ms. */
    worker_limits_set(account, MODEL, "--rpm", 100, 2000);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-stale-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-stale-%d.log", (int)getpid());
    worker_write_jobs(jobs, "s", 1, MODEL, 20, NULL);
    worker_enqueue(account, jobs);
    const char *args[] = {"--exit-when-idle-ms", "1500", NULL};
    pid_t w = worker_start(account, &sim, log, args);
    redisContext *c = llmq_test_redis_connect();
    /* Granted: its connect is on its way (the SYN goes out as the worker
     * reads the grant); then the sim accepts again. */
    wait_state(c, account, "s-0", "running");
    usleep(300000);
    assert_int_equal(kill(sim.pid, SIGUSR2), 0);
    close(dummy);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    char res[256];
    snprintf(res, sizeof(res), "llmq:{%s}:res:s-0", account);
    assert_int_equal(redis_int(c, "EXISTS %s", res, NULL), 1);
    /* Sent once, by its last grant; the stale ones were never counted. */
    int requests = 0;
    assert_int_equal(limited_of(sim.log_file, "s-", &requests), 0);
    assert_int_equal(requests, 1);
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    assert_int_equal(llmq_test_job_int(c, prefix, "s-0", "attempts", -1), 1);
    /* Handed back at least once (again if the host is slow enough to let a
     * second grant go stale), sent by the last grant. */
    long long dispatched = summary_count(log, "dispatched "),
              back = summary_count(log, "handed back ");
    printf("# dispatched %lld, handed back %lld\n", dispatched, back);
    assert_true(back >= 1);
    assert_int_equal(dispatched, back + 1);
    assert_int_equal(worker_log_count(log, "grant stale"), back);
    /* The host did not send within the lifetime: it grew by half per stale
     * hand-back of a grant made for the lifetime then in force. */
    long long lifetime = bucket_field(c, account, "lifetime_ms");
    assert_true(lifetime >= 75);
    /* Refunded: the window holds the last grant's admission only (in either
     * log: in flight, or settled by its arrival). */
    char key[256], akey[256];
    snprintf(key, sizeof(key), "llmq:{%s}:bw:" MODEL, account);
    snprintf(akey, sizeof(akey), "llmq:{%s}:bws:" MODEL, account);
    assert_int_equal(redis_int(c, "ZCARD %s", key, NULL) + redis_int(c, "ZCARD %s", akey, NULL), 1);
    redisFree(c);
    unlink(jobs);
    unlink(log);
    unlink(sim.log_file);
}

/* Runs n jobs "<tag>-<i>" of account through one worker against sim; before
 * the worker starts (the jobs enqueued), calls before_start(sim) unless NULL. */
static void run_jobs_after(const char *account, const struct sim_proc *sim, const char *tag, int n,
                           void (*before_start)(const struct sim_proc *sim))
{
    char jobs[128], log[128];
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-%s-%d.jsonl", tag, (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-%s-%d.log", tag, (int)getpid());
    worker_write_jobs(jobs, tag, n, MODEL, 20, NULL);
    worker_enqueue(account, jobs);
    if (before_start != NULL)
        before_start(sim);
    const char *args[] = {"--concurrency", "32", "--exit-when-idle-ms", "2500", NULL};
    assert_int_equal(worker_wait(worker_start(account, sim, log, args), 120000), 0);
    unlink(jobs);
    unlink(log);
}

static void run_jobs(const char *account, const struct sim_proc *sim, const char *tag, int n)
{
    run_jobs_after(account, sim, tag, n, NULL);
}

static void test_guard_grows_on_late_arrivals_and_decays(void **state)
{
    (void)state;
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "late");
    /* About 20 requests' tokens per 2 s window, llmq the same: guard floor 100
     * ms (grant lifetime 50 + allowance 50), ceiling 750 (250 + 500). Tokens,
     * not requests: a window the API reports as full (0 remaining) pauses the
     * bucket until the API's reset, which waits out the late ones too. */
    worker_limits_set(account, MODEL, "--tpm", 720, 2000);
    /* A bucket whose safe start has decayed long ago (first used 1,000
     * windows back): at its floor. */
    redisContext *c = llmq_test_redis_connect();
    char key[256], born[32];
    snprintf(key, sizeof(key), "llmq:{%s}:limit:" MODEL, account);
    snprintf(born, sizeof(born), "%lld", llmq_test_now_ms() - 2000000);
    freeReplyObject(redisCommand(c, "HSET %s guard_born_ms %s", key, born));
    long long floor_ms = limits_get_field(account, "guard_floor_ms");
    assert_int_equal(limits_get_field(account, "guard_ms"), floor_ms);
    /* The sim counts a fifth of the arrivals 560 ms late: the requests llmq
     * sent next can reach its window first, while the late ones still count.
     * A 429 comes when a window's on-time requests reach the sim within the
     * lateness less the guard (100 ms) of the moment the ledger let the
     * window before go: 460 ms for the worker to see the slots free and send
     * (on a host at load ~20, 220 ms of a 1 s window was not always enough:
     * no 429 came). The lateness is within the guard's floor plus the
     * allowance's ceiling (600 ms), so the API's wait (lateness - guard -
     * that time) lets the guard grow however fast the host sends. The bounds
     * scale with the period: a longer one gives the host more time. */
    struct sim_proc sim;
    const char *late_args[] = {"--tpm",     "720", "--period-ms",        "2000", "--late", "20",
                               "--late-ms", "560", "--no-processing-ms", NULL};
    assert_int_equal(sim_proc_start(&sim, late_args), 0);
    run_jobs(account, &sim, "a", 120);
    assert_int_equal(sim_proc_stop(&sim), 0);
    int requests = 0, limited = limited_of(sim.log_file, "a-", &requests);
    long long grown = bucket_field(c, account, "allowance_ms");
    printf("# late arrivals: %d limit 429s in %d requests; the allowance grew to %lld ms (the "
           "guard's floor %lld; the workers measured %lld ms late, %lld before)\n",
           limited, requests, grown, floor_ms, bucket_field(c, account, "late_ms"),
           bucket_field(c, account, "late_prev_ms"));
    assert_true(limited >= 1);
    assert_true(grown > 50); /* its floor (period / 40, at least 50) */
    unlink(sim.log_file);

    /* Arrivals on time again: the guard decays back to its floor. */
    const char *clean_args[] = {"--tpm", "720", "--period-ms", "2000", "--no-processing-ms", NULL};
    assert_int_equal(sim_proc_start(&sim, clean_args), 0);
    run_jobs(account, &sim, "b", 40);
    assert_int_equal(sim_proc_stop(&sim), 0);
    limited = limited_of(sim.log_file, "b-", &requests);
    printf("# on time: %d limit 429s in %d requests\n", limited, requests);
    /* (a quarter of the excess a period: from the ceiling ~22 periods) */
    long long deadline = llmq_test_now_ms() + 180000;
    long long guard;
    while ((guard = limits_get_field(account, "guard_ms")) > floor_ms &&
           llmq_test_now_ms() < deadline)
        usleep(500000);
    assert_int_equal(guard, floor_ms);
    redisFree(c);
    unlink(sim.log_file);
}

/* Another client on the same key takes 12 of the sim's 20 requests, all at
 * once (one process each: one after another they took 2.4 s of the window). */
static void other_client_takes_12(const struct sim_proc *sim)
{
    const char *hdr[] = {"Authorization: Bearer " WORKER_TEST_KEY, NULL};
    pid_t kids[12];
    for (int i = 0; i < 12; i++) {
        kids[i] = llmq_test_fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            struct sim_resp resp;
            sim_http(sim, "/v1/chat/completions",
                     "{\"model\":\"" MODEL "\",\"max_tokens\":1,"
                     "\"messages\":[{\"role\":\"user\",\"content\":\"the other client\"}]}",
                     hdr, &resp);
            _exit(resp.status == 200 ? 0 : 1);
        }
    }
    int ok = 0;
    for (int i = 0; i < 12; i++) {
        int status;
        ok += waitpid(kids[i], &status, 0) == kids[i] && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0;
    }
    assert_int_equal(ok, 12);
}

static void test_429_explained_by_another_client_keeps_guard(void **state)
{
    (void)state;
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "otherkey");
    struct sim_proc sim;
    /* 20 requests per 10 s window; answers take 200 ms (the 429s come first).
     * The other client's requests must still count when llmq's arrive: they
     * are sent once llmq's jobs are enqueued, just before its worker starts,
     * and the window is long against a worker's start on a busy host (with a
     * 5 s window, sent one by one before the enqueue, they had left it
     * there: no 429 came). Its 429s are not explained by the API's wait
     * either: that is the rest of the other client's window, above the
     * allowance's ceiling (a quarter of it) while the worker starts within
     * 7.5 s. */
    const char *sim_args[] = {"--rpm", "20", "--period-ms", "10000", "--latency-ms", "200", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    worker_limits_set(account, MODEL, "--rpm", 20, 10000);
    /* llmq believes all 20 are free: 12 of its requests are refused. */
    run_jobs_after(account, &sim, "o", 20, other_client_takes_12);
    assert_int_equal(sim_proc_stop(&sim), 0);
    int requests = 0, limited = limited_of(sim.log_file, "o-", &requests);
    redisContext *c = llmq_test_redis_connect();
    printf("# %d limit 429s in %d requests, explained by the other client\n", limited, requests);
    assert_true(limited >= 1);
    assert_int_equal(bucket_field(c, account, "allowance_ms"), -1); /* never grown */
    char key[256];
    int done = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "llmq:{%s}:res:o-%d", account, i);
        done += redis_int(c, "EXISTS %s", key, NULL) == 1;
    }
    assert_int_equal(done, 20);
    redisFree(c);
    unlink(sim.log_file);
}

/* An operator pins the guard (no learning) and unpins it again. */
static void test_guard_pinned_and_unpinned(void **state)
{
    (void)state;
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "pin");
    worker_limits_set(account, MODEL, "--tpm", 1000, 2000);
    /* never used: lifetime at its floor (50), allowance at its safe start,
     * the ceiling (period / 4) */
    long long start_ms = 50 + 500;
    const char *pin[] = {"llmq", "limits", "policy", "--window-guard-ms", "300", NULL};
    struct cli_run r = cli_run(account, pin);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    assert_int_equal(limits_get_field(account, "guard_ms"), 300);
    assert_int_equal(limits_get_field(account, "guard_ceiling_ms"), 300);
    const char *get[] = {"llmq", "limits", "get", NULL};
    r = cli_run(account, get);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "arrival guard " MODEL ": 300 ms (pinned by the policy"));
    assert_non_null(strstr(r.out, "window guard 300 ms"));
    cli_free(&r);
    const char *learn[] = {"llmq", "limits", "policy", "--window-guard-ms", "learn", NULL};
    r = cli_run(account, learn);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    assert_int_equal(limits_get_field(account, "guard_ms"), start_ms);
    r = cli_run(account, get);
    assert_non_null(strstr(r.out, "window guard learned per model"));
    cli_free(&r);
    const char *bad[] = {"llmq", "limits", "policy", "--window-guard-ms", "soon", NULL};
    r = cli_run(account, bad);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--window-guard-ms"));
    cli_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_grant_handed_back_and_sent_later),
        cmocka_unit_test(test_guard_grows_on_late_arrivals_and_decays),
        cmocka_unit_test(test_429_explained_by_another_client_keeps_guard),
        cmocka_unit_test(test_guard_pinned_and_unpinned),
    };
    if (LLMQ_TEST_CASE_SELECT(tests) != 0)
        return 1;
    return cmocka_run_group_tests_name("worker_arrival_guard", tests, NULL, NULL);
}
