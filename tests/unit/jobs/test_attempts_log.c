/* A job's calls as JSON (jobs/attempts_log.h), the one parser behind the
 * dashboard's job view and `llmq results --calls`: each field of a call,
 * the implicit endpoint, the count of calls made beside the ones kept, an
 * empty log, and calls that do not parse left out (not a crash, not a
 * half-filled entry). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/attempts_log.h"

/* The calls of log (a C string) as compact JSON text (new); *total gets n. */
static char *calls_text(const char *log, long long *total)
{
    json_t *list = llmq_attempts_log_json(log, strlen(log), total);
    assert_non_null(list);
    char *text = json_dumps(list, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(list);
    assert_non_null(text);
    return text;
}

static void test_fields(void **state)
{
    (void)state;
    long long total = -1;
    char *text = calls_text("10|retry 500 1765000000000 12 -1 -1 - gpt-4o-mini"
                            "|done 200 1765000000100 850 40 64 ep-a gpt-4o",
                            &total);
    assert_int_equal(total, 10); /* every call made, not the ones kept */
    assert_string_equal(
        text, "[{\"mode\":\"retry\",\"status\":\"500\",\"start_ms\":1765000000000,\"took_ms\":12,"
              "\"in_tokens\":-1,\"out_tokens\":-1,\"endpoint\":\"\",\"model\":\"gpt-4o-mini\"},"
              "{\"mode\":\"done\",\"status\":\"200\",\"start_ms\":1765000000100,\"took_ms\":850,"
              "\"in_tokens\":40,\"out_tokens\":64,\"endpoint\":\"ep-a\",\"model\":\"gpt-4o\"}]");
    free(text);
}

static void test_empty(void **state)
{
    (void)state;
    long long total = -1;
    char *text = calls_text("", &total);
    assert_int_equal(total, 0);
    assert_string_equal(text, "[]");
    free(text);
    text = calls_text("0", &total);
    assert_int_equal(total, 0);
    assert_string_equal(text, "[]");
    free(text);
    /* calls_total may be NULL */
    const char *one = "1|dead timeout 1 -1 -1 -1 - m";
    json_t *list = llmq_attempts_log_json(one, strlen(one), NULL);
    assert_non_null(list);
    assert_int_equal(json_array_size(list), 1);
    json_decref(list);
}

/* Only len bytes are read: the log need not end with a NUL. */
static void test_length(void **state)
{
    (void)state;
    const char log[] = "2|done 200 5 6 7 8 - m|done 200 9 9 9 9 - n";
    long long total = 0;
    json_t *list = llmq_attempts_log_json(log, strlen("2|done 200 5 6 7 8 - m"), &total);
    assert_non_null(list);
    assert_int_equal(total, 2);
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "model")), "m");
    json_decref(list);
}

static void test_bad_calls_left_out(void **state)
{
    (void)state;
    long long total = 0;
    char *text = calls_text("4|done 200 x 1 1 1 - m"     /* start not a number */
                            "|done 200 1 1 1 1 -"        /* 7 words */
                            "|" /* empty */ "|junk"      /* 1 word */
                            "|moved 429 3 4 5 6 ep-b m", /* this one is kept */
                            &total);
    assert_int_equal(total, 4);
    assert_string_equal(text,
                        "[{\"mode\":\"moved\",\"status\":\"429\",\"start_ms\":3,\"took_ms\":4,"
                        "\"in_tokens\":5,\"out_tokens\":6,\"endpoint\":\"ep-b\",\"model\":"
                        "\"m\"}]");
    free(text);
    /* a word longer than its field (a name past LLMQ_JOB_ID_MAX) is left
     * out with its call, not overrun nor spilled into the next field */
    char log[600];
    char name[300];
    memset(name, 'e', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    snprintf(log, sizeof(log), "1|done 200 1 1 1 1 %s m", name);
    json_t *list = llmq_attempts_log_json(log, strlen(log), &total);
    assert_non_null(list);
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);
    name[200] = '\0'; /* a name of the most bytes is kept whole */
    snprintf(log, sizeof(log), "1|done 200 1 1 1 1 %s m", name);
    list = llmq_attempts_log_json(log, strlen(log), &total);
    assert_non_null(list);
    assert_int_equal(json_array_size(list), 1);
    assert_int_equal(
        strlen(json_string_value(json_object_get(json_array_get(list, 0), "endpoint"))), 200);
    json_decref(list);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_length),
        cmocka_unit_test(test_bad_calls_left_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
