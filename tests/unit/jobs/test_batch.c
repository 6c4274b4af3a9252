/* Batch files checked whole, and the job id set behind duplicate detection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/batch.h"
#include "jobs/job_idset.h"

#define CHAT(id)                                                                                   \
    "{\"custom_id\":\"" id "\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":"              \
    "\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}"

static void test_lines_errors_duplicates(void **state)
{
    (void)state;
    const char *text = CHAT("a") "\n"
                                 "\n"
                                 "not json\n" CHAT("b") "\r\n" CHAT(
                                     "a") "\n"
                                          "{\"url\":\"/v1/chat/completions\"}\n" CHAT("c");
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_batch b = {0};
    assert_int_equal(llmq_batch_parse(text, strlen(text), &d, &b, NULL), LLMQ_OK);
    assert_int_equal(b.n_jobs, 3);
    assert_string_equal(b.jobs[0].id, "a");
    assert_int_equal(b.job_lines[0], 1);
    assert_string_equal(b.jobs[1].id, "b");
    assert_int_equal(b.job_lines[1], 4);
    assert_string_equal(b.jobs[2].id, "c");
    assert_int_equal(b.job_lines[2], 7);
    assert_int_equal(b.n_errors, 3);
    assert_int_equal(b.errors[0].line, 3);
    assert_non_null(strstr(b.errors[0].msg, "bad JSON"));
    assert_int_equal(b.errors[1].line, 5);
    assert_int_equal(b.errors[1].rc, LLMQ_EDUPLICATE);
    assert_non_null(strstr(b.errors[1].msg, "first on line 1"));
    assert_int_equal(b.errors[2].line, 6);
    assert_non_null(strstr(b.errors[2].msg, "missing \"body\""));
    llmq_batch_clear(&b);
    llmq_batch_clear(NULL);
}

static void test_empty(void **state)
{
    (void)state;
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_batch b = {0};
    assert_int_equal(llmq_batch_parse("", 0, &d, &b, NULL), LLMQ_OK);
    assert_int_equal(b.n_jobs + b.n_errors, 0);
    llmq_batch_clear(&b);
}

static void test_many_generated_ids_unique(void **state)
{
    (void)state;
    size_t n = 20000;
    size_t one =
        strlen("{\"url\":\"/v1/embeddings\",\"body\":{\"model\":\"m\",\"input\":\"x\"}}\n");
    char *text = malloc(n * one + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(text + i * one,
               "{\"url\":\"/v1/embeddings\",\"body\":{\"model\":\"m\",\"input\":\"x\"}}\n", one);
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    d.generate_ids = 1;
    struct llmq_batch b = {0};
    assert_int_equal(llmq_batch_parse(text, n * one, &d, &b, NULL), LLMQ_OK);
    assert_int_equal(b.n_jobs, n);
    assert_int_equal(b.n_errors, 0);
    llmq_batch_clear(&b);
    free(text);
}

/* A file large enough to be checked on several threads: errors and
 * duplicates spread over the parts still come out in line order, and the
 * earlier line of a repeated id is the one kept. */
static void test_parallel_order(void **state)
{
    (void)state;
    size_t n = 30000, cap = n * 160, off = 0;
    char *text = malloc(cap);
    for (size_t i = 0; i < n; i++) {
        if (i % 7000 == 6999)
            off += (size_t)snprintf(text + off, cap - off, "{broken %zu\n", i);
        else
            off += (size_t)snprintf(text + off, cap - off,
                                    "{\"custom_id\":\"id%zu\",\"url\":\"/v1/embeddings\",\"body\":"
                                    "{\"model\":\"m\",\"input\":\"x\"}}\n",
                                    i == n - 1 ? (size_t)5 : i); /* last repeats line 6 */
    }
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_batch b = {0};
    assert_int_equal(llmq_batch_parse(text, off, &d, &b, NULL), LLMQ_OK);
    assert_int_equal(b.n_errors, 5);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(b.errors[i].line, (long)(7000 * (i + 1)));
        assert_non_null(strstr(b.errors[i].msg, "bad JSON"));
    }
    assert_int_equal(b.errors[4].line, (long)n);
    assert_non_null(strstr(b.errors[4].msg, "duplicate custom_id \"id5\" (first on line 6)"));
    assert_int_equal(b.n_jobs, n - 5);
    for (size_t i = 1; i < b.n_jobs; i++)
        assert_true(b.job_lines[i] > b.job_lines[i - 1]);
    llmq_batch_clear(&b);
    free(text);
}

static void test_idset(void **state)
{
    (void)state;
    struct llmq_job_idset *s = llmq_job_idset_new(0);
    char keys[5000][16];
    for (int i = 0; i < 5000; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        assert_int_equal(llmq_job_idset_add(s, keys[i], i, NULL), 1);
    }
    long v = -1;
    assert_int_equal(llmq_job_idset_add(s, "k42", 0, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(llmq_job_idset_count(s), 5000);
    for (int i = 0; i < 5000; i += 2)
        assert_int_equal(llmq_job_idset_remove(s, keys[i]), 1);
    assert_int_equal(llmq_job_idset_remove(s, "k0"), 0);
    assert_int_equal(llmq_job_idset_count(s), 2500);
    assert_int_equal(llmq_job_idset_get(s, "k1", &v), 1);
    assert_int_equal(v, 1);
    assert_int_equal(llmq_job_idset_get(s, "k2", NULL), 0);
    /* tombstones are reused and the table stays usable through growth */
    for (int i = 0; i < 5000; i += 2)
        assert_int_equal(llmq_job_idset_add(s, keys[i], i, NULL), 1);
    assert_int_equal(llmq_job_idset_count(s), 5000);
    llmq_job_idset_free(s);
    llmq_job_idset_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_errors_duplicates),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_many_generated_ids_unique),
        cmocka_unit_test(test_parallel_order),
        cmocka_unit_test(test_idset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
