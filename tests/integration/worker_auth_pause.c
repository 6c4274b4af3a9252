/* A 401/403 says the key is wrong, not the job. With a queued backlog and a
 * key the API refuses:
 *   - nothing is dead-lettered, no attempt is consumed, every job stays
 *     queued; only the calls already in flight reach the API;
 *   - the account is paused in Redis (P auth_pause holds the refused key's
 *     fingerprint, never the key), /readyz is 503 saying why,
 *     llmq_account_auth_paused is 1, `llmq status` and `llmq account status`
 *     show it, and the error is logged once;
 *   - every refused call counts as handed back, in the metrics and in the
 *     exit summary alike;
 *   - a worker started with the right key lifts the pause and does every job;
 *   - or an operator lifts it (`llmq account resume`) after the key was
 *     re-enabled upstream, and the paused worker takes the jobs again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <openssl/sha.h>

#include "job_fields.h"
#include "worker_support.h"

#define RIGHT_KEY "test-key-worker-right-not-real-0001"
#define JOBS 20

static void fingerprint(const char *key, char out[17])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)key, strlen(key), md);
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static long long stat_of(redisContext *c, const char *prefix, const char *field)
{
    char key[256];
    snprintf(key, sizeof(key), "%sstats", prefix);
    long long v = redis_int(c, "HGET %s %s", key, field);
    return v < 0 ? 0 : v;
}

/* Starts a worker with the wrong key (WORKER_TEST_KEY) and its admin
 * endpoint on *port; returns once /readyz says the account is paused. */
static pid_t start_refused_worker(const char *account, const struct sim_proc *sim, const char *log,
                                  int *port)
{
    char port_s[16];
    *port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", *port);
    const char *args[] = {"--concurrency", "4", "--metrics-port", port_s, "--metrics-host",
                          "127.0.0.1",     NULL};
    pid_t w = worker_start(account, sim, log, args);
    struct worker_page pg = worker_http_wait_for(*port, "/readyz", "paused", 30000);
    print_message("readyz: %ld %s", pg.status, pg.body);
    assert_int_equal(pg.status, 503);
    assert_non_null(strstr(pg.body, "paused"));
    assert_non_null(strstr(pg.body, "http 401"));
    assert_null(strstr(pg.body, WORKER_TEST_KEY));
    free(pg.body);
    return w;
}

/* What a paused account looks like: metric, Redis state, CLI, log. */
static void check_paused(const char *account, const char *prefix, int port, const char *log,
                         const struct sim_proc *sim)
{
    char fp[17], key[256];
    fingerprint(WORKER_TEST_KEY, fp);
    struct worker_page pg = worker_http_get(port, "/metrics");
    assert_true(worker_metric_sum(pg.body, "llmq_account_auth_paused", account) == 1);
    free(pg.body);

    redisContext *c = llmq_test_redis_connect();
    assert_int_equal(stat_of(c, prefix, "dead"), 0);
    assert_int_equal(stat_of(c, prefix, "done"), 0);
    snprintf(key, sizeof(key), "%sdead", prefix);
    assert_true(redis_int(c, "XLEN %s", key, NULL) <= 0);
    for (int i = 0; i < JOBS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "ap-%d", i);
        assert_int_equal(llmq_test_job_int(c, prefix, id, "attempts", -1), 0);
        char *st = llmq_test_job_field(c, prefix, id, "state");
        assert_non_null(st);
        assert_true(strcmp(st, "queued") == 0 || strcmp(st, "delayed") == 0);
        free(st);
    }
    snprintf(key, sizeof(key), "%sauth_pause", prefix);
    redisReply *r = redisCommand(c, "HGETALL %s", key);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 2);
    int saw_fp = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        assert_null(strstr(r->element[i + 1]->str, WORKER_TEST_KEY));
        if (strcmp(r->element[i]->str, "key_id") == 0)
            saw_fp = strcmp(r->element[i + 1]->str, fp) == 0;
    }
    assert_true(saw_fp);
    freeReplyObject(r);
    redisFree(c);

    const char *st[] = {"llmq", "status", NULL};
    struct cli_run cr = cli_run(account, st);
    assert_int_equal(cr.status, 0);
    assert_non_null(strstr(cr.out, "PAUSED"));
    assert_non_null(strstr(cr.out, fp));
    cli_free(&cr);
    const char *as[] = {"llmq", "account", "status", "--json", NULL};
    cr = cli_run(account, as);
    assert_int_equal(cr.status, 0);
    assert_non_null(strstr(cr.out, "\"paused\":true"));
    cli_free(&cr);

    /* Only calls already in flight got the 401: the pause stopped the rest. */
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim->log_file, &n);
    size_t refused = 0;
    for (size_t i = 0; i < n; i++)
        refused += e[i].status == 401;
    free(e);
    assert_true(refused >= 1 && refused <= 4);
    assert_int_equal(worker_log_count(log, "API key refused"), 1);
    assert_int_equal(worker_log_count(log, WORKER_TEST_KEY), 0);
}

/* The number after "<what> " in the last summary line of log; -1 none. */
static long long summary_count(const char *log, const char *what)
{
    char *text = cli_slurp(log);
    long long n = -1;
    const char *s = text, *last = NULL;
    while (s != NULL && (s = strstr(s, "summary: ")) != NULL)
        last = s++;
    const char *at = last != NULL ? strstr(last, what) : NULL;
    if (at != NULL)
        n = strtoll(at + strlen(what), NULL, 10);
    free(text);
    return n;
}

/* Stops the paused worker w once every refused call is settled, and checks
 * that its exit summary counts as many jobs handed back as its metrics. */
static void stop_paused_worker(pid_t w, const char *account, int port, const char *log,
                               const struct sim_proc *sim)
{
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim->log_file, &n);
    double refused = 0;
    for (size_t i = 0; i < n; i++)
        refused += e[i].status == 401;
    free(e);
    double handed_back = -1;
    long long deadline = llmq_test_now_ms() + 20000;
    do {
        struct worker_page pg = worker_http_get(port, "/metrics");
        handed_back = worker_metric_sum(pg.body, "llmq_jobs_handed_back_total", account);
        free(pg.body);
    } while (handed_back < refused && llmq_test_now_ms() < deadline && usleep(50000) == 0);
    assert_true(handed_back == refused);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 30000), 0);
    print_message("refused %.0f, metrics handed back %.0f, summary handed back %lld\n", refused,
                  handed_back, summary_count(log, "handed back "));
    assert_int_equal(summary_count(log, "handed back "), (long long)handed_back);
    assert_int_equal(summary_count(log, "keys refused "), (long long)refused);
}

static void setup_account(char *account, size_t n, char *prefix, const char *name)
{
    char jobs[128];
    llmq_test_unique_name(account, n, name);
    snprintf(prefix, 128, "llmq:{%s}:", account);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-authp-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "ap", JOBS, "gpt-4o-mini", 20, NULL);
    worker_enqueue(account, jobs);
    unlink(jobs);
}

static void test_restart_with_the_right_key_resumes(void **state)
{
    (void)state;
    char account[64], prefix[128], log[128], keyfile[128];
    setup_account(account, sizeof(account), prefix, "authk");
    snprintf(log, sizeof(log), "/tmp/llmq-authk-%d.log", (int)getpid());
    struct sim_proc sim;
    const char *sim_args[] = {"--api-key", RIGHT_KEY, NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    int port;
    pid_t w = start_refused_worker(account, &sim, log, &port);
    check_paused(account, prefix, port, log, &sim);
    stop_paused_worker(w, account, port, log, &sim);

    /* The key is fixed; the new worker lifts the pause and does everything. */
    snprintf(keyfile, sizeof(keyfile), "/tmp/llmq-authk-%d.key", (int)getpid());
    FILE *f = fopen(keyfile, "w");
    fputs(RIGHT_KEY "\n", f);
    fclose(f);
    const char *args[] = {"--account", account, "--api-key-file", keyfile, "--exit-when-idle-ms",
                          "1500",      NULL};
    assert_int_equal(worker_wait(worker_start(account, &sim, log, args), 60000), 0);
    redisContext *c = llmq_test_redis_connect();
    assert_int_equal(stat_of(c, prefix, "done"), JOBS);
    assert_int_equal(stat_of(c, prefix, "dead"), 0);
    char key[256];
    snprintf(key, sizeof(key), "%sauth_pause", prefix);
    assert_int_equal(redis_int(c, "EXISTS %s", key, NULL), 0);
    redisFree(c);
    assert_int_equal(worker_log_count(log, "resumed"), 1);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(keyfile);
    unlink(log);
}

static void test_operator_resume(void **state)
{
    (void)state;
    char account[64], prefix[128], log[128], port_s[16];
    setup_account(account, sizeof(account), prefix, "autho");
    snprintf(log, sizeof(log), "/tmp/llmq-autho-%d.log", (int)getpid());
    /* The API refuses the key at first (say, a disabled project)... */
    snprintf(port_s, sizeof(port_s), "%d", llmq_test_free_port());
    struct sim_proc sim;
    const char *refusing[] = {"--port", port_s, "--api-key", RIGHT_KEY, NULL};
    assert_int_equal(sim_proc_start(&sim, refusing), 0);
    int port;
    pid_t w = start_refused_worker(account, &sim, log, &port);
    check_paused(account, prefix, port, log, &sim);
    /* ...then takes it again, on the same address. */
    assert_int_equal(sim_proc_stop(&sim), 0);
    const char *accepting[] = {"--port", port_s, "--api-key", WORKER_TEST_KEY, NULL};
    assert_int_equal(sim_proc_start(&sim, accepting), 0);
    const char *resume[] = {"llmq", "account", "resume", NULL};
    struct cli_run cr = cli_run(account, resume);
    assert_int_equal(cr.status, 0);
    assert_non_null(strstr(cr.out, "resumed"));
    cli_free(&cr);

    redisContext *c = llmq_test_redis_connect();
    long long deadline = llmq_test_now_ms() + 60000;
    while (stat_of(c, prefix, "done") < JOBS && llmq_test_now_ms() < deadline)
        usleep(50000);
    assert_int_equal(stat_of(c, prefix, "done"), JOBS);
    assert_int_equal(stat_of(c, prefix, "dead"), 0);
    redisFree(c);
    struct worker_page pg = worker_http_wait_for(port, "/readyz", "ready", 30000);
    assert_int_equal(pg.status, 200);
    free(pg.body);
    pg = worker_http_get(port, "/metrics");
    assert_true(worker_metric_sum(pg.body, "llmq_account_auth_paused", account) == 0);
    free(pg.body);
    cr = cli_run(account, resume);
    assert_int_equal(cr.status, 0);
    assert_non_null(strstr(cr.out, "not paused"));
    cli_free(&cr);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 30000), 0);
    assert_int_equal(worker_log_count(log, "account resumed"), 1);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_with_the_right_key_resumes),
        cmocka_unit_test(test_operator_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
