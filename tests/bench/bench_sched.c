/* Scheduler scale benchmark: what one dispatch decision costs as the waiting
 * work grows, measured on a private redis-server (flushed between cases):
 *   waiting jobs 10,000 or 1,000,000, spread round-robin over 1 or 10,000
 *   tenants (the tenants column says how many hold work: fewer than 10,000
 *   when the case has fewer jobs), one model with a (never binding) limit so
 *   every decision runs the limiter.
 * Per case: decisions/s of the dispatch script (one job per call, pipelined
 * 32 deep), and Redis CPU (INFO cpu, user + sys deltas) per enqueue, per
 * decision, per settle (job_settle done) and for the whole life of a job.
 * Every case makes the same number of decisions: 5,000, or the smaller
 * case's waiting jobs when there are fewer (each decision must grant a job,
 * so a case cannot decide more jobs than it holds).
 * The first case is the baseline of the ratio columns. No thresholds.
 *
 * Usage: bench_sched [MAX_WAITING] (default 1000000, at least 1000: the cases
 * hold MAX_WAITING / 100 and MAX_WAITING jobs; smaller for a quick run).
 * Needs redis-server (REDIS_SERVER or PATH). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redis/redis.h"
#include "redis/script.h"
#include "bench_redis.h"
#include "testsupport.h"

#define MAX_DECISIONS 5000
#define MIN_WAITING 1000 /* the smaller case then holds 10 jobs */
#define DEPTH 32
#define PER_CALL 100
#define FIELDS LLMQ_BENCH_ENQUEUE_FIELDS

static const char *const NO_USAGE[3] = {"-1", "-1", "-1"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Enqueues n jobs "<tag>-<i>" over tenants tenants; returns Redis CPU s used. */
static double fill(redisContext *c, const char *P, const char *tag, long n, long tenants)
{
    static char ids[PER_CALL][32], tns[PER_CALL][32];
    const char *argv[1 + PER_CALL * FIELDS];
    double cpu0 = llmq_bench_redis_cpu_s(c);
    int inflight = 0;
    for (long base = 0; base < n; base += PER_CALL) {
        int k = 0, argc = 0;
        argv[argc++] = P;
        for (; k < PER_CALL && base + k < n; k++) {
            snprintf(ids[k], sizeof(ids[k]), "%s-%ld", tag, base + k);
            snprintf(tns[k], sizeof(tns[k]), "t%ld", (base + k) % tenants);
            llmq_bench_enqueue_fields(ids[k], tns[k], argv + argc);
            argc += FIELDS;
        }
        if (llmq_script_append(c, LLMQ_SCRIPT_ENQUEUE, 1, argc, argv, NULL) != LLMQ_OK)
            llmq_bench_die("append enqueue", c);
        if (++inflight == DEPTH) {
            llmq_bench_drain(c, inflight, "enqueue");
            inflight = 0;
        }
    }
    llmq_bench_drain(c, inflight, "enqueue");
    return llmq_bench_redis_cpu_s(c) - cpu0;
}

/* `decisions` dispatch calls of one job each; fills g; returns wall s, *cpu. */
static double decide(redisContext *c, const char *P, int decisions, struct llmq_bench_grant *g,
                     double *cpu)
{
    const char *argv[] = {P, "bench", "1"};
    double cpu0 = llmq_bench_redis_cpu_s(c), t0 = now_s();
    int got = 0;
    for (int sent = 0; sent < decisions;) {
        int batch = decisions - sent < DEPTH ? decisions - sent : DEPTH;
        for (int i = 0; i < batch; i++)
            if (llmq_script_append(c, LLMQ_SCRIPT_DISPATCH, 1, 3, argv, NULL) != LLMQ_OK)
                llmq_bench_die("append dispatch", c);
        for (int i = 0; i < batch; i++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL ||
                r->type != REDIS_REPLY_ARRAY)
                llmq_bench_die("dispatch", c);
            llmq_bench_grants_read(r, g, &got, decisions);
            freeReplyObject(r);
        }
        sent += batch;
    }
    double wall = now_s() - t0;
    *cpu = llmq_bench_redis_cpu_s(c) - cpu0;
    if (got != decisions) {
        fprintf(stderr, "bench_sched: %d of %d decisions granted a job\n", got, decisions);
        exit(1);
    }
    return wall;
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: bench_sched [MAX_WAITING]\n"
            "  MAX_WAITING: jobs waiting in the larger cases (the smaller hold 1/100 of\n"
            "  it); a whole number >= %d, default 1000000\n",
            MIN_WAITING);
}

/* The MAX_WAITING argument, or -1 when it is not a whole number >= MIN_WAITING. */
static long parse_max_waiting(const char *arg)
{
    char *end = NULL;
    errno = 0;
    long n = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || errno == ERANGE || n < MIN_WAITING)
        return -1;
    return n;
}

int main(int argc, char **argv)
{
    long max_waiting = 1000000;
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc > 2) {
        fprintf(stderr, "bench_sched: one argument at most, got %d\n", argc - 1);
        usage(stderr);
        return 2;
    }
    if (argc == 2 && (max_waiting = parse_max_waiting(argv[1])) < 0) {
        fprintf(stderr, "bench_sched: MAX_WAITING '%s' is not a whole number >= %d\n", argv[1],
                MIN_WAITING);
        usage(stderr);
        return 2;
    }
    const long waiting[2] = {max_waiting / 100, max_waiting};
    const long tenants[2] = {1, 10000};
    /* The same work in every case, so the ratios compare like with like. */
    const int decisions = waiting[0] < MAX_DECISIONS ? (int)waiting[0] : MAX_DECISIONS;
    struct llmq_bench_grant *g = calloc((size_t)decisions, sizeof(*g));
    if (g == NULL) {
        fprintf(stderr, "bench_sched: out of memory\n");
        return 1;
    }
    struct llmq_test_redis srv = {0};
    if (llmq_test_redis_start(&srv, NULL) != 0) {
        fprintf(stderr, "bench_sched: cannot start redis-server\n");
        return 1;
    }
    redisContext *c = redisConnect("127.0.0.1", srv.port);
    if (c == NULL || c->err)
        llmq_bench_die("connect", c);
    if (llmq_script_load_all(c, NULL) != LLMQ_OK)
        llmq_bench_die("SCRIPT LOAD", c);
    const char *P = "llmq:{bench}:";
    double base_rate = 0, base_life = 0;
    printf("%d decisions per case\n", decisions);
    printf("%-10s %-8s %12s %8s %10s %10s %10s %10s %8s\n", "waiting", "tenants", "decisions/s",
           "ratio", "enq_us", "disp_us", "settle_us", "life_us", "ratio");
    for (int t = 0; t < 2; t++) {
        for (int w = 0; w < 2; w++) {
            freeReplyObject(redisCommand(c, "FLUSHALL"));
            freeReplyObject(redisCommand(c,
                                         "HSET %slimit:bench-model requests 1000000000000 "
                                         "tokens 1000000000000000 period_ms 60000",
                                         P));
            double enq_cpu = fill(c, P, "j", waiting[w], tenants[t]);
            double disp_cpu = 0;
            double wall = decide(c, P, decisions, g, &disp_cpu);
            double set_cpu =
                llmq_bench_settle_done(c, P, g, decisions, "bench-model", NO_USAGE, DEPTH);
            double rate = decisions / wall;
            double enq_us = enq_cpu * 1e6 / (double)waiting[w];
            double disp_us = disp_cpu * 1e6 / decisions, set_us = set_cpu * 1e6 / decisions;
            double life = enq_us + disp_us + set_us;
            if (base_rate == 0) {
                base_rate = rate;
                base_life = life;
            }
            long with_work = waiting[w] < tenants[t] ? waiting[w] : tenants[t];
            printf("%-10ld %-8ld %12.0f %8.2f %10.1f %10.1f %10.1f %10.1f %8.2f\n", waiting[w],
                   with_work, rate, rate / base_rate, enq_us, disp_us, set_us, life,
                   life / base_life);
            fflush(stdout);
        }
    }
    free(g);
    redisFree(c);
    llmq_test_redis_stop(&srv);
    return 0;
}
