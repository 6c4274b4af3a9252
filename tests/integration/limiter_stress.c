/* 8 processes acquire with random costs against one 3-level path (model ->
 * tenant -> 4 users) for several periods, demanding more than the tenant
 * allows. From the admission times the script returns:
 *   - no window of one period holds more requests or tokens than any bucket
 *     allows (checked at every admission, where the maximum window starts);
 *   - the binding bucket (the tenant's tokens) is used >= 99% per period.
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
#define MODEL_REQUESTS 6000
#define MODEL_TOKENS 1000000
#define TENANT_TOKENS 100000
#define USER_TOKENS 30000
#define MAX_RECORDS 200000

struct record {
    long long at_ms;
    long long cost;
    int user;
};

static char account[64];

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
    unsigned int seed = (unsigned int)(idx * 7919 + 1);
    long long stop = llmq_test_now_ms() + PERIODS * PERIOD_MS + PERIOD_MS / 2;
    long long acquires = 0;
    while (llmq_test_now_ms() < stop) {
        struct llmq_grant g;
        long long cost = 1 + rand_r(&seed) % 50;
        if (llmq_limiter_acquire(lim, &p, cost, LLMQ_PRIORITY_NORMAL, &g, &err) != LLMQ_OK)
            _exit(13);
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

static void test_many_processes_never_exceed(void **state)
{
    (void)state;
    llmq_test_unique_name(account, sizeof(account), "stress");
    redisContext *c = llmq_test_redis_connect();
    /* The exact window itself is under test (its utilisation per period):
     * no arrival guard, which would hold each admission longer. */
    redisReply *r = redisCommand(c, "HSET llmq:{%s}:policy window_guard_ms 0", account);
    freeReplyObject(r);
    r = redisCommand(c, "HSET llmq:{%s}:limit:m requests %d tokens %d period_ms %d", account,
                     MODEL_REQUESTS, MODEL_TOKENS, PERIOD_MS);
    freeReplyObject(r);
    r = redisCommand(c, "HSET llmq:{%s}:limit:m/t/acme tokens %d period_ms %d", account,
                     TENANT_TOKENS, PERIOD_MS);
    freeReplyObject(r);
    r = redisCommand(c, "HSET llmq:{%s}:limit:m/u/* tokens %d period_ms %d", account,
                     USER_TOKENS, PERIOD_MS);
    freeReplyObject(r);
    redisFree(c);

    char files[PROCS][96];
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        snprintf(files[i], sizeof(files[i]), "/tmp/llmq-stress-%d-%d.txt", (int)getpid(), i);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0)
            child(i, files[i]);
    }
    for (int i = 0; i < PROCS; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    struct record *recs = malloc(sizeof(*recs) * MAX_RECORDS);
    size_t n = 0;
    long long acquires = 0;
    for (int i = 0; i < PROCS; i++) {
        FILE *f = fopen(files[i], "r");
        assert_non_null(f);
        char line[128];
        while (fgets(line, sizeof(line), f) != NULL && n < MAX_RECORDS) {
            long long a;
            if (line[0] == '#' && sscanf(line, "# %lld", &a) == 1)
                acquires += a;
            else if (sscanf(line, "%lld %lld %d", &recs[n].at_ms, &recs[n].cost,
                            &recs[n].user) == 3)
                n++;
        }
        fclose(f);
        unlink(files[i]);
    }
    qsort(recs, n, sizeof(*recs), cmp_record);
    long long req, tok;
    max_window(recs, n, -1, &req, &tok);
    printf("# %zu grants of %lld acquires; busiest window: %lld requests, %lld tokens\n", n,
           acquires, req, tok);
    assert_true(acquires >= PROCS * 1000);
    assert_true(req <= MODEL_REQUESTS);
    assert_true(tok <= TENANT_TOKENS); /* the whole path shares the tenant */
    for (int u = 0; u < USERS; u++) {
        max_window(recs, n, u, &req, &tok);
        assert_true(tok <= USER_TOKENS);
    }
    /* Utilisation of the binding bucket over the first PERIODS periods. */
    long long t0 = recs[0].at_ms, used = 0;
    for (size_t i = 0; i < n && recs[i].at_ms < t0 + PERIODS * PERIOD_MS; i++)
        used += recs[i].cost;
    double util = (double)used / ((double)TENANT_TOKENS * PERIODS);
    printf("# tenant tokens used %lld of %lld budget: %.2f%%\n", used,
           (long long)TENANT_TOKENS * PERIODS, util * 100);
    assert_true(util >= 0.99);
    assert_true(util <= 1.0);
    free(recs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_processes_never_exceed),
    };
    return cmocka_run_group_tests_name("limiter_stress", tests, NULL, NULL);
}
