/* Spend budget benchmark: what budgets on a job's path cost Redis, measured
 * on a private redis-server in one run:
 *   none   no budget in the account (the baseline of the ratios)
 *   one    a tenant's USD budget on every job's path
 *   three  the account's tokens, the tenant's USD and its user's tokens
 * (never binding: every decision grants). Per case, JOBS jobs of one model,
 * tenant and user are enqueued, dispatched 1 and 16 a call (a worker with
 * free slots asks for up to as many) and settled done
 * one per call with a usage (prompt, cached, output tokens), pipelined 32
 * deep; Redis CPU (INFO cpu, user + sys deltas) per dispatch, per settle
 * and for both. Cases run ROUNDS times interleaved and the median is shown.
 * No thresholds.
 *
 * Usage: bench_spend [JOBS] (default 20000, at least 1000). Needs
 * redis-server (REDIS_SERVER or PATH). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis.h"
#include "redis/script.h"
#include "bench_redis.h"
#include "testsupport.h"

#define DEPTH 32
#define PER_CALL 100
#define FIELDS 12
#define ROUNDS 5
#define CASES 3
#define PER_CALLS 2

/* the usage a done job reports: 60 prompt tokens (20 cached), 20 output */
static const char *const USAGE[3] = {"60", "20", "20"};

static void fill(redisContext *c, const char *P, long n)
{
    static char ids[PER_CALL][32];
    const char *argv[1 + PER_CALL * FIELDS];
    int inflight = 0;
    for (long base = 0; base < n; base += PER_CALL) {
        int argc = 0;
        argv[argc++] = P;
        for (int k = 0; k < PER_CALL && base + k < n; k++) {
            snprintf(ids[k], sizeof(ids[k]), "j-%ld", base + k);
            const char *f[FIELDS] = {ids[k],
                                     "normal",
                                     "gpt-4o-mini",
                                     "/v1/chat/completions",
                                     "{\"model\":\"gpt-4o-mini\"}",
                                     "100",
                                     "acme",
                                     "alice",
                                     "0",
                                     "0",
                                     "0",
                                     "60"};
            for (int j = 0; j < FIELDS; j++)
                argv[argc++] = f[j];
        }
        if (llmq_script_append(c, LLMQ_SCRIPT_ENQUEUE, 1, argc, argv, NULL) != LLMQ_OK)
            llmq_bench_die("append enqueue", c);
        if (++inflight == DEPTH) {
            llmq_bench_drain(c, inflight, "enqueue");
            inflight = 0;
        }
    }
    llmq_bench_drain(c, inflight, "enqueue");
}

/* Dispatches n jobs, per_call (text) a call at most; returns Redis CPU s. */
static double decide(redisContext *c, const char *P, int n, struct llmq_bench_grant *g,
                     const char *per_call)
{
    const char *argv[] = {P, "bench", per_call};
    double cpu0 = llmq_bench_redis_cpu_s(c);
    int got = 0;
    int per = (int)strtol(per_call, NULL, 10);
    for (int sent = 0; sent < n;) {
        int batch = (n - sent + per - 1) / per < DEPTH ? (n - sent + per - 1) / per : DEPTH;
        for (int i = 0; i < batch; i++)
            if (llmq_script_append(c, LLMQ_SCRIPT_DISPATCH, 1, 3, argv, NULL) != LLMQ_OK)
                llmq_bench_die("append dispatch", c);
        for (int i = 0; i < batch; i++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL ||
                r->type != REDIS_REPLY_ARRAY)
                llmq_bench_die("dispatch", c);
            llmq_bench_grants_read(r, g, &got, n);
            freeReplyObject(r);
        }
        sent = got;
    }
    if (got != n) {
        fprintf(stderr, "bench_spend: %d of %d decisions granted a job\n", got, n);
        exit(1);
    }
    return llmq_bench_redis_cpu_s(c) - cpu0;
}

static void budgets(redisContext *c, const char *P, int which)
{
    static const char *const sets[3][6] = {
        {"t/acme", "usd", "1000000000000000", "month", "park", NULL},
        {"account", "tokens", "1000000000000", "day", "park", NULL},
        {"t/acme/u/alice", "tokens", "1000000000000", "3600", "park", NULL},
    };
    int n = which == 0 ? 0 : which == 1 ? 1 : 3;
    for (int i = 0; i < n; i++) {
        const char *argv[] = {P, "set", sets[i][0], sets[i][1], sets[i][2], sets[i][3], sets[i][4]};
        redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_BUDGET_SET, 1, 7, argv, NULL, NULL);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            llmq_bench_die("budget_set", c);
        freeReplyObject(r);
    }
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long jobs = 20000;
    if (argc > 1) {
        char *end = NULL;
        errno = 0;
        jobs = strtol(argv[1], &end, 10);
        if (end == argv[1] || *end != '\0' || errno == ERANGE || jobs < 1000) {
            fprintf(stderr, "usage: bench_spend [JOBS] (a whole number >= 1000)\n");
            return 2;
        }
    }
    struct llmq_bench_grant *g = calloc((size_t)jobs, sizeof(*g));
    struct llmq_test_redis srv = {0};
    if (g == NULL || llmq_test_redis_start(&srv, NULL) != 0) {
        fprintf(stderr, "bench_spend: cannot start redis-server\n");
        return 1;
    }
    redisContext *c = redisConnect("127.0.0.1", srv.port);
    if (c == NULL || c->err || llmq_script_load_all(c, NULL) != LLMQ_OK)
        llmq_bench_die("connect", c);
    const char *P = "llmq:{bench}:";
    static const char *const names[CASES] = {"none", "one", "three"};
    static const char *const per_calls[PER_CALLS] = {"1", "16"};
    static double disp[PER_CALLS][CASES][ROUNDS], set[PER_CALLS][CASES][ROUNDS],
        life[PER_CALLS][CASES][ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        for (int pc = 0; pc < PER_CALLS; pc++) {
            for (int k = 0; k < CASES; k++) {
                freeReplyObject(redisCommand(c, "FLUSHALL"));
                freeReplyObject(redisCommand(c,
                                             "HSET %slimit:gpt-4o-mini requests 1000000000000 "
                                             "tokens 1000000000000000 period_ms 60000",
                                             P));
                budgets(c, P, k);
                fill(c, P, jobs);
                disp[pc][k][round] = decide(c, P, (int)jobs, g, per_calls[pc]) * 1e6 / (double)jobs;
                set[pc][k][round] =
                    llmq_bench_settle_done(c, P, g, (int)jobs, "gpt-4o-mini", USAGE, DEPTH) * 1e6 /
                    (double)jobs;
                life[pc][k][round] = disp[pc][k][round] + set[pc][k][round];
            }
        }
    }
    printf("%ld jobs per case, median of %d rounds; Redis CPU us per job\n", jobs, ROUNDS);
    printf("%-9s %-8s %8s %10s %8s %10s %8s %10s %8s\n", "per_call", "budgets", "on_path",
           "dispatch", "ratio", "settle", "ratio", "both", "ratio");
    for (int pc = 0; pc < PER_CALLS; pc++) {
        double base[3] = {0};
        for (int k = 0; k < CASES; k++) {
            qsort(disp[pc][k], ROUNDS, sizeof(double), dcmp);
            qsort(set[pc][k], ROUNDS, sizeof(double), dcmp);
            qsort(life[pc][k], ROUNDS, sizeof(double), dcmp);
            double d = disp[pc][k][ROUNDS / 2], s = set[pc][k][ROUNDS / 2];
            double l = life[pc][k][ROUNDS / 2];
            if (k == 0) {
                base[0] = d;
                base[1] = s;
                base[2] = l;
            }
            printf("%-9s %-8s %8d %10.1f %8.2f %10.1f %8.2f %10.1f %8.2f\n", per_calls[pc],
                   names[k],
                   k == 0   ? 0
                   : k == 1 ? 1
                            : 3,
                   d, d / base[0], s, s / base[1], l, l / base[2]);
        }
    }
    free(g);
    redisFree(c);
    llmq_test_redis_stop(&srv);
    return 0;
}
