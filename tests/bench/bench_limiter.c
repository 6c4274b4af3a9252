/* Limiter benchmark: decisions/s of llmq's acquire on a 3-level path,
 * pipelined from C, against, in the same run and on the same connection:
 *   (a) EVALSHA of `return 1` (the floor cost of any script call),
 *   (b) the common blog-post limiter: a ZSET log for RPM (ZREMRANGEBYSCORE,
 *       ZCARD, ZADD, EXPIRE) plus a token counter (INCRBY + EXPIRE 60), with
 *       the client's clock, enforcing one bucket, and
 *   (c) the four commands an exact 3-level limiter on the Redis clock needs at
 *       the least, without any logic (run_floor), and (d) the three that one
 *       of O(1) state per bucket (GCRA) would need.
 * Then what (b) gets wrong, measured with the same harness: boundary bursts,
 * a token counter that never resets under steady traffic, clock skew.
 *
 * Usage: bench_limiter [REDIS_URL] (default $LLMQ_REDIS_URL or 127.0.0.1:6379).
 * Prints tables; no thresholds: read the ratios. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llmq/limiter.h"
#include "redis/redis.h"
#include "redis/script.h"

#define DECISIONS 64000
#define DEPTH 200
#define ROUNDS 3

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void die(const char *what, redisContext *c)
{
    fprintf(stderr, "bench_limiter: %s: %s\n", what, c && c->err ? c->errstr : "bad reply");
    exit(1);
}

/* Reads n replies; returns how many were error replies. */
static int drain(redisContext *c, int n)
{
    int errors = 0;
    for (int i = 0; i < n; i++) {
        void *reply;
        if (redisGetReply(c, &reply) != REDIS_OK)
            die("read", c);
        errors += ((redisReply *)reply)->type == REDIS_REPLY_ERROR;
        freeReplyObject(reply);
    }
    return errors;
}

static double run_return1(redisContext *c)
{
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", "return 1");
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        die("script load", c);
    char sha[64];
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    long long t0 = now_us();
    for (int done = 0; done < DECISIONS; done += DEPTH) {
        for (int i = 0; i < DEPTH; i++)
            redisAppendCommand(c, "EVALSHA %s 0", sha);
        drain(c, DEPTH);
    }
    return DECISIONS / ((now_us() - t0) / 1e6);
}

/* The floor of any exact 3-level limiter that decides in one script on the
 * Redis clock: TIME, one HMGET of the three buckets' state, one ZADD of the
 * admission to one shared log, one HSET of the state back, and no logic at
 * all. It decides nothing; it shows what four commands cost in this harness,
 * so a target ratio can be checked against what is possible. */
static const char floor_script[] =
    "local t = redis.call('TIME') "
    "redis.call('HMGET', KEYS[1], 'm_n', 'm_tok', 't_n', 't_tok', 'u_n', 'u_tok') "
    "redis.call('ZADD', KEYS[2], t[1], ARGV[1]) "
    "redis.call('HSET', KEYS[1], 'm_n', 1, 'm_tok', 1, 't_n', 1, 't_tok', 1, 'u_n', 1, 'u_tok', 1) "
    "return 1";

/* The same without the log: what a limiter of O(1) state per bucket (GCRA,
 * not an exact window) would need at the least. */
static const char floor_nolog_script[] =
    "local t = redis.call('TIME') "
    "redis.call('HMGET', KEYS[1], 'm_r', 'm_t', 't_r', 't_t', 'u_r', 'u_t') "
    "redis.call('HSET', KEYS[1], 'm_r', 1, 'm_t', 1, 't_r', 1, 't_t', 1, 'u_r', 1, 'u_t', 1) "
    "return 1";

static double run_floor(redisContext *c, const char *account, const char *script)
{
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", script);
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        die("script load", c);
    char sha[64];
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    char state[256], log[256];
    snprintf(state, sizeof(state), "floor:{%s}:state", account);
    snprintf(log, sizeof(log), "floor:{%s}:log", account);
    static int member;
    long long t0 = now_us();
    for (int done = 0; done < DECISIONS; done += DEPTH) {
        for (int i = 0; i < DEPTH; i++)
            redisAppendCommand(c, "EVALSHA %s 2 %s %s %d", sha, state, log, member++);
        drain(c, DEPTH);
    }
    return DECISIONS / ((now_us() - t0) / 1e6);
}

/* llmq acquire on a 3-level path, `batch` decisions per script call. */
static double run_llmq(redisContext *c, const char *account, int batch)
{
    char prefix[256], costs[64][16];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    const char *argv[4 + 64 + 1] = {prefix, "gpt-4o", "acme", "bob", "normal"};
    for (int i = 0; i < batch; i++)
        argv[5 + i] = costs[i];
    unsigned int seed = 1;
    long long t0 = now_us();
    int errors = 0, calls_per_flush = DEPTH / batch > 0 ? DEPTH / batch : 1;
    for (int done = 0; done < DECISIONS; done += calls_per_flush * batch) {
        for (int i = 0; i < calls_per_flush; i++) {
            for (int k = 0; k < batch; k++)
                snprintf(costs[k], sizeof(costs[k]), "%d", 1 + rand_r(&seed) % 100);
            llmq_script_append(c, LLMQ_SCRIPT_ACQUIRE, 1, 5 + batch, argv, NULL);
        }
        errors += drain(c, calls_per_flush);
    }
    if (errors)
        fprintf(stderr, "bench_limiter: %d acquire errors\n", errors);
    return DECISIONS / ((now_us() - t0) / 1e6);
}

/* The blog-post limiter for one key, one decision = 6 pipelined commands. */
static void append_blog(redisContext *c, const char *key, long long client_ms, int cost, int id)
{
    redisAppendCommand(c, "ZREMRANGEBYSCORE %s:rpm -inf %lld", key, client_ms - 60000);
    redisAppendCommand(c, "ZCARD %s:rpm", key);
    redisAppendCommand(c, "ZADD %s:rpm %lld %lld-%d", key, client_ms, client_ms, id);
    redisAppendCommand(c, "EXPIRE %s:rpm 60", key);
    redisAppendCommand(c, "INCRBY %s:tpm %d", key, cost);
    redisAppendCommand(c, "EXPIRE %s:tpm 60", key);
}

static double run_blog(redisContext *c, const char *account)
{
    char key[256];
    snprintf(key, sizeof(key), "blog:%s", account);
    long long t0 = now_us();
    for (int done = 0; done < DECISIONS; done += DEPTH) {
        for (int i = 0; i < DEPTH; i++)
            append_blog(c, key, now_us() / 1000, 1 + i % 100, done + i);
        drain(c, DEPTH * 6);
    }
    return DECISIONS / ((now_us() - t0) / 1e6);
}

static void set_limits(redisContext *c, const char *account, long long tokens, int period_ms)
{
    const char *suffixes[] = {"gpt-4o", "gpt-4o/t/acme", "gpt-4o/u/bob"};
    for (int i = 0; i < 3; i++) {
        redisReply *r = redisCommand(c,
                                     "HSET llmq:{%s}:limit:%s requests %lld tokens %lld "
                                     "period_ms %d",
                                     account, suffixes[i], tokens, tokens * 100, period_ms);
        if (r == NULL)
            die("hset", c);
        freeReplyObject(r);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void throughput_table(redisContext *c)
{
    double ret1[ROUNDS], llmq[ROUNDS], llmq32[ROUNDS], blog[ROUNDS], floor4[ROUNDS], floor3[ROUNDS];
    char account[64];
    snprintf(account, sizeof(account), "bench-%d", (int)getpid());
    /* Limits high enough that acquires are granted: the full write path. */
    set_limits(c, account, 100000000, 60000);
    struct llmq_error err = {0};
    if (llmq_script_load_all(c, &err) != LLMQ_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    for (int r = 0; r < ROUNDS; r++) { /* interleaved so drift hits all alike */
        ret1[r] = run_return1(c);
        llmq[r] = run_llmq(c, account, 1);
        llmq32[r] = run_llmq(c, account, 32);
        blog[r] = run_blog(c, account);
        floor4[r] = run_floor(c, account, floor_script);
        floor3[r] = run_floor(c, account, floor_nolog_script);
    }
    qsort(ret1, ROUNDS, sizeof(double), cmp_double);
    qsort(llmq, ROUNDS, sizeof(double), cmp_double);
    qsort(blog, ROUNDS, sizeof(double), cmp_double);
    qsort(llmq32, ROUNDS, sizeof(double), cmp_double);
    qsort(floor4, ROUNDS, sizeof(double), cmp_double);
    qsort(floor3, ROUNDS, sizeof(double), cmp_double);
    double a = ret1[ROUNDS / 2], l = llmq[ROUNDS / 2], b = blog[ROUNDS / 2];
    double l32 = llmq32[ROUNDS / 2], f = floor4[ROUNDS / 2], f3 = floor3[ROUNDS / 2];
    printf("\nDecisions/s, pipelined (depth %d), median of %d rounds of %d, one connection\n\n",
           DEPTH, ROUNDS, DECISIONS);
    printf("| limiter | buckets enforced | decisions/s | vs (a) | vs (b) |\n");
    printf("|---|---|---|---|---|\n");
    printf("| (a) EVALSHA `return 1`, one per decision | 0 | %.0f | 1.00 | %.2f |\n", a, a / b);
    printf("| (b) blog ZSET+INCRBY, client clock | 1 (inexact) | %.0f | %.2f | 1.00 |\n", b, b / a);
    printf("| (c) floor: TIME + HMGET + ZADD + HSET, no logic | - | %.0f | %.2f | %.2f |\n", f,
           f / a, f / b);
    printf("| (d) floor without the log: TIME + HMGET + HSET | - | %.0f | %.2f | %.2f |\n", f3,
           f3 / a, f3 / b);
    printf("| llmq acquire, 1 decision per call | 3 (exact) | %.0f | %.2f | %.2f |\n", l, l / a,
           l / b);
    printf("| llmq acquire, 32 decisions per call | 3 (exact) | %.0f | %.2f | %.2f |\n", l32,
           l32 / a, l32 / b);
}

/* ---- what the blog limiter gets wrong ---- */

struct admission {
    long long true_ms;
    int tokens;
};

/* Largest token sum / request count in any window [t, t+period). */
static void busiest(const struct admission *a, int n, long long period, long long *tok, int *req)
{
    *tok = 0;
    *req = 0;
    for (int i = 0; i < n; i++) {
        long long t = 0;
        int q = 0;
        for (int j = i; j < n && a[j].true_ms < a[i].true_ms + period; j++) {
            t += a[j].tokens;
            q++;
        }
        if (t > *tok)
            *tok = t;
        if (q > *req)
            *req = q;
    }
}

static long long redis_ms(redisContext *c)
{
    redisReply *r = redisCommand(c, "TIME");
    long long ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* The blog TPM check as posts write it: INCRBY, then EXPIRE (every time, or
 * only when the key is new: NX), admitted when the new total <= limit. */
static int blog_tokens_admit(redisContext *c, const char *key, int cost, long long limit,
                             int period_s, int refresh_ttl)
{
    redisReply *r = redisCommand(c, "INCRBY %s %d", key, cost);
    long long total = r->integer;
    freeReplyObject(r);
    r = redisCommand(c, refresh_ttl ? "EXPIRE %s %d" : "EXPIRE %s %d NX", key, period_s);
    freeReplyObject(r);
    if (total > limit) {
        r = redisCommand(c, "DECRBY %s %d", key, cost);
        freeReplyObject(r);
        return 0;
    }
    return 1;
}

static int llmq_admit(struct llmq_limiter *lim, const char *account, int cost, long long *at)
{
    struct llmq_path p;
    struct llmq_grant g;
    struct llmq_error err = {0};
    llmq_path_init(&p, account, "m", NULL, NULL, &err);
    if (llmq_limiter_acquire(lim, &p, cost, LLMQ_PRIORITY_NORMAL, &g, &err) != LLMQ_OK) {
        fprintf(stderr, "acquire: %s\n", err.msg);
        exit(1);
    }
    *at = g.at_ms;
    return g.decision == LLMQ_GRANTED;
}

/* Offers `cost` every step_ms for duration_ms to both limiters (limit tokens
 * per 1 s). Returns busiest window / limit and the share of the budget used. */
static void scenario(redisContext *c, struct llmq_limiter *lim, int refresh_ttl, int cost,
                     int step_ms, int duration_ms, int start_at_boundary, double out[4])
{
    const long long limit = 1000, period = 1000;
    static struct admission blog[20000], ours[20000];
    int nb = 0, no = 0;
    char key[64], account[64];
    snprintf(key, sizeof(key), "blogtpm:%d:%d", (int)getpid(), refresh_ttl * 10 + cost);
    snprintf(account, sizeof(account), "wrong-%d-%d-%d", (int)getpid(), refresh_ttl, cost);
    redisReply *r = redisCommand(c, "HSET llmq:{%s}:limit:m tokens %lld period_ms %lld", account,
                                 limit, period);
    freeReplyObject(r);
    if (start_at_boundary) {
        /* A fixed window starts with the first request; fill the rest of the
         * limit just before it ends, then keep offering as it resets. */
        long long at;
        blog_tokens_admit(c, key, 1, limit, 1, refresh_ttl);
        llmq_admit(lim, account, 1, &at);
        blog[nb++] = (struct admission){redis_ms(c), 1};
        ours[no++] = (struct admission){at, 1};
        usleep(975000);
        if (blog_tokens_admit(c, key, (int)limit - 1, limit, 1, refresh_ttl))
            blog[nb++] = (struct admission){redis_ms(c), (int)limit - 1};
        if (llmq_admit(lim, account, (int)limit - 1, &at))
            ours[no++] = (struct admission){at, (int)limit - 1};
    }
    long long end = redis_ms(c) + duration_ms;
    while (redis_ms(c) < end && nb < 20000) {
        long long at;
        if (blog_tokens_admit(c, key, cost, limit, 1, refresh_ttl))
            blog[nb++] = (struct admission){redis_ms(c), cost};
        if (llmq_admit(lim, account, cost, &at))
            ours[no++] = (struct admission){at, cost};
        usleep((useconds_t)step_ms * 1000);
    }
    long long tb, to;
    int qb, qo;
    busiest(blog, nb, period, &tb, &qb);
    busiest(ours, no, period, &to, &qo);
    long long sum_b = 0, sum_o = 0;
    for (int i = 0; i < nb; i++)
        sum_b += blog[i].tokens;
    for (int i = 0; i < no; i++)
        sum_o += ours[i].tokens;
    double budget = (double)limit * (duration_ms / (double)period);
    out[0] = (double)tb / limit;
    out[1] = (double)to / limit;
    out[2] = sum_b / budget;
    out[3] = sum_o / budget;
}

/* Two clients share a ZSET RPM log; one clock runs skew_ms ahead. */
static void skew_scenario(redisContext *c, struct llmq_limiter *lim, long long skew_ms,
                          double out[2])
{
    const int limit = 20;
    const long long period = 1000;
    static struct admission blog[5000], ours[5000];
    int nb = 0, no = 0;
    char key[64], account[64];
    snprintf(key, sizeof(key), "blogrpm:%d", (int)getpid());
    snprintf(account, sizeof(account), "skew-%d", (int)getpid());
    redisReply *r = redisCommand(c, "HSET llmq:{%s}:limit:m requests %d period_ms %lld", account,
                                 limit, period);
    freeReplyObject(r);
    long long end = redis_ms(c) + 4000;
    for (int i = 0; redis_ms(c) < end && nb < 5000; i++) {
        long long true_ms = redis_ms(c);
        long long client_ms = true_ms + (i % 2 ? skew_ms : 0);
        r = redisCommand(c, "ZREMRANGEBYSCORE %s -inf %lld", key, client_ms - period);
        freeReplyObject(r);
        r = redisCommand(c, "ZCARD %s", key);
        long long n = r->integer;
        freeReplyObject(r);
        if (n < limit) {
            r = redisCommand(c, "ZADD %s %lld %d", key, client_ms, i);
            freeReplyObject(r);
            blog[nb++] = (struct admission){true_ms, 1};
        }
        long long at;
        if (llmq_admit(lim, account, 0, &at))
            ours[no++] = (struct admission){at, 1};
        usleep(5000);
    }
    long long t;
    int qb, qo;
    busiest(blog, nb, period, &t, &qb);
    busiest(ours, no, period, &t, &qo);
    out[0] = (double)qb / limit;
    out[1] = (double)qo / limit;
}

static void wrong_table(redisContext *c, const char *url)
{
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = url};
    struct llmq_limiter *lim = llmq_limiter_new(&cfg, &err);
    if (lim == NULL) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    double burst[4], steady[4], skew[2];
    /* Fixed window (EXPIRE only when new): full at the end of one window,
     * full again at the start of the next. */
    scenario(c, lim, 0, 100, 20, 2000, 1, burst);
    /* EXPIRE refreshed by every request: under steady traffic at half the
     * limit the counter never expires, so it fills and then denies forever. */
    scenario(c, lim, 1, 10, 20, 4000, 0, steady);
    skew_scenario(c, lim, 500, skew);
    printf("\nWhat the blog-post limiter gets wrong (limit per 1 s period; same harness)\n\n");
    printf("| scenario | measure | blog (b) | llmq |\n|---|---|---|---|\n");
    printf("| boundary burst (INCRBY + EXPIRE NX: fixed window) | busiest 1 s window / limit "
           "| %.2f | %.2f |\n",
           burst[0], burst[1]);
    printf("| steady traffic at ~50%% of limit (INCRBY + EXPIRE every call) | tokens admitted / "
           "budget | %.2f | %.2f |\n",
           steady[2], steady[3]);
    printf("| two clients, one clock 500 ms ahead (ZSET log) | busiest 1 s window / limit | "
           "%.2f | %.2f |\n",
           skew[0], skew[1]);
    llmq_limiter_free(lim);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : getenv("LLMQ_REDIS_URL");
    if (url == NULL)
        url = "redis://127.0.0.1:6379/0";
    struct llmq_error err = {0};
    redisContext *c = llmq_redis_connect(url, 5000, &err);
    if (c == NULL) {
        fprintf(stderr, "bench_limiter: %s\n", err.msg);
        return 1;
    }
    throughput_table(c);
    wrong_table(c, url);
    redisFree(c);
    return 0;
}
