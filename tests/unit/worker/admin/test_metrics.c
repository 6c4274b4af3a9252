/* worker/admin/metrics.c: families, series and their Prometheus text. Each case
 * feeds values and compares the rendered text exactly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "admin/metrics.h"

static char *render(struct llmq_metrics *m)
{
    size_t len = 0;
    char *t = llmq_metrics_render(m, &len);
    assert_non_null(t);
    assert_int_equal(len, strlen(t));
    return t;
}

static void test_counter_and_gauge(void **state)
{
    (void)state;
    static const char *const labels[] = {"account", "model", "status", NULL};
    struct llmq_metrics *m = llmq_metrics_new();
    struct llmq_metric *c =
        llmq_metrics_register(m, "jobs_total", "Jobs done.", LLMQ_METRIC_COUNTER, labels, NULL, 0);
    struct llmq_metric *g =
        llmq_metrics_register(m, "in_flight", "In flight.", LLMQ_METRIC_GAUGE, NULL, NULL, 0);
    assert_non_null(c);
    assert_non_null(g);
    const char *a[] = {"acme", "gpt-4o", "200"};
    const char *b[] = {"acme", "gpt-4o", "429"};
    assert_int_equal(llmq_metrics_add(c, a, 1), LLMQ_OK);
    assert_int_equal(llmq_metrics_add(c, b, 1), LLMQ_OK);
    assert_int_equal(llmq_metrics_add(c, a, 2), LLMQ_OK);
    assert_int_equal(llmq_metrics_add(c, a, -1), LLMQ_EINVAL);
    assert_int_equal(llmq_metrics_observe(c, a, 1), LLMQ_EINVAL);
    assert_int_equal(llmq_metrics_set(c, a, 1), LLMQ_EINVAL);
    char *t = render(m);
    assert_string_equal(t, "# HELP jobs_total Jobs done.\n"
                           "# TYPE jobs_total counter\n"
                           "jobs_total{account=\"acme\",model=\"gpt-4o\",status=\"200\"} 3\n"
                           "jobs_total{account=\"acme\",model=\"gpt-4o\",status=\"429\"} 1\n"
                           "# HELP in_flight In flight.\n"
                           "# TYPE in_flight gauge\n"
                           "in_flight 0\n");
    free(t);
    assert_int_equal(llmq_metrics_set(g, NULL, 7.5), LLMQ_OK);
    assert_int_equal(llmq_metrics_set(g, NULL, 2), LLMQ_OK);
    t = render(m);
    assert_non_null(strstr(t, "\nin_flight 2\n"));
    free(t);
    llmq_metrics_free(m);
}

static void test_histogram_cumulative(void **state)
{
    (void)state;
    static const char *const labels[] = {"account", NULL};
    static const double bounds[] = {0.1, 1, 10};
    struct llmq_metrics *m = llmq_metrics_new();
    struct llmq_metric *h = llmq_metrics_register(m, "wait_seconds", "Waits.",
                                                  LLMQ_METRIC_HISTOGRAM, labels, bounds, 3);
    assert_non_null(h);
    const char *a[] = {"x"};
    const double obs[] = {0.05, 0.1, 0.5, 5, 100};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(llmq_metrics_observe(h, a, obs[i]), LLMQ_OK);
    assert_int_equal(llmq_metrics_observe(h, a, NAN), LLMQ_EINVAL);
    char *t = render(m);
    assert_string_equal(t, "# HELP wait_seconds Waits.\n"
                           "# TYPE wait_seconds histogram\n"
                           "wait_seconds_bucket{account=\"x\",le=\"0.1\"} 2\n"
                           "wait_seconds_bucket{account=\"x\",le=\"1\"} 3\n"
                           "wait_seconds_bucket{account=\"x\",le=\"10\"} 4\n"
                           "wait_seconds_bucket{account=\"x\",le=\"+Inf\"} 5\n"
                           "wait_seconds_sum{account=\"x\"} 105.65\n"
                           "wait_seconds_count{account=\"x\"} 5\n");
    free(t);
    llmq_metrics_free(m);
}

static void test_histogram_without_labels(void **state)
{
    (void)state;
    static const double bounds[] = {1};
    struct llmq_metrics *m = llmq_metrics_new();
    struct llmq_metric *h =
        llmq_metrics_register(m, "d", "D.", LLMQ_METRIC_HISTOGRAM, NULL, bounds, 1);
    char *t = render(m);
    assert_string_equal(t, "# HELP d D.\n# TYPE d histogram\n"); /* no series yet */
    free(t);
    assert_int_equal(llmq_metrics_observe(h, NULL, 2), LLMQ_OK);
    t = render(m);
    assert_string_equal(t, "# HELP d D.\n# TYPE d histogram\n"
                           "d_bucket{le=\"1\"} 0\n"
                           "d_bucket{le=\"+Inf\"} 1\n"
                           "d_sum 2\n"
                           "d_count 1\n");
    free(t);
    llmq_metrics_free(m);
}

static void test_escaping(void **state)
{
    (void)state;
    static const char *const labels[] = {"model", NULL};
    struct llmq_metrics *m = llmq_metrics_new();
    struct llmq_metric *c = llmq_metrics_register(m, "e_total", "Help with \\ and\nnewline \"q\".",
                                                  LLMQ_METRIC_COUNTER, labels, NULL, 0);
    const char *v[] = {"a\"b\\c\nd\xff\xc3\xa9"};
    llmq_metrics_add(c, v, 1);
    const char *empty[] = {NULL};
    llmq_metrics_add(c, empty, 1);
    char *t = render(m);
    assert_string_equal(t, "# HELP e_total Help with \\\\ and\\nnewline \"q\".\n"
                           "# TYPE e_total counter\n"
                           "e_total{model=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\xc3\xa9\"} 1\n"
                           "e_total{model=\"\"} 1\n");
    free(t);
    llmq_metrics_free(m);
}

static void test_values(void **state)
{
    (void)state;
    struct llmq_metrics *m = llmq_metrics_new();
    struct llmq_metric *g = llmq_metrics_register(m, "v", "V.", LLMQ_METRIC_GAUGE, NULL, NULL, 0);
    const double in[] = {0.1, 1e21, -3, INFINITY, 123456789012.0};
    const char *out[] = {"v 0.1\n", "v 1e+21\n", "v -3\n", "v +Inf\n", "v 123456789012\n"};
    for (int i = 0; i < 5; i++) {
        llmq_metrics_set(g, NULL, in[i]);
        char *t = render(m);
        assert_non_null(strstr(t, out[i]));
        free(t);
    }
    llmq_metrics_free(m);
}

static void test_invalid_registrations(void **state)
{
    (void)state;
    static const char *const bad_label[] = {"1x", NULL};
    static const char *const reserved[] = {"__x", NULL};
    static const char *const le[] = {"le", NULL};
    static const char *const five[] = {"a", "b", "c", "d", "e", NULL};
    static const double down[] = {1, 0.5};
    static const double one[] = {1};
    struct llmq_metrics *m = llmq_metrics_new();
    enum llmq_metric_type c = LLMQ_METRIC_COUNTER, h = LLMQ_METRIC_HISTOGRAM;
    assert_null(llmq_metrics_register(m, "", "", c, NULL, NULL, 0));
    assert_null(llmq_metrics_register(m, "9lives", "", c, NULL, NULL, 0));
    assert_null(llmq_metrics_register(m, "has-dash", "", c, NULL, NULL, 0));
    assert_null(llmq_metrics_register(m, "ok", "", c, bad_label, NULL, 0));
    assert_null(llmq_metrics_register(m, "ok", "", c, reserved, NULL, 0));
    assert_null(llmq_metrics_register(m, "ok", "", h, le, one, 1));
    assert_null(llmq_metrics_register(m, "ok", "", c, five, NULL, 0));
    assert_null(llmq_metrics_register(m, "ok", "", h, NULL, down, 2));
    assert_null(llmq_metrics_register(m, "ok", "", c, NULL, one, 1));
    assert_non_null(llmq_metrics_register(m, "ok:sub_total", "", c, le, NULL, 0));
    llmq_metrics_free(m);
    llmq_metrics_free(NULL);
    assert_int_equal(llmq_metrics_add(NULL, NULL, 1), LLMQ_OK);
}

static void test_series_cap(void **state)
{
    (void)state;
    static const char *const labels[] = {"model", NULL};
    struct llmq_metrics *m = llmq_metrics_new();
    struct llmq_metric *c =
        llmq_metrics_register(m, "c_total", "C.", LLMQ_METRIC_COUNTER, labels, NULL, 0);
    char name[32];
    const char *v[] = {name};
    for (int i = 0; i < LLMQ_METRICS_MAX_SERIES; i++) {
        snprintf(name, sizeof(name), "m%d", i);
        assert_int_equal(llmq_metrics_add(c, v, 1), LLMQ_OK);
    }
    snprintf(name, sizeof(name), "one-too-many");
    assert_int_equal(llmq_metrics_add(c, v, 1), LLMQ_ETOOBIG);
    assert_int_equal(llmq_metrics_add(c, v, 1), LLMQ_ETOOBIG);
    snprintf(name, sizeof(name), "m7");
    assert_int_equal(llmq_metrics_add(c, v, 1), LLMQ_OK); /* existing series still count */
    char *t = render(m);
    assert_non_null(strstr(t, "c_total{model=\"m7\"} 2\n"));
    assert_null(strstr(t, "one-too-many"));
    assert_non_null(strstr(t, "\nllmq_metrics_series_dropped_total 2\n"));
    free(t);
    llmq_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_and_gauge),
        cmocka_unit_test(test_histogram_cumulative),
        cmocka_unit_test(test_histogram_without_labels),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_invalid_registrations),
        cmocka_unit_test(test_series_cap),
    };
    return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
