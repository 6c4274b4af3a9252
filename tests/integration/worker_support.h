/* Helpers of the worker's end-to-end tests: start llmq-worker processes
 * against a test account and openai-sim, write Batch jobs, read the sim's
 * access log. Header-only (static inline): each test is its own executable.
 * Builds on jobs_cli_run.h (the llmq CLI) and openai_sim_support.h (the
 * server). */
#ifndef LLMQ_TEST_WORKER_SUPPORT_H
#define LLMQ_TEST_WORKER_SUPPORT_H

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobs_cli_run.h"
#include "openai_sim_support.h"
#include "redis/redis.h"
#include "redis/script.h"
#include "testsupport.h"

#define WORKER_TEST_KEY "test-key-worker-e2e-not-real-0000"

/* Starts llmq-worker for account against sim with extra args (NULL-ended);
 * its log goes to log_path. Returns the pid. */
static inline pid_t worker_start(const char *account, const struct sim_proc *sim,
                                 const char *log_path, const char *const *extra)
{
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d/v1", sim->port);
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        FILE *f = fopen(log_path, "w");
        if (f != NULL) {
            dup2(fileno(f), 2);
            dup2(fileno(f), 1);
        }
        setenv("LLMQ_REDIS_URL", llmq_test_redis_url(), 1);
        setenv("LLMQ_ACCOUNT", account, 1);
        setenv("OPENAI_API_KEY", WORKER_TEST_KEY, 1);
        const char *argv[48] = {"llmq-worker", "--base-url", base, "--log-level", "info"};
        int argc = 5;
        for (int i = 0; extra != NULL && extra[i] != NULL && argc < 46; i++)
            argv[argc++] = extra[i];
        argv[argc] = NULL;
        execv(llmq_test_bin("llmq-worker", 0), (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Waits up to timeout_ms for pid; returns its exit status, 128 + signal, or
 * -1 on timeout (the process is then killed). */
static inline int worker_wait(pid_t pid, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    int status;
    while (llmq_test_now_ms() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* The log of worker i of a test tagged tag: /tmp/llmq-<tag>-<pid>-w<i>.log
 * into buf (128 bytes). */
static inline void worker_log_path(char buf[128], const char *tag, int i)
{
    snprintf(buf, 128, "/tmp/llmq-%s-%d-w%d.log", tag, (int)getpid(), i);
}

/* Starts n workers (worker_start with extra) logging to worker_log_path
 * (tag, i), which is written into logs[i]; their pids into pids. */
static inline void worker_start_n(const char *account, const struct sim_proc *sim, const char *tag,
                                  int n, char (*logs)[128], pid_t *pids, const char *const *extra)
{
    for (int i = 0; i < n; i++) {
        worker_log_path(logs[i], tag, i);
        pids[i] = worker_start(account, sim, logs[i], extra);
    }
}

/* Asserts that each of the n workers exits 0 within timeout_ms (a deadline
 * against hanging, not a timing check). */
static inline void worker_wait_n(const pid_t *pids, int n, long long timeout_ms)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(worker_wait(pids[i], timeout_ms), 0);
}

/* Waits up to timeout_ms until the log at path holds text; returns 1, or 0
 * on timeout. */
static inline int worker_wait_log(const char *path, const char *text, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    for (;;) {
        char *log = cli_slurp(path);
        int found = strstr(log, text) != NULL;
        free(log);
        if (found)
            return 1;
        if (llmq_test_now_ms() >= deadline)
            return 0;
        usleep(20000);
    }
}

/* Writes n chat jobs "<prefix>-<i>" for model to path, each with max_tokens
 * and an optional "llmq" options object text (may be NULL). */
static inline void worker_write_jobs(const char *path, const char *prefix, int n, const char *model,
                                     int max_tokens, const char *llmq_opts)
{
    FILE *f = fopen(path, "w");
    for (int i = 0; i < n; i++)
        fprintf(f,
                "{\"custom_id\":\"%s-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"%s\",\"max_tokens\":%d,\"messages\":[{\"role\":\"user\","
                "\"content\":\"question number %d, please answer briefly\"}]}%s%s}\n",
                prefix, i, model, max_tokens, i, llmq_opts ? ",\"llmq\":" : "",
                llmq_opts ? llmq_opts : "");
    fclose(f);
}

/* Enqueues the jobs at path for account; asserts success. */
static inline void worker_enqueue(const char *account, const char *path)
{
    const char *argv[] = {"llmq", "enqueue", path, "--quiet", NULL};
    struct cli_run r = cli_run(account, argv);
    if (r.status != 0)
        fprintf(stderr, "enqueue failed: %s\n", r.err);
    assert_int_equal(r.status, 0);
    cli_free(&r);
}

/* One access-log line of the sim. */
struct sim_entry {
    long long t_ms;
    int status;
    char outcome[32];
    char job[96];
    long long conn; /* the connection it came on (numbered from 1) */
    int inflight;   /* requests being answered when its answer started, itself included */
};

/* Reads the sim's access log; returns a new array (count in *n). */
static inline struct sim_entry *sim_log_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    size_t cap = 1024;
    struct sim_entry *v = malloc(cap * sizeof(*v));
    *n = 0;
    char line[4096];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        if (o == NULL)
            continue;
        if (*n == cap)
            v = realloc(v, (cap *= 2) * sizeof(*v));
        struct sim_entry *e = &v[(*n)++];
        e->t_ms = json_integer_value(json_object_get(o, "t_ms"));
        e->status = (int)json_integer_value(json_object_get(o, "status"));
        snprintf(e->outcome, sizeof(e->outcome), "%s",
                 json_string_value(json_object_get(o, "outcome")) ?: "");
        snprintf(e->job, sizeof(e->job), "%s",
                 json_string_value(json_object_get(o, "client_request_id")) ?: "");
        e->conn = json_integer_value(json_object_get(o, "conn"));
        e->inflight = (int)json_integer_value(json_object_get(o, "inflight"));
        json_decref(o);
    }
    if (f != NULL)
        fclose(f);
    return v;
}

/* Sorts the access log by arrival time (the order the requests reached the
 * API). */
static inline int sim_entry_by_time(const void *a, const void *b)
{
    const struct sim_entry *x = a, *y = b;
    return (x->t_ms > y->t_ms) - (x->t_ms < y->t_ms);
}

static inline void sim_log_sort(struct sim_entry *e, size_t n)
{
    qsort(e, n, sizeof(*e), sim_entry_by_time);
}

/* How many requests of the access log were answered ("ok") and how many
 * were refused for the API's limit ("limit_*"). */
static inline void sim_log_outcomes(const struct sim_entry *e, size_t n, int *ok, int *limited)
{
    *ok = *limited = 0;
    for (size_t i = 0; i < n; i++) {
        *ok += strcmp(e[i].outcome, "ok") == 0;
        *limited += strncmp(e[i].outcome, "limit_", 6) == 0;
    }
}

/* Asserts that the jobs whose ids start with tag ("": every request) used
 * their budget (budget requests per period_ms) in every full period from
 * their first arrival: at the end of each, >= 95% of the budget of the
 * periods so far. Counted up to each period's end rather than within it: how
 * far an arrival lags its admission (a worker's first connection) shifts
 * requests between neighbouring periods, never out of the run; a wasted
 * period shows at its end all the same. e: the access log sorted by time
 * (sim_log_sort); at least two full periods. Returns the first and last
 * arrival times of those jobs. */
static inline void sim_log_check_budget_used(const struct sim_entry *e, size_t n, const char *tag,
                                             int budget, long long period_ms, long long *first,
                                             long long *last)
{
    size_t tl = strlen(tag);
    long long t0 = -1, t1 = -1;
    for (size_t i = 0; i < n; i++)
        if (strncmp(e[i].job, tag, tl) == 0) {
            if (t0 < 0)
                t0 = e[i].t_ms;
            t1 = e[i].t_ms;
        }
    *first = t0;
    *last = t1;
    long long periods = (t1 - t0) / period_ms, so_far = 0;
    assert_true(periods >= 2);
    size_t i = 0;
    for (long long k = 0; k < periods; k++) {
        long long in_period = 0;
        for (; i < n && e[i].t_ms < t0 + (k + 1) * period_ms; i++)
            in_period += strncmp(e[i].job, tag, tl) == 0;
        so_far += in_period;
        double used = (double)so_far / (double)((k + 1) * budget);
        printf("# %s period %lld: %lld requests; %lld by its end, %.1f%% of the budget so far\n",
               tl ? tag : "all", k, in_period, so_far, used * 100);
        assert_true(used >= 0.95);
    }
}

/* Runs `llmq limits set model <kind> n [--period-ms period_ms]` for account
 * (kind "--rpm" or "--tpm"; period_ms <= 0: the default period); asserts
 * success. */
static inline void worker_limits_set(const char *account, const char *model, const char *kind,
                                     long long n, long long period_ms)
{
    char n_s[24], period_s[24];
    snprintf(n_s, sizeof(n_s), "%lld", n);
    snprintf(period_s, sizeof(period_s), "%lld", period_ms);
    const char *argv[] = {
        "llmq",   "limits", "set", model, kind, n_s, period_ms > 0 ? "--period-ms" : NULL,
        period_s, NULL};
    struct cli_run r = cli_run(account, argv);
    if (r.status != 0)
        fprintf(stderr, "limits set failed: %s\n", r.err);
    assert_int_equal(r.status, 0);
    cli_free(&r);
}

/* Jobs delivered to a worker and not yet acknowledged: XPENDING of the
 * queue of priority prio ("normal"; prefix "llmq:{account}:"); -1 on an
 * error. */
static inline long long worker_pending(redisContext *c, const char *prefix, const char *prio)
{
    char key[256];
    snprintf(key, sizeof(key), "%sq:%s", prefix, prio);
    redisReply *r = redisCommand(c, "XPENDING %s workers", key);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? r->element[0]->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* Jobs named by the entries of P events (prefix "llmq:{account}:"): an
 * entry names every job one settle call finished, as {id, state} pairs; -1
 * on an error. */
static inline long long worker_event_jobs(redisContext *c, const char *prefix)
{
    redisReply *r = redisCommand(c, "XRANGE %sevents - +", prefix);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? 0 : -1;
    for (size_t i = 0; n >= 0 && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        size_t pos = 0;
        while (e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
               llmq_redis_field_next(e->element[1], "id", &pos) != NULL)
            n++;
    }
    if (r)
        freeReplyObject(r);
    return n;
}

/* Stops n workers once their run is over instead of waiting out an idle
 * exit: waits until the entries of P events (prefix "llmq:{account}:") name
 * jobs jobs (every job of the run settled; timeout_ms is a deadline against
 * hanging, not a timing check), then sends each SIGTERM (nothing is in
 * flight: it exits at once) and asserts that each exits 0. On a timeout the
 * workers are killed before the assertion fails, so none outlives the test. */
static inline void worker_stop_n_when_settled(const char *prefix, long long jobs, const pid_t *pids,
                                              int n, long long timeout_ms)
{
    redisContext *c = llmq_test_redis_connect();
    long long deadline = llmq_test_now_ms() + timeout_ms, settled;
    while ((settled = worker_event_jobs(c, prefix)) < jobs && llmq_test_now_ms() < deadline)
        usleep(100000);
    redisFree(c);
    for (int i = 0; i < n; i++)
        kill(pids[i], settled >= jobs ? SIGTERM : SIGKILL);
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += worker_wait(pids[i], timeout_ms) == 0;
    if (settled < jobs)
        fprintf(stderr, "# %lld of %lld jobs settled within %lld ms\n", settled, jobs, timeout_ms);
    assert_true(settled >= jobs);
    assert_int_equal(ok, n);
}

/* An account for tests that call the scripts directly: a unique name, its
 * key prefix P ("llmq:{name}:") and a connection with the scripts loaded
 * (asserting). Close with redisFree(a->c). */
struct script_account {
    char name[64];
    char P[96];
    redisContext *c;
};

static inline void script_account_open(struct script_account *a, const char *tag)
{
    llmq_test_unique_name(a->name, sizeof(a->name), tag);
    snprintf(a->P, sizeof(a->P), "llmq:{%s}:", a->name);
    a->c = llmq_test_redis_connect();
    assert_non_null(a->c);
    assert_int_equal(llmq_script_load_all(a->c, NULL), LLMQ_OK);
}

/* Entries of queue stream key not yet delivered to the workers' group (its
 * lag in XINFO GROUPS); -1 when there is no such group or no lag. Settles
 * acknowledge entries without deleting them (the stream is trimmed now and
 * then), so XLEN is not what waits. */
static inline long long worker_group_lag(redisContext *c, const char *key)
{
    long long lag = -1;
    redisReply *r = redisCommand(c, "XINFO GROUPS %s", key);
    for (size_t g = 0; r && r->type == REDIS_REPLY_ARRAY && g < r->elements; g++) {
        const redisReply *info = r->element[g];
        int ours = 0;
        long long v = -1;
        for (size_t i = 0; info->type == REDIS_REPLY_ARRAY && i + 1 < info->elements; i += 2) {
            const redisReply *k = info->element[i], *val = info->element[i + 1];
            if (k->type != REDIS_REPLY_STRING)
                continue;
            if (strcmp(k->str, "name") == 0 && val->type == REDIS_REPLY_STRING)
                ours = strcmp(val->str, "workers") == 0;
            else if (strcmp(k->str, "lag") == 0 && val->type == REDIS_REPLY_INTEGER)
                v = val->integer;
        }
        if (ours)
            lag = v;
    }
    if (r)
        freeReplyObject(r);
    return lag;
}

/* An integer from a Redis command with up to two arguments (formatted like
 * redisCommand; b may be NULL when fmt takes one): llmq_test_redis_int. */
static inline long long redis_int(redisContext *c, const char *fmt, const char *a, const char *b)
{
    return llmq_test_redis_int(c, fmt, a, b);
}

/* A page fetched from a worker's admin endpoint. */
struct worker_page {
    long status; /* 0: unreachable */
    char *body;  /* new, NUL-terminated, never NULL */
    size_t len;
};

static inline size_t worker_page_on_data(char *p, size_t sz, size_t n, void *ud)
{
    struct worker_page *pg = ud;
    char *b = realloc(pg->body, pg->len + sz * n + 1);
    if (b == NULL)
        return 0;
    memcpy(b + pg->len, p, sz * n);
    pg->len += sz * n;
    b[pg->len] = '\0';
    pg->body = b;
    return sz * n;
}

/* GETs path from the worker's admin endpoint on port (free .body). */
static inline struct worker_page worker_http_get(int port, const char *path)
{
    struct worker_page pg = {0};
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, worker_page_on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &pg);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &pg.status);
    curl_easy_cleanup(c);
    if (pg.body == NULL)
        pg.body = strdup("");
    return pg;
}

/* Polls the worker's path on port until its body contains want (or
 * timeout_ms, a deadline against hanging, not a timing check). Returns the
 * last page (free .body). */
static inline struct worker_page worker_http_wait_for(int port, const char *path, const char *want,
                                                      long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    for (;;) {
        struct worker_page pg = worker_http_get(port, path);
        if (strstr(pg.body, want) != NULL || llmq_test_now_ms() >= deadline)
            return pg;
        free(pg.body);
        usleep(50000);
    }
}

/* Sum of the samples of metric name (exact family name, no suffix) whose
 * labels include account="account", in Prometheus text; -1 when none. */
static inline double worker_metric_sum(const char *text, const char *name, const char *account)
{
    char label[256];
    snprintf(label, sizeof(label), "account=\"%s\"", account);
    size_t nlen = strlen(name);
    double sum = -1;
    for (const char *p = text; p != NULL && *p != '\0';) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '{') {
            const char *close = memchr(p, '}', len);
            char labels[512];
            size_t ll = close ? (size_t)(close - p) : 0;
            snprintf(labels, sizeof(labels), "%.*s", (int)(ll < sizeof(labels) ? ll : 0), p);
            if (close != NULL && strstr(labels, label) != NULL)
                sum = (sum < 0 ? 0 : sum) + strtod(close + 1, NULL);
        }
        p = eol ? eol + 1 : NULL;
    }
    return sum;
}

/* Number of lines of the file at path containing needle. */
static inline int worker_log_count(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    int n = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, needle) != NULL;
    if (f != NULL)
        fclose(f);
    return n;
}

#endif
