/* The Redis side of bench_cluster.sh without workers, HTTP or the API: the
 * whole life of a job in Redis — enqueue (100 jobs a call), dispatch (up to
 * 64 grants a call), job_settle done (a dispatch's grants in one call, as a
 * worker settles one loop turn) — driven straight for each account given,
 * through llmq's own cluster routing (one connection per account, to the
 * primary of its slot). One process, every account's calls pipelined
 * together: each round sends every account its next calls, then reads
 * every reply, so all primaries work at once and Redis, not this driver, is
 * what the time measures.
 *
 * Usage: bench_cluster_drive URL JOBS_PER_ACCOUNT ACCOUNT...
 * Prints one line: "jobs <n> seconds <wall> enqueue_s <wall>" and checks
 * every job ended done (the account's stats). Exits 1 with what failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_redis.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/redis_url.h"
#include "redis/script.h"

#define PER_ENQUEUE 100
#define GRANTS_MAX 64
#define FIELDS LLMQ_BENCH_ENQUEUE_FIELDS
#define ACCOUNTS_MAX 64

static const char *const NO_USAGE[3] = {"-1", "-1", "-1"};

struct account {
    const char *name;
    char P[LLMQ_KEY_PREFIX_MAX];
    redisContext *c;
    long enqueued, done;
    int pending; /* calls appended this round */
    struct llmq_bench_grant grants[GRANTS_MAX];
    int n_grants; /* granted by the last dispatch, to settle next */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Appends one enqueue call of the account's next jobs (at most PER_ENQUEUE). */
static void append_enqueue(struct account *a, long per)
{
    static char ids[PER_ENQUEUE][48];
    const char *argv[1 + PER_ENQUEUE * FIELDS];
    int argc = 0;
    argv[argc++] = a->P;
    for (int k = 0; k < PER_ENQUEUE && a->enqueued < per; k++, a->enqueued++) {
        snprintf(ids[k], sizeof(ids[k]), "j-%ld", a->enqueued);
        llmq_bench_enqueue_fields(ids[k], "", argv + argc);
        argc += FIELDS;
    }
    if (llmq_script_append(a->c, LLMQ_SCRIPT_ENQUEUE, 1, argc, argv, NULL) != LLMQ_OK)
        llmq_bench_die("append enqueue", a->c);
    a->pending++;
}

/* Sends what every account appended (all nodes get their work), then reads
 * every reply; dispatch replies' grants are kept for the next round. */
static void round_trip(struct account *as, int n, int dispatching)
{
    for (int i = 0; i < n; i++) {
        int done = 0;
        while (!done)
            if (redisBufferWrite(as[i].c, &done) != REDIS_OK)
                llmq_bench_die("write", as[i].c);
    }
    for (int i = 0; i < n; i++) {
        struct account *a = &as[i];
        int settles = a->n_grants > 0 && dispatching, got = 0;
        if (settles) {
            llmq_bench_drain(a->c, 1, "job_settle");
            a->done += a->n_grants;
            a->pending--;
        }
        for (; a->pending > 0; a->pending--) {
            redisReply *r = NULL;
            if (redisGetReply(a->c, (void **)&r) != REDIS_OK || r == NULL)
                llmq_bench_die("reply", a->c);
            if (r->type == REDIS_REPLY_ERROR) {
                fprintf(stderr, "bench_cluster_drive: %s: %s\n", a->name, r->str);
                exit(1);
            }
            if (dispatching)
                llmq_bench_grants_read(r, a->grants, &got, GRANTS_MAX);
            freeReplyObject(r);
        }
        if (dispatching)
            a->n_grants = got;
    }
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc - 3 > ACCOUNTS_MAX) {
        fprintf(stderr, "usage: bench_cluster_drive URL JOBS_PER_ACCOUNT ACCOUNT... (at most %d)\n",
                ACCOUNTS_MAX);
        return 2;
    }
    char *end = NULL;
    long per = strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || per < 1) {
        fprintf(stderr, "bench_cluster_drive: JOBS_PER_ACCOUNT '%s' is not a whole number >= 1\n",
                argv[2]);
        return 2;
    }
    int n = argc - 3;
    static struct account as[ACCOUNTS_MAX];
    for (int i = 0; i < n; i++) {
        struct account *a = &as[i];
        a->name = argv[3 + i];
        struct llmq_redis_url u;
        struct llmq_error err = {0};
        if (llmq_redis_url_parse(argv[1], &u, &err) != LLMQ_OK ||
            llmq_account_prefix(a->name, a->P, sizeof(a->P), &err) != LLMQ_OK) {
            fprintf(stderr, "bench_cluster_drive: %s\n", err.msg);
            return 2;
        }
        llmq_redis_url_route(&u, a->name);
        a->c = llmq_redis_connect_parsed(&u, 5000, &err);
        if (a->c == NULL || llmq_script_ensure_loaded(a->c, &err) != LLMQ_OK) {
            fprintf(stderr, "bench_cluster_drive: %s: %s\n", a->name, err.msg);
            return 1;
        }
        redisReply *r = redisCommand(a->c,
                                     "HSET %slimit:bench-model requests 1000000000000 "
                                     "tokens 1000000000000000 period_ms 60000",
                                     a->P);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            llmq_bench_die("HSET limit", a->c);
        freeReplyObject(r);
    }
    double t0 = now_s();
    for (int more = 1; more;) { /* enqueue, 4 calls an account a round */
        more = 0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < 4 && as[i].enqueued < per; k++)
                append_enqueue(&as[i], per);
        round_trip(as, n, 0);
        for (int i = 0; i < n; i++)
            more |= as[i].enqueued < per;
    }
    double t1 = now_s();
    const char *disp_argv[] = {NULL, "bench", "64"};
    long before = 0, idle_rounds = 0;
    for (int more = 1; more;) { /* settle the last grants, ask for the next */
        more = 0;
        long now_done = 0;
        for (int i = 0; i < n; i++)
            now_done += as[i].done + as[i].n_grants;
        if (now_done == before && ++idle_rounds > 1000) {
            fprintf(stderr, "bench_cluster_drive: no grant in 1000 rounds (%ld done)\n", now_done);
            return 1;
        }
        before = now_done;
        for (int i = 0; i < n; i++) {
            struct account *a = &as[i];
            if (a->n_grants > 0) {
                if (llmq_bench_settle_append(a->c, a->P, a->grants, a->n_grants, "bench-model",
                                             NO_USAGE) != LLMQ_OK)
                    llmq_bench_die("append settle", a->c);
                a->pending++;
            }
            if (a->done + a->n_grants < per) {
                disp_argv[0] = a->P;
                if (llmq_script_append(a->c, LLMQ_SCRIPT_DISPATCH, 1, 3, disp_argv, NULL) !=
                    LLMQ_OK)
                    llmq_bench_die("append dispatch", a->c);
                a->pending++;
            }
        }
        round_trip(as, n, 1);
        for (int i = 0; i < n; i++)
            more |= as[i].done < per || as[i].n_grants > 0;
    }
    double t2 = now_s();
    long total = 0;
    for (int i = 0; i < n; i++) {
        redisReply *r = redisCommand(as[i].c, "HGET %sstats done", as[i].P);
        long d = r != NULL && r->type == REDIS_REPLY_STRING ? strtol(r->str, NULL, 10) : -1;
        if (r != NULL)
            freeReplyObject(r);
        if (d != per) {
            fprintf(stderr, "bench_cluster_drive: %s: %ld of %ld jobs done\n", as[i].name, d, per);
            return 1;
        }
        total += d;
        redisFree(as[i].c);
    }
    printf("jobs %ld seconds %.3f enqueue_s %.3f\n", total, t2 - t0, t1 - t0);
    return 0;
}
