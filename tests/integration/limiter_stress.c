/* 8 processes acquire with random costs against one 3-level path (model ->
 * tenant -> 4 users) for several periods, demanding more than the path
 * allows, in two configurations: one where a tokens limit binds (the
 * tenant's) and one where a requests limit binds (the model's). From the
 * admission times the script returns (Redis TIME: no transit jitter):
 *   - no window of one period holds more requests or tokens than any bucket
 *     allows (checked at every admission, where the maximum window starts);
 *   - the binding bucket is used >= 99% in every full period (each period
 *     on its own, not only as a total).
 * Denied processes sleep exactly the returned wait, as a worker does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "llmq/limiter.h"
#include "testsupport.h"

#define PROCS 8
#define USERS 4
#define PERIOD_MS 2000
#define PERIODS 4
#define MAX_RECORDS 200000
#define NO_LIMIT -1

/* The limits of one configuration (NO_LIMIT: the bucket has none in that
 * dimension) and which of them binds. */
struct stress_cfg {
    const char *name;
    long long model_requests, model_tokens;
    long long tenant_requests, tenant_tokens;
    long long user_requests, user_tokens;
    int binds_requests; /* 1: the model's requests bind; 0: the tenant's tokens */
};

struct record {
    long long at_ms;
    long long cost;
    int user;
};

static char account[64];

/* The children start acquiring together: each writes a byte to ready once
 * connected, then waits for the parent's byte on go (one per child). A
 * child that starts late on a loaded machine would otherwise leave the
 * first period under-used without any fault of the limiter. */
static int ready_pipe[2], go_pipe[2];

static void child(int idx, const char *file)
{
    struct llmq_error err = {0};
    struct llmq_limiter_config cfg = {.redis_url = llmq_test_redis_url()};
    struct llmq_limiter *lim = llmq_limiter_new(&cfg, &err);
    if (lim == NULL)
        _exit(10);
    char user[16];
    snprintf(user, sizeof(user), "u%d", idx % USERS);
    struct llmq_path p;
    if (llmq_path_init(&p, account, "m", "acme", user, &err) != LLMQ_OK)
        _exit(11);
    FILE *out = fopen(file, "w");
    if (out == NULL)
        _exit(12);
    char b = 1;
    if (write(ready_pipe[1], &b, 1) != 1 || read(go_pipe[0], &b, 1) != 1)
        _exit(15);
    unsigned int seed = (unsigned int)(idx * 7919 + 1);
    /* It acquires for PERIODS and a half from its own first answer, not from
     * go: a first call that waits (the Functions library loading, no CPU for
     * this process: 940 ms seen at load ~22) must not cut the last period
     * that is measured from the first grant. */
    long long go_at = llmq_test_now_ms(), stop = 0;
    long long acquires = 0;
    while (stop == 0 || llmq_test_now_ms() < stop) {
        struct llmq_grant g;
        long long cost = 1 + rand_r(&seed) % 50;
        if (llmq_limiter_acquire(lim, &p, cost, LLMQ_PRIORITY_NORMAL, &g, &err) != LLMQ_OK)
            _exit(13);
        if (stop == 0) {
            fprintf(out, "# first answer after %lld ms\n", llmq_test_now_ms() - go_at);
            stop = llmq_test_now_ms() + PERIODS * PERIOD_MS + PERIOD_MS / 2;
        }
        acquires++;
        if (g.decision == LLMQ_GRANTED)
            fprintf(out, "%lld %lld %d\n", (long long)g.at_ms, cost, idx % USERS);
        else if (g.decision == LLMQ_DENIED)
            usleep((useconds_t)(g.wait_ms < 500 ? g.wait_ms : 500) * 1000);
        else
            _exit(14);
    }
    fprintf(out, "# %lld\n", acquires);
    fclose(out);
    llmq_limiter_free(lim);
    _exit(0);
}

static int cmp_record(const void *a, const void *b)
{
    const struct record *x = a, *y = b;
    return (x->at_ms > y->at_ms) - (x->at_ms < y->at_ms);
}

/* Max over windows [t_i, t_i + period) of the requests and tokens of the
 * records for which pick() holds. */
static void max_window(const struct record *r, size_t n, int user, long long *max_req,
                       long long *max_tok)
{
    *max_req = *max_tok = 0;
    size_t j = 0;
    long long tok = 0, req = 0;
    for (size_t i = 0; i < n; i++) {
        /* window [r[i].at, r[i].at + P): extend j, then count */
        while (j < n && r[j].at_ms < r[i].at_ms + PERIOD_MS) {
            if (user < 0 || r[j].user == user) {
                tok += r[j].cost;
                req++;
            }
            j++;
        }
        if (tok > *max_tok)
            *max_tok = tok;
        if (req > *max_req)
            *max_req = req;
        if (user < 0 || r[i].user == user) {
            tok -= r[i].cost;
            req--;
        }
    }
}

/* HSET key requests R tokens T period_ms P, leaving out a NO_LIMIT dimension. */
static void set_limit(redisContext *c, const char *bucket, long long req, long long tok)
{
    char key[160];
    snprintf(key, sizeof(key), "llmq:{%s}:limit:%s", account, bucket);
    redisReply *r;
    if (req != NO_LIMIT && tok != NO_LIMIT)
        r = redisCommand(c, "HSET %s requests %lld tokens %lld period_ms %d", key, req, tok,
                         PERIOD_MS);
    else if (req != NO_LIMIT)
        r = redisCommand(c, "HSET %s requests %lld period_ms %d", key, req, PERIOD_MS);
    else
        r = redisCommand(c, "HSET %s tokens %lld period_ms %d", key, tok, PERIOD_MS);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

/* A limit that does not hold when it is NO_LIMIT. */
static int within(long long v, long long limit)
{
    return limit == NO_LIMIT || v <= limit;
}

static void run_stress(const struct stress_cfg *cfg)
{
    llmq_test_unique_name(account, sizeof(account), "stress");
    redisContext *c = llmq_test_redis_connect();
    /* The exact window itself is under test (its utilisation per period):
     * no arrival guard, which would hold each admission longer. */
    freeReplyObject(redisCommand(c, "HSET llmq:{%s}:policy window_guard_ms 0", account));
    set_limit(c, "m", cfg->model_requests, cfg->model_tokens);
    set_limit(c, "m/t/acme", cfg->tenant_requests, cfg->tenant_tokens);
    set_limit(c, "m/u/*", cfg->user_requests, cfg->user_tokens);
    redisFree(c);

    char files[PROCS][96];
    pid_t pids[PROCS];
    assert_int_equal(pipe(ready_pipe), 0);
    assert_int_equal(pipe(go_pipe), 0);
    for (int i = 0; i < PROCS; i++) {
        snprintf(files[i], sizeof(files[i]), "/tmp/llmq-stress-%d-%d.txt", (int)getpid(), i);
        pids[i] = llmq_test_fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0)
            child(i, files[i]);
    }
    close(ready_pipe[1]); /* a child that died before it was ready: EOF, not a hang */
    close(go_pipe[0]);
    char b, go[PROCS] = {0};
    for (int i = 0; i < PROCS; i++)
        assert_int_equal(read(ready_pipe[0], &b, 1), 1);
    assert_int_equal(write(go_pipe[1], go, PROCS), PROCS);
    close(ready_pipe[0]);
    close(go_pipe[1]);
    for (int i = 0; i < PROCS; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    /* Static: a failed assertion leaves this function by longjmp. */
    static struct record recs[MAX_RECORDS];
    size_t n = 0;
    long long acquires = 0, slowest_start = 0;
    for (int i = 0; i < PROCS; i++) {
        FILE *f = fopen(files[i], "r");
        assert_non_null(f);
        char line[128];
        while (fgets(line, sizeof(line), f) != NULL && n < MAX_RECORDS) {
            long long a;
            if (line[0] == '#' && sscanf(line, "# first answer after %lld", &a) == 1)
                slowest_start = a > slowest_start ? a : slowest_start;
            else if (line[0] == '#' && sscanf(line, "# %lld", &a) == 1)
                acquires += a;
            else if (sscanf(line, "%lld %lld %d", &recs[n].at_ms, &recs[n].cost, &recs[n].user) ==
                     3)
                n++;
        }
        fclose(f);
        unlink(files[i]);
    }
    qsort(recs, n, sizeof(*recs), cmp_record);
    long long req, tok;
    max_window(recs, n, -1, &req, &tok);
    printf("# %s: %zu grants of %lld acquires (slowest first answer %lld ms after the start); "
           "busiest window: %lld requests, %lld tokens\n",
           cfg->name, n, acquires, slowest_start, req, tok);
    /* Demand exceeded the budget: some acquires were denied (else the
     * utilisation below would measure the clients, not the limiter). */
    assert_true(acquires > (long long)n);
    /* The whole path shares the model's and the tenant's buckets. */
    assert_true(within(req, cfg->model_requests));
    assert_true(within(tok, cfg->model_tokens));
    assert_true(within(req, cfg->tenant_requests));
    assert_true(within(tok, cfg->tenant_tokens));
    for (int u = 0; u < USERS; u++) {
        max_window(recs, n, u, &req, &tok);
        assert_true(within(req, cfg->user_requests));
        assert_true(within(tok, cfg->user_tokens));
    }
    /* Utilisation of the binding bucket in each of the first PERIODS full
     * periods from the first grant. */
    long long budget = cfg->binds_requests ? cfg->model_requests : cfg->tenant_tokens;
    long long t0 = recs[0].at_ms, used[PERIODS] = {0}, full_at[PERIODS];
    for (int k = 0; k < PERIODS; k++)
        full_at[k] = -1;
    for (size_t i = 0; i < n && recs[i].at_ms < t0 + PERIODS * PERIOD_MS; i++) {
        int k = (int)((recs[i].at_ms - t0) / PERIOD_MS);
        used[k] += cfg->binds_requests ? 1 : recs[i].cost;
        if (full_at[k] < 0 && (double)used[k] >= 0.99 * (double)budget)
            full_at[k] = recs[i].at_ms - t0 - k * PERIOD_MS;
    }
    for (int k = 0; k < PERIODS; k++) {
        double util = (double)used[k] / (double)budget;
        /* When the period reached 99% tells a slow client (late) from a
         * limiter that held budget back (never). */
        printf("# %s: period %d: %lld of %lld %s: %.2f%% (99%% reached at +%lld ms)\n", cfg->name,
               k, used[k], budget, cfg->binds_requests ? "requests" : "tokens", util * 100,
               full_at[k]);
        assert_true(util >= 0.99);
        assert_true(util <= 1.0);
    }
}

/* The tenant's tokens bind (the users' tokens add up to 1.2 times more).
 * The budget is about 630 grants a period (costs average 25.5), as in the
 * requests case, so that 8 clients exceed it even on a loaded machine: each
 * period's grants follow the previous period's as its admissions leave the
 * window (a denial, an exact sleep and a retry each), so every delay of the
 * clients or of Redis moves that timeline later, period after period. At
 * 40,000 tokens (~1,570 grants) and load ~22 on 2 cores, the 99% point of a
 * period moved from +476 ms (period 0) to +1275 ms (period 2) and period 3
 * ended at 94%; at 16,000 it stayed within +144..+999 ms in 16 runs under such load. */
static void test_tokens_bind(void **state)
{
    (void)state;
    static const struct stress_cfg cfg = {.name = "tokens",
                                          .model_requests = 6000,
                                          .model_tokens = 1000000,
                                          .tenant_requests = NO_LIMIT,
                                          .tenant_tokens = 16000,
                                          .user_requests = NO_LIMIT,
                                          .user_tokens = 4800,
                                          .binds_requests = 0};
    run_stress(&cfg);
}

/* The model's requests bind (the users' requests add up to more; the tokens
 * limits are far away). The budgets are small enough that 8 clients exceed
 * them even on a loaded machine. */
static void test_requests_bind(void **state)
{
    (void)state;
    static const struct stress_cfg cfg = {.name = "requests",
                                          .model_requests = 600,
                                          .model_tokens = 10000000,
                                          .tenant_requests = NO_LIMIT,
                                          .tenant_tokens = 10000000,
                                          .user_requests = 200,
                                          .user_tokens = NO_LIMIT,
                                          .binds_requests = 1};
    run_stress(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_bind),
        cmocka_unit_test(test_requests_bind),
    };
    return cmocka_run_group_tests_name("limiter_stress", tests, NULL, NULL);
}
