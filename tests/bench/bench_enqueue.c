/* Enqueue throughput against raw XADD.
 *
 * usage: bench_enqueue [N] [REDIS_URL]
 * Without a URL a private redis-server is started on a free port (a URL's
 * database is FLUSHDB'd between repetitions: give a scratch one). Three runs
 * on one connection, same process, same data:
 *   raw XADD     pipelined XADD of entries holding the same fields and bytes
 *                as a job hash (the redis-benchmark-style baseline)
 *   push only    lua/enqueue.lua, pipelined, jobs already validated
 *   full         Batch lines decoded, validated, cost-estimated, then pushed
 * each repeated 3 times, interleaved, best kept; then a table with each rate
 * and its ratio to raw XADD (target: full >= 0.5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/batch.h"
#include "jobs/job_store.h"
#include "redis/redis.h"
#include "testsupport.h"

#define ROUND 1024
#define REPEATS 3

static char *make_lines(long n, size_t *len)
{
    size_t cap = (size_t)n * 200 + 1, off = 0;
    char *buf = malloc(cap);
    for (long i = 0; buf && i < n; i++)
        off += (size_t)snprintf(buf + off, cap - off,
                                "{\"custom_id\":\"b%ld\",\"method\":\"POST\",\"url\":\"/v1/chat/"
                                "completions\",\"body\":{\"model\":\"gpt-4o-mini\",\"messages\":"
                                "[{\"role\":\"user\",\"content\":\"Say hello to number %ld\"}],"
                                "\"max_tokens\":16}}\n",
                                i, i);
    *len = off;
    return buf;
}

static int flush_replies(redisContext *c, long n)
{
    for (long i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "reply: %s\n", r ? r->str : c->errstr);
            return -1;
        }
        freeReplyObject(r);
    }
    return 0;
}

/* XADD of each job's hash fields as a stream entry, pipelined in rounds. */
static double run_xadd(redisContext *c, const struct llmq_batch *b, int rep)
{
    long long t0 = llmq_test_now_ms();
    long pending = 0;
    for (size_t i = 0; i < b->n_jobs; i++) {
        const struct llmq_job *j = &b->jobs[i];
        redisAppendCommand(
            c,
            "XADD bench:{raw-%d}:q * id %s model %s url %s body %b cost %lld prio %s "
            "deadline_ms 0 max_attempts %d attempts 0 enq_ms 1700000000000 state "
            "queued est_prompt_tokens %lld",
            rep, j->id, j->model, j->url, j->body, j->body_len, j->cost.total_tokens, "normal",
            j->max_attempts, j->cost.prompt_tokens);
        if (++pending == ROUND) {
            if (flush_replies(c, pending) != 0)
                return -1;
            pending = 0;
        }
    }
    if (flush_replies(c, pending) != 0)
        return -1;
    return (double)(llmq_test_now_ms() - t0) / 1000.0;
}

static double run_push(redisContext *c, const char *prefix, const struct llmq_batch *b)
{
    struct llmq_job_outcome *out = calloc(b->n_jobs, sizeof(*out));
    struct llmq_error err = {0};
    long long t0 = llmq_test_now_ms();
    enum llmq_rc rc = llmq_job_store_push(c, prefix, b->jobs, b->n_jobs, out, &err);
    double s = (double)(llmq_test_now_ms() - t0) / 1000.0;
    free(out);
    if (rc != LLMQ_OK) {
        fprintf(stderr, "push: %s\n", err.msg);
        return -1;
    }
    return s;
}

static double run_parse(const char *lines, size_t len)
{
    struct llmq_job_defaults d;
    struct llmq_batch b = {0};
    llmq_job_defaults_init(&d);
    long long t0 = llmq_test_now_ms();
    if (llmq_batch_parse(lines, len, &d, &b, NULL) != LLMQ_OK || b.n_errors > 0)
        return -1;
    double s = (double)(llmq_test_now_ms() - t0) / 1000.0;
    llmq_batch_clear(&b);
    return s;
}

static double run_full(redisContext *c, const char *prefix, const char *lines, size_t len)
{
    struct llmq_job_defaults d;
    struct llmq_batch b = {0};
    llmq_job_defaults_init(&d);
    long long t0 = llmq_test_now_ms();
    if (llmq_batch_parse(lines, len, &d, &b, NULL) != LLMQ_OK || b.n_errors > 0)
        return -1;
    double s = run_push(c, prefix, &b);
    s = s < 0 ? -1 : (double)(llmq_test_now_ms() - t0) / 1000.0;
    llmq_batch_clear(&b);
    return s;
}

static void row(const char *name, long n, double s, double base)
{
    double rate = s > 0 ? (double)n / s : 0;
    printf("| %-40s | %8ld | %7.3f | %10.0f | %5.2fx |\n", name, n, s, rate,
           base > 0 && rate > 0 ? rate / base : 0);
}

static void prepare(redisContext *c, const char *prefix)
{
    struct llmq_error err = {0};
    if (llmq_job_store_prepare(c, prefix, &err) != LLMQ_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
}

static double best(double a, double b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    struct llmq_test_redis server = {0};
    const char *url = argc > 2 ? argv[2] : NULL;
    if (url == NULL) {
        if (llmq_test_redis_start(&server, "--save '' --appendonly no") != 0)
            return 1;
        url = server.url;
    }
    struct llmq_error err = {0};
    redisContext *c = llmq_redis_connect(url, 10000, &err);
    size_t len = 0;
    char *lines = make_lines(n, &len);
    struct llmq_job_defaults d;
    struct llmq_batch b = {0};
    llmq_job_defaults_init(&d);
    if (c == NULL || lines == NULL || llmq_batch_parse(lines, len, &d, &b, &err) != LLMQ_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    /* The machine may be shared: interleave the runs and keep each one's best. */
    double xadd = -1, push = -1, full = -1, parse = -1;
    for (int rep = 0; rep < REPEATS; rep++) {
        char p1[64], p2[64];
        snprintf(p1, sizeof(p1), "llmq:{bench-push-%d}:", rep);
        snprintf(p2, sizeof(p2), "llmq:{bench-full-%d}:", rep);
        /* each run starts from an empty database, as each would alone */
        xadd = best(xadd, run_xadd(c, &b, rep));
        freeReplyObject(redisCommand(c, "FLUSHDB"));
        prepare(c, p1);
        push = best(push, run_push(c, p1, &b));
        freeReplyObject(redisCommand(c, "FLUSHDB"));
        prepare(c, p2);
        full = best(full, run_full(c, p2, lines, len));
        freeReplyObject(redisCommand(c, "FLUSHDB"));
        parse = best(parse, run_parse(lines, len));
    }
    double base = xadd > 0 ? (double)n / xadd : 0;
    printf("| %-40s | %8s | %7s | %10s | %6s |\n", "run (same client, best of 3)", "jobs",
           "seconds", "jobs/s", "ratio");
    printf("|%s|%s|%s|%s|%s|\n", "------------------------------------------", "----------",
           "---------", "------------", "--------");
    row("raw XADD, pipelined", n, xadd, base);
    row("enqueue.lua, pipelined (push only)", n, push, base);
    row("enqueue: parse+validate+estimate+push", n, full, base);
    row("(client part alone: parse+validate+est.)", n, parse, base);
    double full_ratio = base > 0 && full > 0 ? (double)n / full / base : 0;
    printf("\ntarget: full enqueue >= 0.5x raw XADD: %.2fx, %s\n", full_ratio,
           full_ratio >= 0.5 ? "met" : "NOT met");
    llmq_batch_clear(&b);
    free(lines);
    redisFree(c);
    if (server.pid > 0)
        llmq_test_redis_stop(&server);
    return 0;
}
