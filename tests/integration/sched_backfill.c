/* Backfill (docs/scheduling.md): when a key's head job is denied for tokens,
 * cheaper jobs behind it in its key that fit the room free now are granted,
 * instead of that room idling while the head waits; the head keeps its place
 * and is the first job tried when room comes back. A denial for requests
 * backfills nothing (no job needs fewer than one request), and only the few
 * jobs right behind the head are looked at. The scripts are called directly
 * on the test's Redis (enqueue, dispatch, job_settle), so the assertions are
 * about decisions, never about time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched_support.h"

#define MODEL "gpt-4o-mini"
#define PERIOD "600000" /* no wait ends during a test */

static void enqueue(const struct script_account *a, const char *id, const char *cost)
{
    sched_enqueue(a, id, "normal", MODEL, cost, "", "");
}

/* The ids granted by one dispatch call of up to 16 jobs, space-separated
 * in the reply's order ('' when none), into out; g (may be NULL) gets them. */
static int dispatch_ids(const struct script_account *a, char *out, size_t n, struct sched_grant *g)
{
    struct sched_grant own[16];
    struct sched_grant *got = g != NULL ? g : own;
    int k = sched_dispatch(a, 16, got, NULL, 0);
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < k; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i > 0 ? " " : "", got[i].id);
    return k;
}

/* The ids still queued in the model's key, in order, and the backlog. */
static void queued(const struct script_account *a, char *out, size_t n, long long *backlog)
{
    redisReply *r = redisCommand(a->c, "LRANGE %skq:normal|" MODEL "|| 0 -1", a->P);
    assert_non_null(r);
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->elements; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i > 0 ? " " : "", r->element[i]->str);
    freeReplyObject(r);
    r = redisCommand(a->c, "LLEN %sbacklog:normal", a->P);
    assert_non_null(r);
    *backlog = r->integer;
    freeReplyObject(r);
}

/* Opens account tag with the model's limits lim (NULL-ended, after the
 * model) and enqueues jobs, a space-separated list of id:cost, in order. */
static void open_with_jobs(struct script_account *a, const char *tag, const char *const *lim,
                           const char *jobs)
{
    script_account_open(a, tag);
    sched_limits_set(a, MODEL, lim);
    char id[32];
    for (const char *p = jobs; *p != '\0';) {
        const char *colon = strchr(p, ':'), *end = strchr(p, ' ');
        assert_non_null(colon);
        snprintf(id, sizeof(id), "%.*s", (int)(colon - p), p);
        char cost[16];
        int n = end != NULL ? (int)(end - colon - 1) : (int)strlen(colon + 1);
        snprintf(cost, sizeof(cost), "%.*s", n, colon + 1);
        enqueue(a, id, cost);
        p = end != NULL ? end + 1 : colon + 1 + n;
    }
}

/* Asserts the ids still queued in the model's key (space-separated, in
 * order) and a backlog of as many. */
static void expect_queued(const struct script_account *a, const char *ids, long long n)
{
    char left[256];
    long long backlog = -1;
    queued(a, left, sizeof(left), &backlog);
    assert_string_equal(left, ids);
    assert_int_equal(backlog, n);
}

static const char *const tpm_100[] = {"--tpm", "100", "--period-ms", PERIOD, NULL};

/* A budget of 100 tokens a period: a (60) runs; b (50) is the head and
 * does not fit the 40 left; c (30) and d (10) behind it fit and run in the
 * same call; e (45) does not and keeps its place behind b. */
static void test_cheaper_jobs_take_the_room_the_head_cannot(void **state)
{
    (void)state;
    struct script_account a;
    open_with_jobs(&a, "bfroom", tpm_100, "a:60 b:50 c:30 d:10 e:45");
    char got[256];
    assert_int_equal(dispatch_ids(&a, got, sizeof(got), NULL), 3);
    assert_string_equal(got, "a c d");
    expect_queued(&a, "b e", 2);
    /* the budget is used to the last token: nothing more runs */
    assert_int_equal(dispatch_ids(&a, got, sizeof(got), NULL), 0);
    redisFree(a.c);
}

/* job_settle of grant g as a 429 retried with a refund (room back now). */
static void refund(const struct script_account *a, const struct sched_grant *g)
{
    const char *argv[] = {a->P,   "retry", "normal", g->eid, g->id, g->handle, "-1", "{}",
                          "test", "60000", "1",      MODEL,  "0",   "-1",      "-1", "-1",
                          "-1",   "-1",    "-1",     "",     "-1",  "-1",      "-1", "",
                          "",     "-1",    "-1",     "0",    "429"};
    freeReplyObject(sched_run(a, LLMQ_SCRIPT_JOB_SETTLE, 29, argv));
}

/* After a backfill the head is first: room given back (a's 60, refunded)
 * runs b (50), not e (45) behind it, though both would fit. */
static void test_the_head_runs_first_when_room_comes_back(void **state)
{
    (void)state;
    struct script_account a;
    open_with_jobs(&a, "bfhead", tpm_100, "a:60 b:50 c:30 e:45");
    struct sched_grant g[16];
    char got[256];
    assert_int_equal(dispatch_ids(&a, got, sizeof(got), g), 2);
    assert_string_equal(got, "a c");
    assert_string_equal(g[0].id, "a");
    refund(&a, &g[0]);
    assert_int_equal(dispatch_ids(&a, got, sizeof(got), NULL), 1);
    assert_string_equal(got, "b");
    expect_queued(&a, "e", 1);
    redisFree(a.c);
}

/* A head denied for requests (2 a period, both used) backfills nothing,
 * however cheap the jobs behind it. */
static void test_no_backfill_when_requests_bind(void **state)
{
    (void)state;
    struct script_account a;
    const char *lim[] = {"--rpm", "2", "--tpm", "1000", "--period-ms", PERIOD, NULL};
    open_with_jobs(&a, "bfreq", lim, "a:10 b:10 c:50 d:1");
    char got[256];
    assert_int_equal(dispatch_ids(&a, got, sizeof(got), NULL), 2);
    assert_string_equal(got, "a b");
    expect_queued(&a, "c d", 2);
    redisFree(a.c);
}

/* Only the 8 jobs right behind the head are looked at: a cheap job 9th
 * behind a head that does not fit waits its turn (a denial costs a bounded
 * number of reads, however long the key). */
static void test_backfill_looks_a_few_jobs_behind(void **state)
{
    (void)state;
    struct script_account a;
    open_with_jobs(&a, "bflook", tpm_100, "a:90 b:50");
    char id[16];
    for (int i = 0; i < 8; i++) {
        snprintf(id, sizeof(id), "x%d", i);
        enqueue(&a, id, "20"); /* cheaper than b, but more than the 10 left */
    }
    enqueue(&a, "z", "5");
    char got[256];
    assert_int_equal(dispatch_ids(&a, got, sizeof(got), NULL), 1);
    assert_string_equal(got, "a");
    redisFree(a.c);
}

/* The ids granted by one dispatch call of up to 16 jobs by a worker that
 * holds keys for endpoints (comma-separated), sorted, space-separated. */
static int dispatch_sorted(const struct script_account *a, const char *endpoints, char *out,
                           size_t n)
{
    const char *argv[] = {a->P, "test-consumer", "16", endpoints};
    redisReply *r = sched_run(a, LLMQ_SCRIPT_DISPATCH, endpoints != NULL ? 4 : 3, argv);
    assert_true(r->type == REDIS_REPLY_ARRAY && r->elements >= 4);
    int k = (int)r->elements - 4;
    const char *ids[16];
    for (int i = 0; i < k && i < 16; i++) {
        const char *id = r->element[4 + i]->element[2]->str;
        int j = i;
        while (j > 0 && strcmp(ids[j - 1], id) > 0) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = id;
    }
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < k && i < 16; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i > 0 ? " " : "", ids[i]);
    freeReplyObject(r);
    return k;
}

/* Beside another model, fair share between the models moves on after each
 * grant; the backfill of a denied head still fills its own model's room:
 * gpt-4o-mini (100 tokens) runs a, c and d, gpt-4o runs x and y. */
static void test_backfill_beside_another_model(void **state)
{
    (void)state;
    struct script_account a;
    open_with_jobs(&a, "bfmodels", tpm_100, "a:60 b:50 c:30 d:10");
    const char *lim4o[] = {"--tpm", "1000", "--period-ms", PERIOD, NULL};
    sched_limits_set(&a, "gpt-4o", lim4o);
    sched_enqueue(&a, "x", "normal", "gpt-4o", "10", "", "");
    sched_enqueue(&a, "y", "normal", "gpt-4o", "10", "", "");
    char got[256];
    assert_int_equal(dispatch_sorted(&a, NULL, got, sizeof(got)), 5);
    assert_string_equal(got, "a c d x y");
    expect_queued(&a, "b", 1);
    redisFree(a.c);
}

/* On a named endpoint (a worker holding its key): the endpoint denied the
 * head, and the cheaper jobs behind it are still tried there (an endpoint
 * denied once is otherwise skipped for the rest of the call). */
static void test_backfill_on_an_endpoint(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "bfendpoint");
    const char *add[] = {"llmq", "endpoints", "add", "e1", "--base-url", "http://127.0.0.1:9/v1",
                         NULL};
    struct cli_run r = cli_run(a.name, add);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    const char *lim[] = {"--endpoint", "e1", "--tpm", "100", "--period-ms", PERIOD, NULL};
    sched_limits_set(&a, MODEL, lim);
    const char *ids[] = {"a", "b", "c", "d", "e"}, *costs[] = {"60", "50", "30", "10", "45"};
    for (int i = 0; i < 5; i++)
        enqueue(&a, ids[i], costs[i]);
    char got[256];
    assert_int_equal(dispatch_sorted(&a, "e1", got, sizeof(got)), 3);
    assert_string_equal(got, "a c d");
    expect_queued(&a, "b e", 2);
    redisFree(a.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cheaper_jobs_take_the_room_the_head_cannot),
        cmocka_unit_test(test_the_head_runs_first_when_room_comes_back),
        cmocka_unit_test(test_no_backfill_when_requests_bind),
        cmocka_unit_test(test_backfill_looks_a_few_jobs_behind),
        cmocka_unit_test(test_backfill_beside_another_model),
        cmocka_unit_test(test_backfill_on_an_endpoint),
    };
    return cmocka_run_group_tests_name("sched_backfill", tests, NULL, NULL);
}
