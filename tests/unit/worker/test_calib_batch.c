/* worker/calib_batch.c and worker/model_state.c: when a model's summed
 * calibration samples are due, and what happens to them while Redis is
 * away (worker_fixture.h: real loop, an account whose Redis never answers):
 * the sums are kept, never dropped, and the write is tried again later; the
 * exit flush has nothing to wait for. The writes against a real Redis:
 * calibration_worker_flush. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "calib_batch.h"
#include "model_state.h"
#include "testsupport.h"
#include "worker_fixture.h"

static void test_delay(void **state)
{
    (void)state;
    assert_int_equal(llmq_worker_calib_delay_ms(-1, 5000), 0); /* never written: now */
    assert_int_equal(llmq_worker_calib_delay_ms(5000, 5000), CALIB_WRITE_EVERY_MS);
    assert_int_equal(llmq_worker_calib_delay_ms(5000, 5200), CALIB_WRITE_EVERY_MS - 200);
    assert_int_equal(llmq_worker_calib_delay_ms(5000, 5000 + CALIB_WRITE_EVERY_MS), 0);
    assert_int_equal(llmq_worker_calib_delay_ms(5000, 99000), 0);
}

static void test_redis_away_keeps_the_sums(void **state)
{
    (void)state;
    struct llmq_worker *w = worker_fixture_start();
    struct worker_account *a = &w->accounts[0];
    llmq_worker_calib_add(a, "gpt-4o", 90, 100);
    llmq_worker_calib_add(a, "gpt-4o", 110, 100);
    llmq_worker_calib_add(a, "gpt-4o", -1, 100); /* no estimate: ignored */
    llmq_worker_calib_add(a, "o1", 10, 10);
    struct worker_model *m = llmq_worker_model(a, "gpt-4o");
    assert_non_null(m);
    assert_int_equal(m->calib_pending.n, 2);
    assert_int_equal(m->calib_pending.est, 200);
    assert_true(ev_is_active(&m->calib_timer)); /* never written: due on the next turn */
    assert_int_equal(llmq_worker_model(a, "o1")->calib_pending.n, 1);

    /* The timer's write finds Redis away: the sums stay, tried again later. */
    llmq_worker_calib_write(m);
    assert_int_equal(m->calib_pending.n, 2);
    assert_int_equal(m->calib_in_flight, 0);
    assert_true(ev_is_active(&m->calib_timer));
    /* So does a full batch. */
    for (int i = 0; i < CALIB_WRITE_SAMPLES; i++)
        llmq_worker_calib_add(a, "gpt-4o", 100, 100);
    assert_int_equal(m->calib_pending.n, 2 + CALIB_WRITE_SAMPLES);
    assert_int_equal(m->calib_in_flight, 0);

    /* The exit flush cannot send: nothing to wait for, the sums still kept
     * (logged as not written when the table is freed). */
    assert_int_equal(llmq_worker_calib_flush(a), 0);
    assert_int_equal(m->calib_pending.n, 2 + CALIB_WRITE_SAMPLES);
    assert_false(ev_is_active(&m->calib_timer));
    llmq_worker_models_free(a);
    assert_null(a->models);
    worker_fixture_stop(w);
}

static void test_model_table_is_bounded(void **state)
{
    (void)state;
    struct llmq_worker *w = worker_fixture_start();
    struct worker_account *a = &w->accounts[0];
    char name[32];
    for (int i = 0; i < WORKER_MODELS_MAX; i++) {
        snprintf(name, sizeof(name), "model-%d", i);
        assert_non_null(llmq_worker_model(a, name));
    }
    assert_null(llmq_worker_model(a, "one-too-many"));
    assert_non_null(llmq_worker_model(a, "model-7")); /* known ones still found */
    assert_null(llmq_worker_model(a, NULL));
    llmq_worker_models_free(a);
    char longname[300];
    memset(longname, 'm', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_null(llmq_worker_model(a, longname));
    worker_fixture_stop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay),
        cmocka_unit_test(test_redis_away_keeps_the_sums),
        cmocka_unit_test(test_model_table_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
