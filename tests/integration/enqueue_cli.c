/* llmq enqueue, end to end: every rejection of the bad-input corpus writes
 * nothing and names its line; the valid corpus goes in; --skip-invalid;
 * re-enqueueing queued, running or done ids; --wait streaming results while
 * a stand-in worker ends the jobs (exit 3 when some died); --help everywhere. */
#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs_cli_run.h"
#include "jobs_fake_worker.h"
#include "redis/redis.h"
#include "data_files.h"
#include "job_fields.h"
#include "testsupport.h"

static long long keys_of(redisContext *c, const char *account)
{
    redisReply *r = redisCommand(c, "KEYS llmq:{%s}:*", account);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    freeReplyObject(r);
    return n;
}

/* Jobs waiting in priority prio's queues (P backlog:<prio>, common/redis/keys.h). */
static long long xlen(redisContext *c, const char *prefix, const char *prio)
{
    redisReply *r = redisCommand(c, "LLEN %sbacklog:%s", prefix, prio);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

static void check_invalid(redisContext *c, const char *dir, const char *name)
{
    char path[2048], expect_path[2048], expect[512] = "", args[256] = "", account[96];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(expect_path, sizeof(expect_path), "%s/%.*s.expect", dir,
             (int)(strlen(name) - strlen(".jsonl")), name);
    FILE *f = fopen(expect_path, "r");
    assert_non_null(f);
    assert_non_null(fgets(expect, sizeof(expect), f));
    if (fgets(args, sizeof(args), f) == NULL)
        args[0] = '\0';
    fclose(f);
    expect[strcspn(expect, "\r\n")] = '\0';
    args[strcspn(args, "\r\n")] = '\0';
    char *tab = strchr(expect, '\t');
    *tab = '\0';
    char where[sizeof(path) + sizeof(expect) + 4]; /* "<path>:<line>: " always fits */
    snprintf(where, sizeof(where), "%s:%s: ", path, expect);
    llmq_test_unique_name(account, sizeof(account), "einv");
    char *space = strchr(args, ' ');
    if (space != NULL)
        *space = '\0';
    const char *argv[] = {"llmq", "enqueue", path, args[0] ? args : NULL, space ? space + 1 : NULL,
                          NULL};
    struct cli_run r = cli_run(account, argv);
    if (r.status != 2 || !strstr(r.err, where) || !strstr(r.err, tab + 1) ||
        !strstr(r.err, "nothing enqueued") || r.out[0] != '\0')
        fail_msg("%s: status %d, stderr:\n%s\nwanted '%s' and '%s'", name, r.status, r.err, where,
                 tab + 1);
    assert_int_equal(keys_of(c, account), 0);
    cli_free(&r);
}

static void test_invalid_corpus_writes_nothing(void **state)
{
    (void)state;
    redisContext *c = llmq_test_redis_connect();
    struct llmq_test_files f;
    llmq_test_data_files(&f, "batch/invalid", ".jsonl");
    for (size_t i = 0; i < f.n; i++)
        check_invalid(c, f.dir, f.names[i]);
    assert_true(f.n >= 20);
    llmq_test_files_free(&f);
    redisFree(c);
}

/* Lines of path holding something besides blanks (enqueue skips the rest). */
static long long content_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[65536];
    long long n = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += line[strspn(line, " \t\r\n")] != '\0';
    fclose(f);
    return n;
}

/* Jobs of account in Redis: records (waiting, never taken) and hashes. */
static long long jobs_of(redisContext *c, const char *account)
{
    long long n = 0;
    const char *kinds[] = {"jr", "job"};
    for (int k = 0; k < 2; k++) {
        redisReply *r = redisCommand(c, "KEYS llmq:{%s}:%s:*", account, kinds[k]);
        n = r && r->type == REDIS_REPLY_ARRAY && n >= 0 ? n + (long long)r->elements : -1;
        freeReplyObject(r);
    }
    return n;
}

static void test_valid_corpus(void **state)
{
    (void)state;
    char account[96];
    redisContext *c = llmq_test_redis_connect();
    struct llmq_test_files f;
    llmq_test_data_files(&f, "batch/valid", NULL);
    for (size_t i = 0; i < f.n; i++) {
        const char *path = f.paths[i];
        long long lines = content_lines(path);
        llmq_test_unique_name(account, sizeof(account), "evalid");
        const char *argv[] = {"llmq", "enqueue", "--quiet", path, NULL};
        struct cli_run r = cli_run(account, argv);
        /* Every line went in: the count printed and the jobs in Redis. */
        if (r.status != 0 || lines < 1 || strtoll(r.out, NULL, 10) != lines ||
            jobs_of(c, account) != lines)
            fail_msg("%s: %lld lines; status %d, out '%s', %lld jobs in redis, err '%s'",
                     f.names[i], lines, r.status, r.out, jobs_of(c, account), r.err);
        cli_free(&r);
    }
    assert_true(f.n >= 10);
    llmq_test_files_free(&f);
    redisFree(c);
}

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/llmq-enqueue-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

#define CHAT(id)                                                                                   \
    "{\"custom_id\":\"" id "\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","              \
    "\"body\":{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\","                        \
    "\"content\":\"hi\"}]}}\n"

static void test_skip_invalid(void **state)
{
    (void)state;
    char account[96], prefix[128];
    llmq_test_unique_name(account, sizeof(account), "eskip");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    char *path = write_temp(CHAT("s1") "{oops\n" CHAT("s2") CHAT("s1"));
    const char *argv[] = {"llmq", "enqueue", "--skip-invalid", path, NULL};
    struct cli_run r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "s1\ns2\n");
    assert_non_null(strstr(r.err, ":2: bad JSON"));
    assert_non_null(strstr(r.err, ":4: duplicate custom_id \"s1\" (first on line 1)"));
    assert_non_null(strstr(r.err, "2 enqueued, 0 already present, 2 invalid"));
    cli_free(&r);
    redisContext *c = llmq_test_redis_connect();
    assert_int_equal(xlen(c, prefix, "normal"), 2);
    redisFree(c);
    unlink(path);
    free(path);
}

static void test_reenqueue_reports(void **state)
{
    (void)state;
    char account[96], prefix[128];
    llmq_test_unique_name(account, sizeof(account), "eidem");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    char *path = write_temp(CHAT("q1") CHAT("r1") CHAT("d1") CHAT("x1"));
    const char *argv[] = {"llmq", "enqueue", path, NULL};
    struct cli_run r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 4);
    cli_free(&r);
    redisContext *c = llmq_test_redis_connect();
    /* r1 as a worker holds it: no record any more, a hash that says running */
    freeReplyObject(redisCommand(c, "DEL %sjr:r1", prefix));
    freeReplyObject(redisCommand(c, "HSET %sjob:r1 state running", prefix));
    assert_int_equal(fake_worker_finish(c, prefix, "d1", 0), 1);
    assert_int_equal(fake_worker_finish(c, prefix, "x1", 0), 1);
    /* x1: only a result an older version wrote is left (docs/upgrading.md) */
    freeReplyObject(redisCommand(c, "DEL %sjob:x1", prefix));
    freeReplyObject(redisCommand(c, "SET %sres:x1 {}", prefix));
    r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "job q1 already exists (queued)"));
    assert_non_null(strstr(r.err, "job r1 already exists (running)"));
    assert_non_null(strstr(r.err, "job d1 already exists (done)"));
    assert_non_null(strstr(r.err, "job x1 already exists (done)"));
    assert_non_null(strstr(r.err, "0 enqueued, 4 already present"));
    assert_int_equal(xlen(c, prefix, "normal"), 4);
    cli_free(&r);
    redisFree(c);
    unlink(path);
    free(path);
}

/* A line without custom_id is rejected (it would run again on every re-run
 * of the file); --generate-ids accepts it with a generated id, and then a
 * second run does enqueue it again, as the help says. */
static void test_generate_ids(void **state)
{
    (void)state;
    char account[96], prefix[128], path[1024];
    llmq_test_unique_name(account, sizeof(account), "egen");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    llmq_test_source_path(path, sizeof(path), "tests/data/batch/invalid/no_custom_id.jsonl");
    const char *plain[] = {"llmq", "enqueue", path, NULL};
    struct cli_run r = cli_run(account, plain);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, ":1: missing \"custom_id\""));
    assert_non_null(strstr(r.err, "--generate-ids"));
    cli_free(&r);
    const char *gen[] = {"llmq", "enqueue", "--generate-ids", path, NULL};
    r = cli_run(account, gen);
    assert_int_equal(r.status, 0);
    assert_int_equal(strncmp(r.out, "job-", 4), 0);
    assert_int_equal(cli_count_lines(r.out), 1);
    cli_free(&r);
    r = cli_run(account, gen);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    redisContext *c = llmq_test_redis_connect();
    assert_int_equal(xlen(c, prefix, "normal"), 2);
    redisFree(c);
}

/* Runs `llmq enqueue --wait` on n jobs while the stand-in worker ends them,
 * every dead_every-th as dead. Returns the finished run. */
static struct cli_run wait_run(const char *account, const char *prefix, int n, long dead_every,
                               const char *out_path)
{
    char *text = calloc((size_t)n, 256), *p = text;
    for (int i = 0; i < n; i++)
        p += snprintf(p, 256,
                      "{\"custom_id\":\"w%d\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":"
                      "\"text-embedding-3-small\",\"input\":\"x %d\"}}\n",
                      i, i);
    char *path = write_temp(text);
    const char *argv[] = {"llmq",     "enqueue", "--wait", "--timeout", "60",
                          "--output", out_path,  path,     NULL};
    pid_t pid = cli_start(account, argv);
    redisContext *c = llmq_test_redis_connect();
    long ended = 0;
    long long t0 = llmq_test_now_ms();
    while (ended < n && llmq_test_now_ms() - t0 < 30000) {
        long got = fake_worker_run(c, prefix, 7, 200, dead_every);
        assert_true(got >= 0);
        ended += got;
        usleep(50 * 1000); /* let the waiter see results arrive over time */
    }
    assert_int_equal(ended, n);
    redisFree(c);
    unlink(path);
    free(path);
    free(text);
    return cli_finish(pid);
}

static void check_output(const char *out_path, int n, int n_dead)
{
    char *out = cli_slurp(out_path);
    assert_int_equal(cli_count_lines(out), n);
    int dead = 0;
    for (char *line = out, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        json_t *o = json_loadb(line, (size_t)(nl - line), 0, NULL);
        assert_non_null(o);
        assert_true(json_is_string(json_object_get(o, "custom_id")));
        assert_true(json_is_string(json_object_get(o, "id")));
        assert_non_null(json_object_get(o, "response"));
        dead += json_is_object(json_object_get(o, "error"));
        json_decref(o);
    }
    assert_int_equal(dead, n_dead);
    free(out);
}

static void test_wait_streams_results(void **state)
{
    (void)state;
    char account[96], prefix[128], out_path[] = "/tmp/llmq-wait-XXXXXX";
    close(mkstemp(out_path));
    llmq_test_unique_name(account, sizeof(account), "ewait");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    struct cli_run r = wait_run(account, prefix, 30, 0, out_path);
    if (r.status != 0)
        fail_msg("status %d: %s", r.status, r.err);
    /* the final line once (it was printed twice) */
    const char *fin = strstr(r.err, "progress: 30/30 done (0 dead)");
    assert_non_null(fin);
    if (strstr(fin + 1, "progress: 30/30 done") != NULL)
        fail_msg("the final progress line is printed twice:\n%s", r.err);
    check_output(out_path, 30, 0);
    cli_free(&r);

    llmq_test_unique_name(account, sizeof(account), "ewaitdead");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    r = wait_run(account, prefix, 20, 5, out_path);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.err, "4 of 20 job(s) were dead-lettered"));
    check_output(out_path, 20, 4);
    cli_free(&r);
    unlink(out_path);
}

/* A re-run with --quiet tells counts and the first few duplicates, not a
 * line per job (a re-run of a big file drowned the terminal). */
static void test_quiet_rerun_is_short(void **state)
{
    (void)state;
    char account[96];
    llmq_test_unique_name(account, sizeof(account), "equiet");
    char *text = calloc(40, 256), *p = text;
    for (int i = 0; i < 40; i++)
        p += snprintf(p, 256,
                      "{\"custom_id\":\"qd%d\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":"
                      "\"text-embedding-3-small\",\"input\":\"x\"}}\n",
                      i);
    char *path = write_temp(text);
    const char *argv[] = {"llmq", "enqueue", "--quiet", path, NULL};
    struct cli_run r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "40\n");
    cli_free(&r);
    r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "0\n");
    size_t dup_lines = 0;
    for (const char *s = r.err; (s = strstr(s, "already exists")) != NULL; s++)
        dup_lines++;
    if (dup_lines != 5 || !strstr(r.err, "qd0 already exists (queued)") ||
        !strstr(r.err, "... and 35 more already present") ||
        !strstr(r.err, "0 enqueued, 40 already present"))
        fail_msg("%zu duplicate lines; stderr:\n%s", dup_lines, r.err);
    cli_free(&r);
    unlink(path);
    free(path);
    free(text);
}

/* An empty file (or one of blank lines) writes nothing at all: no streams,
 * no keys. */
static void test_empty_file_writes_nothing(void **state)
{
    (void)state;
    char account[96];
    llmq_test_unique_name(account, sizeof(account), "eempty");
    char *path = write_temp("\n  \n");
    const char *argv[] = {"llmq", "enqueue", path, NULL};
    struct cli_run r = cli_run(account, argv);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "0 enqueued, 0 already present, 0 invalid"));
    cli_free(&r);
    const char *wait[] = {"llmq", "enqueue", "--wait", path, NULL};
    r = cli_run(account, wait);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    redisContext *c = llmq_test_redis_connect();
    assert_int_equal(keys_of(c, account), 0);
    redisFree(c);
    unlink(path);
    free(path);
}

#define EMB_FMT                                                                                    \
    "{\"custom_id\":\"t%d\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":"                       \
    "\"text-embedding-3-small\",\"input\":\"x\"}}\n"

#define EMB(id)                                                                                    \
    "{\"custom_id\":\"" id "\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":"                    \
    "\"text-embedding-3-small\",\"input\":\"x\"}}\n"

/* The custom_id of output line line (new), or NULL. */
static char *line_custom_id(const char *line)
{
    json_t *o = json_loads(line, 0, NULL);
    const char *s = json_string_value(json_object_get(o, "custom_id"));
    char *id = s ? strdup(s) : NULL;
    json_decref(o);
    return id;
}

/* custom_ids OpenAI takes (spaces, '/', '|', braces, '%') go in, are printed
 * as given, end (done through the C output line, expired through dispatch's
 * Lua one) and are read back by `llmq results` and `llmq dead list` under
 * the same custom_id; the keys hold the escaped id. */
static void test_custom_ids_as_openai(void **state)
{
    (void)state;
    char account[96], prefix[128];
    llmq_test_unique_name(account, sizeof(account), "ecid");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    char *path = write_temp(EMB("has space") EMB("a/b|c") EMB("100%") EMB("%41"));
    const char *argv[] = {"llmq", "enqueue", path, NULL};
    struct cli_run r = cli_run(account, argv);
    if (r.status != 0)
        fail_msg("status %d: %s", r.status, r.err);
    assert_string_equal(r.out, "has space\na/b|c\n100%\n%41\n");
    cli_free(&r);
    redisContext *c = llmq_test_redis_connect();
    assert_int_equal(llmq_test_job_exists(c, prefix, "has%20space"), 1);
    assert_int_equal(llmq_test_job_exists(c, prefix, "a%2Fb%7Cc"), 1);
    assert_int_equal(llmq_test_job_exists(c, prefix, "%2541"), 1);
    assert_int_equal(fake_worker_run(c, prefix, 10, 2000, 0), 4);
    const char *res[] = {"llmq", "results", "has space", "a/b|c", "100%", "%41", NULL};
    r = cli_run(account, res);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 4);
    const char *want[] = {"has space", "a/b|c", "100%", "%41"};
    char *line = r.out;
    for (int i = 0; i < 4; i++) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        char *got = line_custom_id(line);
        if (got == NULL || strcmp(got, want[i]) != 0)
            fail_msg("line %d: custom_id '%s', want '%s': %s", i, got ? got : "(none)", want[i],
                     line);
        free(got);
        line = nl + 1;
    }
    cli_free(&r);
    r = cli_run(account, argv); /* the same ids again: duplicates, named as given */
    assert_non_null(strstr(r.err, "job a/b|c already exists (done)"));
    assert_non_null(strstr(r.err, "0 enqueued, 4 already present"));
    cli_free(&r);
    unlink(path);
    free(path);
    /* ended by dispatch (past its deadline): the Lua output line */
    path = write_temp(EMB("late one/x"));
    const char *late[] = {"llmq", "enqueue", "--ttl-ms", "1", path, NULL};
    r = cli_run(account, late);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    usleep(20 * 1000);
    assert_int_equal(fake_worker_run(c, prefix, 10, 0, 0), 0);
    const char *res_late[] = {"llmq", "results", "late one/x", NULL};
    r = cli_run(account, res_late);
    assert_int_equal(r.status, 3); /* its one job is dead */
    char *got = line_custom_id(r.out);
    assert_non_null(got);
    assert_string_equal(got, "late one/x");
    free(got);
    assert_non_null(strstr(r.out, "\"expired\""));
    cli_free(&r);
    const char *dead[] = {"llmq", "dead", "list", "--json", NULL};
    r = cli_run(account, dead);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"id\":\"late one/x\""));
    cli_free(&r);
    redisFree(c);
    unlink(path);
    free(path);
}

/* Polls the stderr file of the CLI run pid until it holds what (30 s at
 * most); returns 1 when it does. */
static int await_stderr(pid_t pid, const char *what)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/llmq-cli-%d.err", (int)pid);
    for (int i = 0; i < 3000; i++) {
        char *s = cli_slurp(path);
        int found = strstr(s, what) != NULL;
        free(s);
        if (found)
            return 1;
        usleep(10 * 1000);
    }
    return 0;
}

/* Says a worker consumes the account (its heartbeat), as the first dispatch
 * of a worker would. */
static void worker_seen(redisContext *c, const char *prefix)
{
    redisReply *t = redisCommand(c, "TIME");
    long long now = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    freeReplyObject(redisCommand(c, "HSET %sworkers fake-worker %lld", prefix, now));
}

/* The ETA of the wait comes from the limits before anything ended: 30 jobs
 * under 600 requests a minute take at least 3 s (it said "ETA ?"). */
static void test_wait_eta_from_limits(void **state)
{
    (void)state;
    char account[96], prefix[128];
    llmq_test_unique_name(account, sizeof(account), "eeta");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    const char *limit[] = {"llmq", "limits", "set", "text-embedding-3-small", "--rpm", "600", NULL};
    struct cli_run r = cli_run(account, limit);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    redisContext *c = llmq_test_redis_connect();
    worker_seen(c, prefix);
    char *text = calloc(30, 256), *p = text;
    for (int i = 0; i < 30; i++)
        p += snprintf(p, 256, EMB_FMT, i);
    char *path = write_temp(text);
    const char *argv[] = {"llmq",     "enqueue",   "--wait", "--timeout", "60",
                          "--output", "/dev/null", path,     NULL};
    pid_t pid = cli_start(account, argv);
    int first = await_stderr(pid, "progress: 0/30 done");
    long ended = 0;
    for (int tries = 0; ended < 30 && tries < 300; tries++) {
        worker_seen(c, prefix);
        long got = fake_worker_run(c, prefix, 30, 100, 0);
        assert_true(got >= 0);
        ended += got;
    }
    r = cli_finish(pid);
    assert_true(first);
    assert_int_equal(r.status, 0);
    if (!strstr(r.err, "progress: 0/30 done (0 dead), 30 queued, 0 running, 0.0 jobs/s, 0 429s, "
                       "ETA 3s\n"))
        fail_msg("no ETA from the limits:\n%s", r.err);
    cli_free(&r);
    redisFree(c);
    unlink(path);
    free(path);
    free(text);
}

/* On a terminal (a pty from script(1)) the progress is a bar redrawn in
 * place, ending in a full bar on its own line. */
static void test_wait_bar_on_a_terminal(void **state)
{
    (void)state;
    char account[96], prefix[128], cmd[1024], out[] = "/tmp/llmq-pty-XXXXXX";
    close(mkstemp(out));
    llmq_test_unique_name(account, sizeof(account), "etty");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    char *text = calloc(5, 256), *p = text;
    for (int i = 0; i < 5; i++)
        p += snprintf(p, 256, EMB_FMT, i);
    char *path = write_temp(text);
    snprintf(cmd, sizeof(cmd), "%s enqueue --wait --timeout 60 %s", llmq_test_bin("llmq", 0), path);
    redisContext *c = llmq_test_redis_connect();
    worker_seen(c, prefix);
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_TRUNC);
        dup2(fo, 1);
        dup2(fo, 2);
        setenv("LLMQ_REDIS_URL", llmq_test_redis_url(), 1);
        setenv("LLMQ_ACCOUNT", account, 1);
        execlp("script", "script", "-q", "-e", "-c", cmd, "/dev/null", (char *)NULL);
        _exit(127);
    }
    long ended = 0;
    for (int tries = 0; ended < 5 && tries < 300; tries++) {
        worker_seen(c, prefix);
        long got = fake_worker_run(c, prefix, 1, 200, 0);
        assert_true(got >= 0);
        ended += got;
        usleep(300 * 1000); /* one at a time: the bar is redrawn between */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char *tty = cli_slurp(out);
    if (!strstr(tty, "\r\033[K[#########################] 5/5 done") &&
        !strstr(tty, "\r\033[K[########################] 5/5 done"))
        fail_msg("no full bar redrawn in place:\n%s", tty);
    assert_non_null(strstr(tty, "\r\033[K[........................] 0/5 done"));
    assert_null(strstr(tty, "progress: ")); /* no plain lines on a terminal */
    free(tty);
    redisFree(c);
    unlink(out);
    unlink(path);
    free(path);
    free(text);
}

static void test_help_everywhere(void **state)
{
    (void)state;
    const char *cmds[] = {"enqueue", "status", "results", "dead", "settings"};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        const char *argv[] = {"llmq", cmds[i], "--help", NULL};
        struct cli_run r = cli_run("default", argv);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "usage: llmq"));
        assert_non_null(strstr(r.out, "Exit"));
        cli_free(&r);
    }
    const char *v[] = {"llmq", "--version", NULL};
    struct cli_run r = cli_run("default", v);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "llmq "));
    cli_free(&r);
    const char *bad[] = {"llmq", "enqueue", "--priority", "urgent", "x.jsonl", NULL};
    r = cli_run("default", bad);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--priority"));
    cli_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_corpus_writes_nothing),
        cmocka_unit_test(test_valid_corpus),
        cmocka_unit_test(test_skip_invalid),
        cmocka_unit_test(test_reenqueue_reports),
        cmocka_unit_test(test_generate_ids),
        cmocka_unit_test(test_wait_streams_results),
        cmocka_unit_test(test_quiet_rerun_is_short),
        cmocka_unit_test(test_empty_file_writes_nothing),
        cmocka_unit_test(test_custom_ids_as_openai),
        cmocka_unit_test(test_wait_eta_from_limits),
        cmocka_unit_test(test_wait_bar_on_a_terminal),
        cmocka_unit_test(test_help_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
