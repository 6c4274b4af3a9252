/* Security checks of a whole run.
 *
 * 1. The API key never leaves the worker's memory except toward the API:
 *    after a run with faults (500s, 429s, resets, insufficient_quota, a 404),
 *    debug logs in JSON and `llmq enqueue --wait`, no Redis key name or value
 *    (strings, hashes, streams, sorted sets, lists, sets; and DUMP), no worker
 *    log line and no CLI output holds the key, any 8 characters of it in a
 *    row, or its full SHA-256 (a truncated SHA-256, the key id, is allowed). The API (openai-sim
 *    with --api-key) proves the key was sent.
 * 2. TLS verification is on by default: https:// to a plain-HTTP server and to
 *    a self-signed server fail the call with a TLS error; with --ca-file
 *    naming that certificate the handshake passes.
 * 3. A response over --max-response-bytes is cut and the job dead-lettered
 *    with response_too_big; a nonsense limit is a configuration error. */
#include <openssl/sha.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define JOBS 60

#define KEY_LEN 40
#define PIECE_LEN 8 /* any 8 characters of the key in a row count as a leak */
#define N_PIECES (KEY_LEN - PIECE_LEN + 1)

struct needles {
    char key[KEY_LEN + 1]; /* the whole key */
    char sha_full[65];     /* its full SHA-256 (hex) */
    char key_id[17];       /* the truncated SHA-256 the worker logs: allowed */
};

/* A key of random letters and digits: no run of 8 of its characters is
 * likely to occur by chance in anything llmq writes (62^-8 per position), so
 * every 8-character piece of it can be searched for. */
static void needles_init(struct needles *n)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned int seed = (unsigned int)getpid() * 2654435761u ^ (unsigned int)llmq_test_now_ms();
    for (int i = 0; i < KEY_LEN; i++)
        n->key[i] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
    n->key[KEY_LEN] = '\0';
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)n->key, strlen(n->key), md);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        snprintf(n->sha_full + 2 * i, 3, "%02x", md[i]);
    snprintf(n->key_id, sizeof(n->key_id), "%.16s", n->sha_full);
}

static int mem_has(const char *hay, size_t len, const char *needle, size_t n)
{
    for (size_t i = 0; n <= len && i + n <= len; i++)
        if (memcmp(hay + i, needle, n) == 0)
            return 1;
    return 0;
}

/* Counts leaks in buf (what names where it was found): any PIECE_LEN
 * characters of the key in a row, its full SHA-256, a Bearer header. */
static int scan(const struct needles *n, const char *buf, size_t len, const char *what)
{
    int found = 0;
    for (int i = 0; i < N_PIECES; i++) {
        if (mem_has(buf, len, n->key + i, PIECE_LEN)) {
            fprintf(stderr, "LEAK: %s holds characters %d..%d of the key\n", what, i,
                    i + PIECE_LEN - 1);
            found++;
        }
    }
    const char *bad[] = {n->sha_full, "Bearer "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (mem_has(buf, len, bad[i], strlen(bad[i]))) {
            fprintf(stderr, "LEAK: %s holds %s\n", what,
                    i == 0 ? "the key's full SHA-256" : "an Authorization header");
            found++;
        }
    }
    return found;
}

/* Scans every element of a reply (recursively). */
static int scan_reply(const struct needles *n, const redisReply *r, const char *what)
{
    if (r == NULL)
        return 0;
    int found = 0;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR)
        found += scan(n, r->str, r->len, what);
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        found += scan_reply(n, r->element[i], what);
    return found;
}

/* A stream's consumer groups and their consumers (names, pending entries). */
static int scan_stream_groups(const struct needles *n, redisContext *c, const char *k, size_t klen)
{
    redisReply *g = redisCommand(c, "XINFO GROUPS %b", k, klen);
    int found = scan_reply(n, g, "a stream's consumer groups");
    for (size_t i = 0; g != NULL && g->type == REDIS_REPLY_ARRAY && i < g->elements; i++) {
        const redisReply *gi = g->element[i];
        for (size_t f = 0; gi->type == REDIS_REPLY_ARRAY && f + 1 < gi->elements; f += 2) {
            if (strcmp(gi->element[f]->str, "name") != 0)
                continue;
            redisReply *cs =
                redisCommand(c, "XINFO CONSUMERS %b %s", k, klen, gi->element[f + 1]->str);
            found += scan_reply(n, cs, "a stream's consumers");
            freeReplyObject(cs);
        }
    }
    freeReplyObject(g);
    return found;
}

/* Every key of the (private) server, by name, value and DUMP. Returns leaks;
 * *keys gets the number of keys read. */
static int scan_redis(const struct needles *n, redisContext *c, long long *keys)
{
    int found = 0;
    char cursor[32] = "0";
    *keys = 0;
    do {
        redisReply *r = redisCommand(c, "SCAN %s COUNT 1000", cursor);
        assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        redisReply *ks = r->element[1];
        for (size_t i = 0; i < ks->elements; i++) {
            const char *k = ks->element[i]->str;
            size_t klen = ks->element[i]->len;
            (*keys)++;
            found += scan(n, k, klen, "a key name");
            redisReply *t = redisCommand(c, "TYPE %b", k, klen);
            const char *type = t && t->type == REDIS_REPLY_STATUS ? t->str : "";
            redisReply *v = NULL;
            if (strcmp(type, "string") == 0)
                v = redisCommand(c, "GET %b", k, klen);
            else if (strcmp(type, "hash") == 0)
                v = redisCommand(c, "HGETALL %b", k, klen);
            else if (strcmp(type, "stream") == 0) {
                v = redisCommand(c, "XRANGE %b - +", k, klen);
                found += scan_stream_groups(n, c, k, klen);
            } else if (strcmp(type, "zset") == 0)
                v = redisCommand(c, "ZRANGE %b 0 -1 WITHSCORES", k, klen);
            else if (strcmp(type, "list") == 0)
                v = redisCommand(c, "LRANGE %b 0 -1", k, klen);
            else if (strcmp(type, "set") == 0)
                v = redisCommand(c, "SMEMBERS %b", k, klen);
            else
                fprintf(stderr, "note: key of type %s not read by value\n", type);
            found += scan_reply(n, v, type);
            if (v != NULL)
                freeReplyObject(v);
            redisReply *d = redisCommand(c, "DUMP %b", k, klen);
            found += scan_reply(n, d, "a DUMP");
            if (d != NULL)
                freeReplyObject(d);
            if (t != NULL)
                freeReplyObject(t);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    /* Stream consumer groups and consumers carry names too. */
    redisReply *info = redisCommand(c, "INFO keyspace");
    found += scan_reply(n, info, "INFO");
    freeReplyObject(info);
    return found;
}

static int scan_file(const struct needles *n, const char *path, const char *what)
{
    char *s = cli_slurp(path);
    int found = scan(n, s, strlen(s), what);
    free(s);
    return found;
}

static void test_key_is_nowhere(void **state)
{
    (void)state;
    struct needles nd;
    needles_init(&nd);
    char account[64], jobs[128], log[128], keyfile[128];
    llmq_test_unique_name(account, sizeof(account), "secure");
    snprintf(keyfile, sizeof(keyfile), "/tmp/llmq-secure-%d.key", (int)getpid());
    FILE *f = fopen(keyfile, "w");
    fprintf(f, "%s\n", nd.key);
    fclose(f);
    struct sim_proc sim;
    const char *sim_args[] = {"--api-key",
                              nd.key,
                              "--models",
                              "gpt-4o-mini",
                              "--fail-500",
                              "8",
                              "--spurious-429",
                              "5",
                              "--spurious-retry-ms",
                              "100",
                              "--reset",
                              "3",
                              "--insufficient-quota",
                              "3",
                              "--seed",
                              "5",
                              NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-secure-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "s", JOBS, "gpt-4o-mini", 20, "{\"max_attempts\":6}");
    f = fopen(jobs, "a");
    fprintf(f, "{\"custom_id\":\"s-404\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
               "\"body\":{\"model\":\"gpt-nope\",\"messages\":[{\"role\":\"user\",\"content\":"
               "\"hi\"}]}}\n");
    fclose(f);

    /* The producer waits for the results while the worker runs. */
    const char *enq[] = {"llmq", "enqueue", jobs, "--wait", NULL};
    pid_t cli = cli_start(account, enq);
    snprintf(log, sizeof(log), "/tmp/llmq-secure-%d.log", (int)getpid());
    const char *args[] = {"--account",
                          account,
                          "--api-key-file",
                          keyfile,
                          "--log-format",
                          "json",
                          "--log-level",
                          "debug",
                          "--backoff-base-ms",
                          "20",
                          "--backoff-cap-ms",
                          "200",
                          "--exit-when-idle-ms",
                          "1500",
                          NULL};
    pid_t w = worker_start(account, &sim, log, args);
    struct cli_run out = cli_finish(cli);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    printf("# enqueue --wait exit %d, %zu output lines\n", out.status, cli_count_lines(out.out));
    assert_true(out.status == 0 || out.status == 3); /* 3: some job was dead-lettered */
    assert_true(cli_count_lines(out.out) >= JOBS + 1);

    /* The API saw the key: every request was authorised (no 401). */
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int unauthorized = 0, ok = 0;
    for (size_t i = 0; i < n; i++) {
        unauthorized += strcmp(e[i].outcome, "unauthorized") == 0;
        ok += strcmp(e[i].outcome, "ok") == 0;
    }
    free(e);
    assert_int_equal(unauthorized, 0);
    assert_true(ok > 0);

    int leaks = 0;
    leaks += scan(&nd, out.out, strlen(out.out), "enqueue --wait stdout");
    leaks += scan(&nd, out.err, strlen(out.err), "enqueue --wait stderr");
    cli_free(&out);
    static const char *const views[][5] = {{"llmq", "status", "--json", NULL},
                                           {"llmq", "results", "--all", NULL},
                                           {"llmq", "dead", "list", "--json", NULL},
                                           {"llmq", "limits", "get", "--json", NULL},
                                           {"llmq", "settings", "get", NULL}};
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
        struct cli_run v = cli_run(account, views[i]);
        leaks += scan(&nd, v.out, strlen(v.out), views[i][1]);
        leaks += scan(&nd, v.err, strlen(v.err), views[i][1]);
        cli_free(&v);
    }
    leaks += scan_file(&nd, log, "the worker's log");
    /* The log identifies the key by its truncated SHA-256 only. */
    char *logtext = cli_slurp(log);
    assert_true(strstr(logtext, nd.key_id) != NULL);
    assert_non_null(strstr(logtext, "\"level\":\"debug\""));
    free(logtext);

    redisContext *c = llmq_test_redis_connect();
    long long keys = 0;
    leaks += scan_redis(&nd, c, &keys);
    redisFree(c);
    printf("# scanned %lld redis keys, the worker log, 6 CLI outputs: %d leaks\n", keys, leaks);
    assert_true(keys > JOBS);
    assert_int_equal(leaks, 0);

    unlink(jobs);
    unlink(log);
    unlink(keyfile);
}

/* Runs one job (max 1 attempt, max_tokens) through a worker whose base URL is base_url
 * (plus extra args, may be NULL); returns its dead-letter reason (new), or
 * NULL when it did not die. */
static char *run_one(const char *base_url, int max_tokens, const char *extra1, const char *extra2)
{
    char account[64], jobs[128], log[128], key[256];
    llmq_test_unique_name(account, sizeof(account), "tls");
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-tls-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "t", 1, "gpt-4o-mini", max_tokens, "{\"max_attempts\":1}");
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-tls-%d.log", (int)getpid());
    struct sim_proc none = {0};
    const char *args[] = {"--base-url", base_url, "--timeout-ms", "2000", "--exit-when-idle-ms",
                          "1000",       extra1,   extra2,         NULL};
    pid_t w = worker_start(account, &none, log, args);
    assert_int_equal(worker_wait(w, 30000), 0);
    redisContext *c = llmq_test_redis_connect();
    snprintf(key, sizeof(key), "llmq:{%s}:job:t-0", account);
    redisReply *r = redisCommand(c, "HMGET %s state last_error", key);
    char *reason = NULL;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(r->element[0]->str, "dead") == 0 && r->element[1]->type == REDIS_REPLY_STRING)
        reason = strdup(r->element[1]->str);
    freeReplyObject(r);
    redisFree(c);
    unlink(jobs);
    unlink(log);
    printf("# %s%s%s: %s\n", base_url, extra1 ? " " : "", extra1 ? extra1 : "",
           reason ? reason : "(not dead)");
    return reason;
}

static void test_tls_verified_by_default(void **state)
{
    (void)state;
    /* https:// to a plain-HTTP server: the handshake never completes (the
     * server waits for a request line it never gets: a connect timeout) or
     * fails; no request reaches the API. */
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    char url[128];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1", sim.port);
    char *reason = run_one(url, 20, NULL, NULL);
    int sim_rc = sim_proc_stop(&sim);
    assert_non_null(reason);
    assert_true(strstr(reason, "tls") != NULL || strstr(reason, "Connection timed out") != NULL ||
                strstr(reason, "connect") != NULL);
    free(reason);
    assert_int_equal(sim_rc, 0);
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    for (size_t i = 0; i < n; i++)
        assert_string_not_equal(e[i].outcome, "ok");
    free(e);

    /* A self-signed server: verification fails unless --ca-file names it. */
    char cert[128], pkey[128], port_s[16];
    snprintf(cert, sizeof(cert), "/tmp/llmq-tls-%d-cert.pem", (int)getpid());
    snprintf(pkey, sizeof(pkey), "/tmp/llmq-tls-%d-key.pem", (int)getpid());
    char cmdline[1024];
    snprintf(cmdline, sizeof(cmdline),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -days 1 -keyout %s "
             "-out %s >/dev/null 2>&1",
             pkey, cert);
    if (system(cmdline) != 0)
        fail_msg("the openssl tool could not make a certificate (scripts/bootstrap installs "
                 "openssl)");
    int port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", port);
    pid_t srv = llmq_test_fork();
    if (srv == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execlp("openssl", "openssl", "s_server", "-accept", port_s, "-cert", cert, "-key", pkey,
               "-www", "-quiet", (char *)NULL);
        _exit(127);
    }
    usleep(300000);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1", port);
    reason = run_one(url, 20, NULL, NULL);
    int verify_failed =
        reason != NULL && strstr(reason, "tls") != NULL && strstr(reason, "certificate") != NULL;
    if (!verify_failed)
        kill(srv, SIGTERM);
    assert_true(verify_failed);
    assert_non_null(strstr(reason, "certificate"));
    free(reason);
    /* Trusted through --ca-file: the handshake passes (that server never
     * answers HTTP, so the call times out instead). */
    reason = run_one(url, 20, "--ca-file", cert);
    kill(srv, SIGTERM);
    waitpid(srv, NULL, 0);
    assert_non_null(reason);
    assert_null(strstr(reason, "certificate"));
    assert_null(strstr(reason, "tls"));
    free(reason);
    unlink(cert);
    unlink(pkey);
}

static void test_response_size_limit(void **state)
{
    (void)state;
    struct sim_proc sim;
    const char *sim_args[] = {"--completion-tokens", "600:600", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", sim.port);
    char *reason = run_one(url, 600, "--max-response-bytes", "1024");
    int sim_rc = sim_proc_stop(&sim);
    assert_non_null(reason);
    assert_string_equal(reason, "response_too_big");
    free(reason);
    assert_int_equal(sim_rc, 0);
    /* Nonsense limits are configuration errors (exit 2). */
    struct sim_proc none = {0};
    const char *bad[] = {"--max-response-bytes", "12", NULL};
    pid_t w = worker_start("x", &none, "/dev/null", bad);
    assert_int_equal(worker_wait(w, 10000), 2);
}

/* A private redis-server: the scan reads every key, so no other test's. */
static struct llmq_test_redis private_redis;

static int group_setup(void **state)
{
    (void)state;
    if (llmq_test_redis_start(&private_redis, NULL) != 0)
        return -1;
    setenv("LLMQ_TEST_REDIS_URL", private_redis.url, 1);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    llmq_test_redis_stop(&private_redis);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_is_nowhere),
        cmocka_unit_test(test_tls_verified_by_default),
        cmocka_unit_test(test_response_size_limit),
    };
    return cmocka_run_group_tests_name("security_no_key_leak", tests, group_setup, group_teardown);
}
