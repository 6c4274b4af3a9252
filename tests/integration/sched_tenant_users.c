/* A user is a user of its tenant: user buckets (and fair-share weights) are
 * scoped by tenant, so tenant B's "alice" using up her budget never delays
 * tenant A's "alice". `llmq limits set M --user U` without --tenant is the
 * limit of user U in every tenant, each tenant's U a bucket of its own;
 * --tenant T --user U is T's U alone; '*' the default (--tenant T --user '*':
 * T's users). A user without a tenant is a user of no tenant's: its bucket is
 * "<model>/u/<user>", apart from every tenant's. Last, the layout older
 * versions wrote (user limits, weights and the one bucket's state named
 * "<model>/u/<user>" for the users of every tenant, jobs queued in
 * kq:<prio>|<model>|<tenant>|<user>) keeps working: the limits hold per
 * tenant, admissions made before the upgrade still count, the weights still
 * weigh, the queued jobs are dispatched. The scripts are called directly (enqueue,
 * dispatch): the assertions are the limiter's grants and denials, never a
 * time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched_support.h"

#define MODEL "gpt-4o-mini"
#define PERIOD "600000" /* no window reopens during a test */

/* Enqueues n jobs "<tag>-<i>" (i from first) of tenant and user. */
static void enqueue_n(const struct script_account *a, const char *tag, int first, int n,
                      const char *tenant, const char *user)
{
    char id[64];
    for (int i = first; i < first + n; i++) {
        snprintf(id, sizeof(id), "%s-%d", tag, i);
        sched_enqueue(a, id, "normal", MODEL, "10", tenant, user);
    }
}

/* How many of the n grants in g have ids starting with "<tag>-". */
static int granted(const struct sched_grant *g, int n, const char *tag)
{
    size_t len = strlen(tag);
    int k = 0;
    for (int i = 0; i < n; i++)
        k += strncmp(g[i].id, tag, len) == 0 && g[i].id[len] == '-';
    return k;
}

/* The case: `--user '*' --rpm 3`; tenant B's alice sends 4 jobs,
 * then tenant A's alice one: A's alice is granted in the same dispatch call
 * that denies B's fourth; A's alice has three of her own. */
static void test_same_user_of_two_tenants(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "tusame");
    const char *lim[] = {"--user", "*", "--rpm", "3", "--period-ms", PERIOD, NULL};
    sched_limits_set(&a, MODEL, lim);
    enqueue_n(&a, "b", 0, 4, "tenant-b", "alice");
    enqueue_n(&a, "a", 0, 1, "tenant-a", "alice");
    struct sched_grant g[16];
    int n = sched_dispatch(&a, 16, g, NULL, 0);
    assert_int_equal(granted(g, n, "b"), 3);
    assert_int_equal(granted(g, n, "a"), 1);
    assert_int_equal(n, 4);
    /* B's alice waits for her window; A's alice still has two. */
    enqueue_n(&a, "a", 1, 3, "tenant-a", "alice");
    n = sched_dispatch(&a, 16, g, NULL, 0);
    assert_int_equal(n, 2);
    assert_int_equal(granted(g, n, "a"), 2);
    assert_int_equal(sched_dispatch(&a, 16, NULL, NULL, 0), 0);
    redisFree(a.c);
}

/* A job without a tenant is not any tenant's: its alice and tenant A's
 * alice have a bucket each, and neither delays the other. */
static void test_no_tenant_is_apart(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "tunone");
    const char *lim[] = {"--user", "alice", "--rpm", "2", "--period-ms", PERIOD, NULL};
    sched_limits_set(&a, MODEL, lim);
    enqueue_n(&a, "n", 0, 3, "", "alice");
    enqueue_n(&a, "a", 0, 3, "tenant-a", "alice");
    struct sched_grant g[16];
    int n = sched_dispatch(&a, 16, g, NULL, 0);
    assert_int_equal(granted(g, n, "n"), 2);
    assert_int_equal(granted(g, n, "a"), 2);
    assert_int_equal(n, 4);
    redisFree(a.c);
}

/* Which limit a user takes, first set of: its own (--tenant T --user U),
 * its tenant's default (--tenant T --user '*'), the user's in every tenant
 * (--user U), every user's (--user '*'). */
static void test_which_limit_a_user_takes(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "tuwhich");
    const char *every[] = {"--user", "*", "--rpm", "4", "--period-ms", PERIOD, NULL};
    const char *vip[] = {"--user", "vip", "--rpm", "3", "--period-ms", PERIOD, NULL};
    const char *a_users[] = {"--tenant", "tenant-a",    "--user", "*", "--rpm",
                             "2",        "--period-ms", PERIOD,   NULL};
    const char *a_bob[] = {"--tenant", "tenant-a",    "--user", "bob", "--rpm",
                           "1",        "--period-ms", PERIOD,   NULL};
    sched_limits_set(&a, MODEL, every);
    sched_limits_set(&a, MODEL, vip);
    sched_limits_set(&a, MODEL, a_users);
    sched_limits_set(&a, MODEL, a_bob);
    enqueue_n(&a, "abob", 0, 6, "tenant-a", "bob"); /* its own: 1 */
    enqueue_n(&a, "acat", 0, 6, "tenant-a", "cat"); /* tenant-a's users: 2 */
    enqueue_n(&a, "avip", 0, 6, "tenant-a", "vip"); /* tenant-a's users: 2 */
    enqueue_n(&a, "bvip", 0, 6, "tenant-b", "vip"); /* vip in every tenant: 3 */
    enqueue_n(&a, "bbob", 0, 6, "tenant-b", "bob"); /* every user: 4 */
    enqueue_n(&a, "nvip", 0, 6, "", "vip");         /* vip without a tenant: 3 */
    struct sched_grant g[16];
    int n = sched_dispatch(&a, 16, g, NULL, 0);
    assert_int_equal(granted(g, n, "abob"), 1);
    assert_int_equal(granted(g, n, "acat"), 2);
    assert_int_equal(granted(g, n, "avip"), 2);
    assert_int_equal(granted(g, n, "bvip"), 3);
    assert_int_equal(granted(g, n, "bbob"), 4);
    assert_int_equal(granted(g, n, "nvip"), 3);
    assert_int_equal(n, 15);
    /* each has its own bucket state under its tenant */
    char key[256];
    snprintf(key, sizeof(key), "%slimit:%s/t/tenant-a/u/cat", a.P, MODEL);
    assert_int_equal(redis_int(a.c, "HGET %s %s", key, "n"), 2);
    snprintf(key, sizeof(key), "%slimit:%s/t/tenant-b/u/vip", a.P, MODEL);
    assert_int_equal(redis_int(a.c, "HGET %s %s", key, "n"), 3);
    redisFree(a.c);
}

/* A weight set for a user of one tenant weighs only there. A model bucket of
 * 8 requests, two tenants with the same two users, 4 jobs each; tenant A's
 * alice weighs 3: the tenants get 4 each, A's go 3:1 to alice, B's 2:2. */
static void test_weight_is_the_tenants(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "tuweight");
    const char *model[] = {"--rpm", "8", "--period-ms", PERIOD, NULL};
    const char *w[] = {"--tenant", "tenant-a", "--user", "alice", "--weight", "3", NULL};
    sched_limits_set(&a, MODEL, model);
    sched_limits_set(&a, MODEL, w);
    enqueue_n(&a, "aalice", 0, 4, "tenant-a", "alice");
    enqueue_n(&a, "abob", 0, 4, "tenant-a", "bob");
    enqueue_n(&a, "balice", 0, 4, "tenant-b", "alice");
    enqueue_n(&a, "bbob", 0, 4, "tenant-b", "bob");
    struct sched_grant g[16];
    int n = sched_dispatch(&a, 16, g, NULL, 0);
    assert_int_equal(n, 8);
    /* the tenants share 4:4; within A alice weighs 3, within B both 1 */
    assert_int_equal(granted(g, n, "aalice"), 3);
    assert_int_equal(granted(g, n, "abob"), 1);
    assert_int_equal(granted(g, n, "balice"), 2);
    assert_int_equal(granted(g, n, "bbob"), 2);
    redisFree(a.c);
}

/* HSET key field value [field value] as `llmq limits set` of an older
 * version wrote it. */
static void hset(const struct script_account *a, const char *key, const char *f1, const char *v1,
                 const char *f2, const char *v2)
{
    redisReply *r = f2 != NULL
                        ? redisCommand(a->c, "HSET %s%s %s %s %s %s", a->P, key, f1, v1, f2, v2)
                        : redisCommand(a->c, "HSET %s%s %s %s", a->P, key, f1, v1);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

/* The layout of older versions, written as they wrote it: `llmq limits set
 * M --user '*' --rpm 3 --period-ms P` (limit:M/u/ + '*'), `--user alice
 * --weight 3` (weights M2/u/alice), the state of the one bucket their
 * dispatch kept for the alice of every tenant (limit:M/u/alice, bw:M/u/alice:
 * two admissions a moment ago, as lua/lib/limiter.lua's limiter_flush
 * wrote them), and jobs queued before the upgrade (enqueue is unchanged:
 * kq:normal|M|<tenant>|<user>). The new dispatch holds the old default per
 * tenant (bob: 3), counts the two admissions of the old shared bucket in
 * each tenant's alice (1 left each, not 3), weighs alice 3 in each tenant,
 * and sends the queued jobs. */
static void test_old_layout_keeps_working(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "tuold");
    hset(&a, "limit:" MODEL "/u/*", "requests", "3", "period_ms", PERIOD);
    hset(&a, "limit:gpt-4o", "requests", "4", "period_ms", PERIOD);
    hset(&a, "weights", "gpt-4o/u/alice", "3", NULL, NULL);
    redisReply *t = redisCommand(a.c, "TIME");
    assert_true(t != NULL && t->type == REDIS_REPLY_ARRAY && t->elements == 2);
    char at[32], exp[32];
    long long at_ms = strtoll(t->element[0]->str, NULL, 10) * 1000 - 1000;
    freeReplyObject(t);
    snprintf(at, sizeof(at), "%lld", at_ms);
    snprintf(exp, sizeof(exp), "%lld", at_ms + 2 * 601000);
    hset(&a, "limit:" MODEL "/u/alice", "n", "2", "tok", "20");
    hset(&a, "limit:" MODEL "/u/alice", "oldest", at, "exp", exp);
    redisReply *r = redisCommand(a.c, "ZADD %sbw:%s/u/alice %s 41:10 %s 42:10", a.P, MODEL, at, at);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    enqueue_n(&a, "a", 0, 4, "tenant-a", "alice");
    enqueue_n(&a, "b", 0, 4, "tenant-b", "alice");
    enqueue_n(&a, "c", 0, 4, "tenant-a", "bob");
    char id[64];
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof(id), "walice-%d", i);
        sched_enqueue(&a, id, "normal", "gpt-4o", "10", "tenant-a", "alice");
        snprintf(id, sizeof(id), "wbob-%d", i);
        sched_enqueue(&a, id, "normal", "gpt-4o", "10", "tenant-a", "bob");
    }
    struct sched_grant g[16];
    int n = sched_dispatch(&a, 16, g, NULL, 0);
    assert_int_equal(granted(g, n, "a"), 1);
    assert_int_equal(granted(g, n, "b"), 1);
    assert_int_equal(granted(g, n, "c"), 3);
    assert_int_equal(granted(g, n, "walice"), 3);
    assert_int_equal(granted(g, n, "wbob"), 1);
    assert_int_equal(n, 9);
    assert_int_equal(sched_dispatch(&a, 16, NULL, NULL, 0), 0);
    redisFree(a.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_user_of_two_tenants),
        cmocka_unit_test(test_no_tenant_is_apart),
        cmocka_unit_test(test_which_limit_a_user_takes),
        cmocka_unit_test(test_weight_is_the_tenants),
        cmocka_unit_test(test_old_layout_keeps_working),
    };
    return cmocka_run_group_tests_name("sched_tenant_users", tests, NULL, NULL);
}
