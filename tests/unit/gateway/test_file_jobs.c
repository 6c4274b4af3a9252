/* The stored records of an uploaded file's requests (gateway/file_jobs.h):
 * what is encoded decodes to the same job, with its strings pointing into
 * the record, a job with its cost as its model's fallback as a J2 record;
 * every damaged record is refused, never read past its end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "file_jobs.h"

static struct llmq_job sample(char *tenant, char *user)
{
    struct llmq_job j = {
        .id = "req-1",
        .model = "gpt-4o-mini",
        .url = "/v1/chat/completions",
        .body = "{\"model\":\"gpt-4o-mini\",\"messages\":[]}",
        .priority = LLMQ_PRIORITY_HIGH,
        .tenant = tenant,
        .user = user,
        .deadline_ms = 1796000000000LL,
        .ttl_ms = 0,
        .max_attempts = 7,
        .cost = {.prompt_tokens = 11,
                 .completion_tokens = 0,
                 .estimated_tokens = 3,
                 .margin_tokens = 2,
                 .total_tokens = 4113},
    };
    j.body_len = strlen(j.body);
    return j;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct llmq_job in = sample("acme", NULL);
    char *rec = NULL;
    size_t len = 0;
    assert_int_equal(gw_file_job_encode(&in, 42, &rec, &len), 0);
    struct llmq_job out;
    long line = 0;
    assert_int_equal(gw_file_job_decode(rec, len, &out, &line), 0);
    assert_int_equal(line, 42);
    assert_string_equal(out.id, "req-1");
    assert_string_equal(out.model, "gpt-4o-mini");
    assert_ptr_equal(out.url, llmq_job_url_known("/v1/chat/completions")); /* the static one */
    assert_string_equal(out.tenant, "acme");
    assert_null(out.user);
    assert_int_equal(out.body_len, in.body_len);
    assert_memory_equal(out.body, in.body, in.body_len);
    assert_int_equal(out.body[out.body_len], '\0');
    assert_int_equal(out.priority, LLMQ_PRIORITY_HIGH);
    assert_int_equal(out.deadline_ms, in.deadline_ms);
    assert_int_equal(out.ttl_ms, 0);
    assert_int_equal(out.max_attempts, 7);
    assert_int_equal(out.cost.prompt_tokens, 11);
    assert_int_equal(out.cost.estimated_tokens, 3);
    assert_int_equal(out.cost.margin_tokens, 2);
    assert_int_equal(out.cost.total_tokens, 4113);
    /* borrowed from the record: no copies */
    assert_true(out.id > rec && out.body + out.body_len < rec + len);
    free(rec);
}

/* A job with its cost as its model's fallback (gateway/fallbacks.h) is a J2
 * record and comes back with it; one without stays J1, as before J2. */
static void test_fallback_cost_round_trip(void **state)
{
    (void)state;
    struct llmq_job in = sample(NULL, "bob");
    char *rec = NULL;
    size_t len = 0;
    assert_int_equal(gw_file_job_encode(&in, 3, &rec, &len), 0);
    assert_memory_equal(rec, "J1 ", 3);
    struct llmq_job out;
    long line = 0;
    assert_int_equal(gw_file_job_decode(rec, len, &out, &line), 0);
    assert_null(out.fallback_model);
    free(rec);

    in.fallback_model = "gpt-4o-mini";
    in.fallback_cost.total_tokens = 28083;
    in.fallback_cost.prompt_tokens = 25512;
    assert_int_equal(gw_file_job_encode(&in, 3, &rec, &len), 0);
    assert_memory_equal(rec, "J2 ", 3);
    assert_int_equal(gw_file_job_decode(rec, len, &out, &line), 0);
    assert_int_equal(line, 3);
    assert_string_equal(out.fallback_model, "gpt-4o-mini");
    assert_int_equal(out.fallback_cost.total_tokens, 28083);
    assert_int_equal(out.fallback_cost.prompt_tokens, 25512);
    assert_string_equal(out.model, "gpt-4o-mini");
    assert_null(out.tenant);
    assert_string_equal(out.user, "bob");
    assert_int_equal(out.body_len, in.body_len);
    assert_memory_equal(out.body, in.body, in.body_len);
    assert_int_equal(out.cost.total_tokens, 4113);
    assert_true(out.fallback_model > out.body && out.fallback_model < rec + len);
    /* every cut of it is refused */
    for (size_t cut = 0; cut < len; cut++) {
        char *copy = malloc(cut ? cut : 1);
        memcpy(copy, rec, cut);
        assert_int_equal(gw_file_job_decode(copy, cut, &out, &line), -1);
        free(copy);
    }
    free(rec);
}

static void test_empty_and_absent_names_differ(void **state)
{
    (void)state;
    struct llmq_job in = sample("", "bob");
    char *rec = NULL;
    size_t len = 0;
    assert_int_equal(gw_file_job_encode(&in, 1, &rec, &len), 0);
    struct llmq_job out;
    long line = 0;
    assert_int_equal(gw_file_job_decode(rec, len, &out, &line), 0);
    assert_non_null(out.tenant);
    assert_string_equal(out.tenant, "");
    assert_string_equal(out.user, "bob");
    free(rec);
}

/* Every cut of a good record, and a record with one byte changed in its
 * header or a NUL moved, is refused. */
static void test_damaged_records_refused(void **state)
{
    (void)state;
    struct llmq_job in = sample("acme", "bob");
    char *rec = NULL;
    size_t len = 0;
    assert_int_equal(gw_file_job_encode(&in, 9, &rec, &len), 0);
    struct llmq_job out;
    long line = 0;
    for (size_t cut = 0; cut < len; cut++) {
        char *copy = malloc(cut ? cut : 1);
        memcpy(copy, rec, cut);
        assert_int_equal(gw_file_job_decode(copy, cut, &out, &line), -1);
        free(copy);
    }
    /* the base every bad header below differs from by one field */
    {
        const char *good = "J1 normal 1 0 0 5 1 0 0 0 1 1 1 20 -1 -1 2\n";
        char buf[256];
        size_t n = strlen(good);
        memcpy(buf, good, n);
        memcpy(buf + n, "a\0m\0/v1/chat/completions\0\0\0{}\0", 30);
        assert_int_equal(gw_file_job_decode(buf, n + 30, &out, &line), 0);
        assert_string_equal(out.body, "{}");
    }
    const char *bad[] = {
        "J3 normal 1 0 0 5 1 0 0 0 1 1 1 20 -1 -1 2\n" /* another version */,
        "J2 normal 1 0 0 5 1 0 0 0 1 1 1 20 -1 -1 2\n" /* J2 without the fallback's numbers */,
        "J1 urgent 1 0 0 5 1 0 0 0 1 1 1 20 -1 -1 2\n" /* no such priority */,
        "J1 normal 1 0 0 5 1 0 0 0 1 1 1 20 -2 -1 2\n" /* a length below -1 */,
        "J1 normal 1 0 0 500 1 0 0 0 1 1 1 20 -1 -1 2\n" /* attempts over the limit */,
        "J1 normal 1 0 0 5 1 0 0 0 1 1 1 20 -1 -1 999\n" /* longer than the record */,
        "J1 normal 1 0 0 5 x 0 0 0 1 1 1 20 -1 -1 2\n" /* not a number */,
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[256];
        size_t n = strlen(bad[i]);
        memcpy(buf, bad[i], n);
        memcpy(buf + n, "a\0m\0/v1/chat/completions\0\0\0{}\0", 30);
        assert_int_equal(gw_file_job_decode(buf, n + 30, &out, &line), -1);
    }
    /* an unknown url */
    struct llmq_job odd = sample(NULL, NULL);
    odd.url = "/v1/images";
    char *r2 = NULL;
    size_t l2 = 0;
    assert_int_equal(gw_file_job_encode(&odd, 1, &r2, &l2), 0);
    assert_int_equal(gw_file_job_decode(r2, l2, &out, &line), -1);
    free(r2);
    /* a string's NUL missing where its length says */
    rec[len - 1] = 'x';
    assert_int_equal(gw_file_job_decode(rec, len, &out, &line), -1);
    free(rec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_fallback_cost_round_trip),
        cmocka_unit_test(test_empty_and_absent_names_differ),
        cmocka_unit_test(test_damaged_records_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
