/* Priority order within one dispatch call: when jobs of every priority can
 * run now and the worker has fewer free slots than there are jobs, every
 * high job is granted before any normal one and every normal one before any
 * low one, whatever the order they were queued in (low first here). The
 * model's limit has room for all of them at every priority's headroom, so
 * the only thing that decides is the order. The scripts are called directly
 * (enqueue, dispatch): the assertions are the grants of each call, in the
 * order the call made them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "sched_support.h"

#define MODEL "gpt-4o-mini"

static void enqueue_n(const struct script_account *a, const char *prio, int n)
{
    char id[64];
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "%s-%d", prio, i);
        sched_enqueue(a, id, prio, MODEL, "10", "", "");
    }
}

static void test_high_before_normal_before_low(void **state)
{
    (void)state;
    struct script_account a;
    script_account_open(&a, "prioorder");
    const char *lim[] = {"--rpm", "1000", NULL};
    sched_limits_set(&a, MODEL, lim);
    enqueue_n(&a, "low", 3);
    enqueue_n(&a, "normal", 3);
    enqueue_n(&a, "high", 3);
    /* 4 slots for 9 runnable jobs: the 3 high, then the first normal */
    struct sched_grant g[16];
    int n = sched_dispatch(&a, 4, g, NULL, 0);
    assert_int_equal(n, 4);
    for (int i = 0; i < 3; i++)
        assert_string_equal(g[i].prio, "high");
    assert_string_equal(g[3].id, "normal-0");
    /* 3 more: the other normal ones, then the first low */
    n = sched_dispatch(&a, 3, g, NULL, 0);
    assert_int_equal(n, 3);
    assert_string_equal(g[0].id, "normal-1");
    assert_string_equal(g[1].id, "normal-2");
    assert_string_equal(g[2].id, "low-0");
    /* a high job queued now goes before the low ones left */
    sched_enqueue(&a, "high-late", "high", MODEL, "10", "", "");
    n = sched_dispatch(&a, 1, g, NULL, 0);
    assert_int_equal(n, 1);
    assert_string_equal(g[0].id, "high-late");
    assert_int_equal(sched_dispatch(&a, 16, g, NULL, 0), 2);
    redisFree(a.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_high_before_normal_before_low),
    };
    return cmocka_run_group_tests_name("sched_priority_order", tests, NULL, NULL);
}
