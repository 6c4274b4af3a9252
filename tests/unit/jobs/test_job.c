/* The job codec: the Batch corpus (tests/data/batch), options and defaults,
 * output lines, generated ids. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/batch.h"
#include "jobs/job.h"
#include "data_files.h"
#include "json_alloc.h"
#include "redis/redis.h"

static size_t count_nonblank(const char *buf, size_t len)
{
    size_t n = 0;
    int content = 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == '\n') {
            n += content;
            content = 0;
        } else if (buf[i] != ' ' && buf[i] != '\r' && buf[i] != '\t') {
            content = 1;
        }
    }
    return n + content;
}

static void test_valid_corpus(void **state)
{
    (void)state;
    struct llmq_test_files f;
    llmq_test_data_files(&f, "batch/valid", ".jsonl");
    int files = 0;
    for (size_t k = 0; k < f.n; k++) {
        const char *path = f.paths[k];
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(llmq_batch_read_file(path, &buf, &len, NULL), LLMQ_OK);
        struct llmq_job_defaults def;
        llmq_job_defaults_init(&def);
        def.now_ms = 1700000000000LL;
        struct llmq_batch b = {0};
        assert_int_equal(llmq_batch_parse(buf, len, &def, &b, NULL), LLMQ_OK);
        if (b.n_errors > 0)
            fail_msg("%s:%ld: %s", f.names[k], b.errors[0].line, b.errors[0].msg);
        assert_int_equal(b.n_jobs, count_nonblank(buf, len));
        for (size_t i = 0; i < b.n_jobs; i++) {
            assert_true(llmq_name_valid(b.jobs[i].id));
            assert_true(b.jobs[i].cost.total_tokens > 0);
            json_t *parsed = json_loads(b.jobs[i].body, 0, NULL);
            assert_non_null(parsed);
            json_decref(parsed);
        }
        llmq_batch_clear(&b);
        free(buf);
        files++;
    }
    llmq_test_files_free(&f);
    assert_true(files >= 8);
}

/* One invalid file: exactly one error, on the line and with the message its
 * .expect sidecar names. */
static void check_invalid_file(const char *dir, const char *name)
{
    char path[2048], expect_path[2048], expect[512] = "";
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(expect_path, sizeof(expect_path), "%s/%.*s.expect", dir,
             (int)(strlen(name) - strlen(".jsonl")), name);
    FILE *f = fopen(expect_path, "r");
    assert_non_null(f);
    char args[256] = "";
    assert_non_null(fgets(expect, sizeof(expect), f));
    if (fgets(args, sizeof(args), f) == NULL)
        args[0] = '\0';
    fclose(f);
    expect[strcspn(expect, "\r\n")] = '\0';
    char *tab = strchr(expect, '\t');
    assert_non_null(tab);
    *tab = '\0';
    long want_line = strtol(expect, NULL, 10);
    const char *want_msg = tab + 1;

    struct llmq_job_defaults def;
    llmq_job_defaults_init(&def);
    def.now_ms = 1700000000000LL;
    if (strncmp(args, "--max-body-bytes ", 17) == 0)
        def.max_body_bytes = (size_t)strtoul(args + 17, NULL, 10);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(llmq_batch_read_file(path, &buf, &len, NULL), LLMQ_OK);
    struct llmq_batch b = {0};
    assert_int_equal(llmq_batch_parse(buf, len, &def, &b, NULL), LLMQ_OK);
    if (b.n_errors != 1 || b.errors[0].line != want_line || !strstr(b.errors[0].msg, want_msg))
        fail_msg("%s: want line %ld '%s', got %zu errors, first line %ld '%s'", name, want_line,
                 want_msg, b.n_errors, b.n_errors ? b.errors[0].line : 0,
                 b.n_errors ? b.errors[0].msg : "");
    llmq_batch_clear(&b);
    free(buf);
}

static void test_invalid_corpus(void **state)
{
    (void)state;
    struct llmq_test_files f;
    llmq_test_data_files(&f, "batch/invalid", ".jsonl");
    for (size_t k = 0; k < f.n; k++)
        check_invalid_file(f.dir, f.names[k]);
    assert_true(f.n >= 20);
    llmq_test_files_free(&f);
}

static void test_line_options_and_defaults(void **state)
{
    (void)state;
    struct llmq_job_defaults def;
    llmq_job_defaults_init(&def);
    def.priority = LLMQ_PRIORITY_LOW;
    def.tenant = "deftenant";
    def.max_attempts = 7;
    const char *line = "{\"custom_id\":\"x1\",\"url\":\"/v1/chat/completions\",\"body\":{"
                       "\"model\":\"gpt-4o\",  \"messages\":[{\"role\":\"user\",\"content\":"
                       "\"hello there\"}], \"max_tokens\": 10},\"llmq\":{\"priority\":\"high\","
                       "\"user\":\"u1\",\"ttl_ms\":5000}}";
    struct llmq_job j;
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_from_line(line, strlen(line), &def, &j, &err), LLMQ_OK);
    assert_string_equal(j.id, "x1");
    assert_string_equal(j.model, "gpt-4o");
    assert_int_equal(j.priority, LLMQ_PRIORITY_HIGH);
    assert_string_equal(j.tenant, "deftenant");
    assert_string_equal(j.user, "u1");
    assert_int_equal(j.ttl_ms, 5000);
    assert_int_equal(j.max_attempts, 7);
    /* compact, order kept */
    assert_string_equal(j.body,
                        "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":"
                        "\"hello there\"}],\"max_tokens\":10}");
    struct llmq_cost c;
    json_t *body = json_loads(j.body, 0, NULL);
    assert_int_equal(llmq_cost_estimate(j.url, body, NULL, &c, NULL), LLMQ_OK);
    json_decref(body);
    assert_int_equal(j.cost.total_tokens, c.total_tokens);
    assert_true(j.cost.completion_tokens >= 10);
    llmq_job_clear(&j);
    llmq_job_clear(NULL);
}

static void test_request_api(void **state)
{
    (void)state;
    struct llmq_job_defaults def;
    llmq_job_defaults_init(&def);
    struct llmq_job_options o = {.job_id = "api-1", .priority = LLMQ_PRIORITY_HIGH};
    struct llmq_job j;
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_from_request("/v1/embeddings",
                                           "{\"model\":\"text-embedding-3-small\",\"input\":\"x\"}",
                                           &o, &def, &j, &err),
                     LLMQ_OK);
    assert_string_equal(j.id, "api-1");
    llmq_job_clear(&j);
    assert_int_equal(llmq_job_from_request("/v1/nope", "{}", NULL, &def, &j, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "unknown url"));
    assert_int_equal(llmq_job_from_request("/v1/embeddings", "{\"input\":1}", NULL, &def, &j, &err),
                     LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "model"));
    assert_int_equal(llmq_job_from_request("/v1/embeddings", "{bad", NULL, &def, &j, &err),
                     LLMQ_EINVAL);
    o.job_id = "bad id";
    assert_int_equal(llmq_job_from_request("/v1/embeddings", "{\"model\":\"m\",\"input\":\"x\"}",
                                           &o, &def, &j, &err),
                     LLMQ_EINVAL);
    def.max_body_bytes = 10;
    assert_int_equal(llmq_job_from_request("/v1/embeddings", "{\"model\":\"m\",\"input\":\"xxxx\"}",
                                           NULL, &def, &j, &err),
                     LLMQ_ETOOBIG);
}

/* A job estimated as its fallback model: its body unchanged, the cost of
 * the fallback's image rule (a 1024 x 1024 remote image at high detail:
 * 765 tokens on gpt-4o, 25501 on gpt-4o-mini) and tokenizer (gpt-4: cl100k). */
static void test_estimate_as_fallback(void **state)
{
    (void)state;
    struct llmq_job_defaults def;
    llmq_job_defaults_init(&def);
    struct llmq_job_options o = {.job_id = "fb-1"};
    struct llmq_job j;
    struct llmq_error err = {0};
    const char *body = "{\"model\":\"gpt-4o\",\"max_tokens\":10,\"messages\":[{\"role\":"
                       "\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":"
                       "\"https://example.com/a.png\"}}]}]}";
    assert_int_equal(llmq_job_from_request("/v1/chat/completions", body, &o, &def, &j, &err),
                     LLMQ_OK);
    assert_null(j.fallback_model);
    char *before = strdup(j.body);
    long long asked = j.cost.prompt_tokens;
    assert_int_equal(llmq_job_estimate_as(&j, "gpt-4o-mini", NULL, &err), LLMQ_OK);
    assert_string_equal(j.fallback_model, "gpt-4o-mini");
    assert_int_equal(j.fallback_cost.prompt_tokens - asked, 25501 - 765);
    assert_int_equal(j.fallback_cost.completion_tokens, j.cost.completion_tokens);
    assert_true(j.fallback_cost.total_tokens > j.cost.total_tokens);
    assert_string_equal(j.body, before); /* the body keeps the model asked for */
    assert_string_equal(j.model, "gpt-4o");
    free(before);
    llmq_job_clear(&j);
}

static void test_output_line(void **state)
{
    (void)state;
    struct llmq_job_output o = {.custom_id = "r1",
                                .status_code = 200,
                                .request_id = "req_9",
                                .body = "{\"ok\":true}",
                                .body_len = 11};
    char *line = llmq_job_output_encode(&o, NULL);
    assert_non_null(line);
    assert_string_equal(line,
                        "{\"id\":\"batch_req_9\",\"custom_id\":\"r1\",\"response\":{"
                        "\"status_code\":200,\"request_id\":\"req_9\",\"body\":{\"ok\":true}},"
                        "\"error\":null}");
    free(line);
    struct llmq_job_output dead = {.custom_id = "r2",
                                   .error_code = "max_attempts",
                                   .error_message = "gave up after 5 attempts"};
    line = llmq_job_output_encode(&dead, NULL);
    assert_string_equal(line, "{\"id\":\"batch_req_r2\",\"custom_id\":\"r2\",\"response\":null,"
                              "\"error\":{\"code\":\"max_attempts\",\"message\":\"gave up after 5 "
                              "attempts\"}}");
    free(line);
    struct llmq_job_output text = {
        .custom_id = "r3", .status_code = 502, .body = "Bad <b>gw</b>", .body_len = 13};
    line = llmq_job_output_encode(&text, NULL);
    assert_non_null(strstr(line, "\"body\":\"Bad <b>gw</b>\""));
    free(line);
    assert_null(llmq_job_output_encode(NULL, NULL));
    /* the line names the custom_id the job id came from (jobs/job_id.h) */
    struct llmq_job_output escaped = {.custom_id = "a%20b%2Fc",
                                      .status_code = 200,
                                      .request_id = "req_abc",
                                      .body = "{}",
                                      .body_len = 2};
    line = llmq_job_output_encode(&escaped, NULL);
    assert_non_null(strstr(line, "\"id\":\"batch_req_abc\",\"custom_id\":\"a b/c\""));
    free(line);
}

static void test_ids_and_names(void **state)
{
    (void)state;
    char a[64], b[64];
    llmq_job_id_generate(a, sizeof(a));
    llmq_job_id_generate(b, sizeof(b));
    assert_true(llmq_name_valid(a));
    assert_string_not_equal(a, b);
    assert_int_equal(strncmp(a, "job-", 4), 0);
    assert_null(llmq_job_url_known("/v1/images"));
    assert_non_null(llmq_job_url_known("/v1/responses"));
}

/* custom_id is required in a line (the Batch format requires it, and a
 * generated id would run the line again on every re-run of the file), unless
 * the caller asks for generated ids; the producer API without a job id gets
 * one generated (it returns it). */
static void test_custom_id_required_unless_generated(void **state)
{
    (void)state;
    const char *line = "{\"url\":\"/v1/embeddings\",\"body\":{\"model\":\"m\",\"input\":\"x\"}}";
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_job j = {0};
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_from_line(line, strlen(line), &d, &j, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "missing \"custom_id\""));
    d.generate_ids = 1;
    assert_int_equal(llmq_job_from_line(line, strlen(line), &d, &j, &err), LLMQ_OK);
    assert_int_equal(strncmp(j.id, "job-", 4), 0);
    llmq_job_clear(&j);
    d.generate_ids = 0;
    assert_int_equal(llmq_job_from_request("/v1/embeddings", "{\"model\":\"m\",\"input\":\"x\"}",
                                           NULL, &d, &j, &err),
                     LLMQ_OK);
    assert_int_equal(strncmp(j.id, "job-", 4), 0);
    llmq_job_clear(&j);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    const char *line = "{\"custom_id\":\"x1\",\"url\":\"/v1/chat/completions\",\"body\":{"
                       "\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":"
                       "\"hello\"}]},\"llmq\":{\"priority\":\"high\",\"tenant\":\"t\"}}";
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    int succeeded = 0;
    for (long n = 0; n < 200 && !succeeded; n++) {
        llmq_test_json_alloc_fail_after(n);
        struct llmq_job j;
        struct llmq_error err = {0};
        enum llmq_rc rc = llmq_job_from_line(line, strlen(line), &d, &j, &err);
        struct llmq_job_output o = {
            .custom_id = "x", .status_code = 200, .body = "{}", .body_len = 2};
        char *out = llmq_job_output_encode(&o, NULL);
        llmq_test_json_alloc_reset();
        if (rc == LLMQ_OK) {
            llmq_job_clear(&j);
            succeeded = out != NULL;
        } else {
            assert_true(rc == LLMQ_ENOMEM || rc == LLMQ_EINVAL);
            assert_true(err.msg[0] != '\0');
        }
        free(out);
    }
    assert_true(succeeded);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_corpus),
        cmocka_unit_test(test_invalid_corpus),
        cmocka_unit_test(test_line_options_and_defaults),
        cmocka_unit_test(test_request_api),
        cmocka_unit_test(test_estimate_as_fallback),
        cmocka_unit_test(test_output_line),
        cmocka_unit_test(test_ids_and_names),
        cmocka_unit_test(test_custom_id_required_unless_generated),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
