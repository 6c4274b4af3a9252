/* openai-sim's Files and Batches APIs over real sockets, as a provider-batch
 * client sees them: a multipart upload, a batch created with metadata, its
 * progress until completed at --batch-pace-ms, the output and error files in
 * OpenAI's line shape (usage in every answer, an invalid body in the error
 * file with its 400), --batch-fail-once, a file of two models failing the
 * batch at validation, the lists (found by metadata), and cancel. No timing
 * thresholds: the test polls until the state it waits for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "openai_sim_support.h"

static struct sim_proc sim;

static int setup(void **state)
{
    (void)state;
    const char *args[] = {"--batch-pace-ms", "300", "--batch-fail-once", "flaky", NULL};
    return sim_proc_start(&sim, args);
}

static int teardown(void **state)
{
    (void)state;
    return sim_proc_stop(&sim);
}

/* Uploads text as a purpose=batch file named name; returns its id (new). */
static char *upload(const char *name, const char *text)
{
    CURL *e = curl_easy_init();
    struct sim_resp r;
    memset(&r, 0, sizeof(r));
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/files", sim.port);
    curl_mime *m = curl_mime_init(e);
    curl_mimepart *p = curl_mime_addpart(m);
    curl_mime_name(p, "purpose");
    curl_mime_data(p, "batch", CURL_ZERO_TERMINATED);
    p = curl_mime_addpart(m);
    curl_mime_name(p, "file");
    curl_mime_filename(p, name);
    curl_mime_data(p, text, CURL_ZERO_TERMINATED);
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    hl = curl_slist_append(hl, "Authorization: Bearer sk-test");
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_MIMEPOST, m);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sim_on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
    assert_int_equal(curl_easy_perform(e), CURLE_OK);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r.status);
    assert_int_equal(r.status, 200);
    json_t *j = sim_json(&r);
    assert_string_equal(sim_jstr(j, "object"), "file");
    assert_string_equal(sim_jstr(j, "purpose"), "batch");
    assert_string_equal(sim_jstr(j, "filename"), name);
    assert_int_equal(sim_jint(j, "bytes"), (long long)strlen(text));
    char *id = strdup(sim_jstr(j, "id"));
    json_decref(j);
    sim_resp_free(&r);
    curl_slist_free_all(hl);
    curl_mime_free(m);
    curl_easy_cleanup(e);
    return id;
}

/* GET (body NULL) or POST path; returns the JSON answer (new), status in *status. */
static json_t *call(const char *path, const char *body, long *status)
{
    const char *h[] = {"Authorization: Bearer sk-test", NULL};
    struct sim_resp r;
    sim_http(&sim, path, body, h, &r);
    *status = r.status;
    json_t *j = sim_json(&r);
    sim_resp_free(&r);
    return j;
}

static json_t *create_batch(const char *file_id, const char *llmq_id)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"input_file_id\":\"%s\",\"endpoint\":\"/v1/chat/completions\","
             "\"completion_window\":\"24h\",\"metadata\":{\"llmq_batch_id\":\"%s\"}}",
             file_id, llmq_id);
    long st;
    json_t *b = call("/v1/batches", body, &st);
    assert_int_equal(st, 200);
    assert_string_equal(sim_jstr(b, "object"), "batch");
    return b;
}

/* Polls batch id until its status is not in_progress; returns it (new). */
static json_t *wait_batch(const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/batches/%s", id);
    for (;;) {
        long st;
        json_t *b = call(path, NULL, &st);
        assert_int_equal(st, 200);
        if (strcmp(sim_jstr(b, "status"), "in_progress") != 0)
            return b;
        json_decref(b);
        usleep(50 * 1000);
    }
}

/* The lines of file id's content, as a JSON array (new). */
static json_t *file_lines(const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/files/%s/content", id);
    const char *h[] = {"Authorization: Bearer sk-test", NULL};
    struct sim_resp r;
    sim_http(&sim, path, NULL, h, &r);
    assert_int_equal(r.status, 200);
    json_t *a = json_array();
    for (char *l = r.body; l != NULL && *l != '\0';) {
        char *nl = strchr(l, '\n');
        if (nl != NULL)
            *nl = '\0';
        json_t *j = json_loads(l, 0, NULL);
        assert_non_null(j);
        json_array_append_new(a, j);
        l = nl ? nl + 1 : NULL;
    }
    sim_resp_free(&r);
    return a;
}

#define LINE(id, content)                                                                          \
    "{\"custom_id\":\"" id "\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":"     \
    "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"" content           \
    "\"}]}}\n"

static void batch_completes_with_output_and_error_files(void **state)
{
    (void)state;
    const char *text = LINE("a", "hello") LINE("b", "world")
        LINE("flaky-c", "again") "{\"custom_id\":\"bad\",\"method\":\"POST\",\"url\":\"/v1/chat/"
                                 "completions\",\"body\":"
                                 "{\"model\":\"gpt-4o-mini\"}}\n";
    char *fid = upload("llmqb-1.jsonl", text);
    json_t *b = create_batch(fid, "llmqb-1");
    assert_string_equal(sim_jstr(b, "status"), "in_progress");
    assert_string_equal(sim_jstr(json_object_get(b, "metadata"), "llmq_batch_id"), "llmqb-1");
    assert_int_equal(sim_jint(json_object_get(b, "request_counts"), "total"), 4);
    json_t *done = wait_batch(sim_jstr(b, "id"));
    assert_string_equal(sim_jstr(done, "status"), "completed");
    assert_int_equal(sim_jint(json_object_get(done, "request_counts"), "completed"), 2);
    assert_int_equal(sim_jint(json_object_get(done, "request_counts"), "failed"), 2);
    json_t *out = file_lines(sim_jstr(done, "output_file_id"));
    assert_int_equal(json_array_size(out), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *l = json_array_get(out, i);
        json_t *resp = json_object_get(l, "response");
        assert_int_equal(sim_jint(resp, "status_code"), 200);
        assert_non_null(strstr(sim_jstr(l, "id"), "batch_req_"));
        assert_true(json_is_null(json_object_get(l, "error")));
        json_t *usage = json_object_get(json_object_get(resp, "body"), "usage");
        assert_true(sim_jint(usage, "prompt_tokens") > 0);
        assert_true(sim_jint(usage, "completion_tokens") > 0);
    }
    assert_string_equal(sim_jstr(json_array_get(out, 0), "custom_id"), "a");
    json_t *err = file_lines(sim_jstr(done, "error_file_id"));
    assert_int_equal(json_array_size(err), 2);
    json_t *e0 = json_array_get(err, 0), *e1 = json_array_get(err, 1);
    assert_string_equal(sim_jstr(e0, "custom_id"), "flaky-c");
    assert_int_equal(sim_jint(json_object_get(e0, "response"), "status_code"), 500);
    assert_string_equal(sim_jstr(e1, "custom_id"), "bad");
    assert_int_equal(sim_jint(json_object_get(e1, "response"), "status_code"), 400);
    /* the list finds the batch by its metadata */
    long st;
    json_t *list = call("/v1/batches", NULL, &st);
    int found = 0;
    json_t *x;
    size_t i;
    json_array_foreach(json_object_get(list, "data"), i, x)
    {
        const char *m = sim_jstr(json_object_get(x, "metadata"), "llmq_batch_id");
        found += m != NULL && strcmp(m, "llmqb-1") == 0;
    }
    assert_int_equal(found, 1);
    /* fail-once: the same line in a second batch succeeds */
    char *fid2 = upload("llmqb-2.jsonl", LINE("flaky-c", "again"));
    json_t *b2 = create_batch(fid2, "llmqb-2");
    json_t *done2 = wait_batch(sim_jstr(b2, "id"));
    assert_int_equal(sim_jint(json_object_get(done2, "request_counts"), "completed"), 1);
    assert_true(json_is_null(json_object_get(done2, "error_file_id")));
    json_decref(list);
    json_decref(b2);
    json_decref(done2);
    free(fid2);
    json_decref(out);
    json_decref(err);
    json_decref(done);
    json_decref(b);
    free(fid);
}

static void two_models_fail_validation(void **state)
{
    (void)state;
    const char *text =
        LINE("a", "x") "{\"custom_id\":\"b\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                       "\"body\":{\"model\":\"gpt-4o\",\"messages\":[]}}\n";
    char *fid = upload("two.jsonl", text);
    json_t *b = create_batch(fid, "llmqb-3");
    assert_string_equal(sim_jstr(b, "status"), "failed");
    json_t *e = json_array_get(json_object_get(json_object_get(b, "errors"), "data"), 0);
    assert_string_equal(sim_jstr(e, "code"), "mismatched_model");
    assert_int_equal(sim_jint(e, "line"), 2);
    json_decref(b);
    free(fid);
}

static void cancel_ends_an_unfinished_batch(void **state)
{
    (void)state;
    /* a sim whose batches never finish on their own: the cancel always finds
     * this one running, however slow the host */
    struct sim_proc fast = sim;
    const char *args[] = {"--batch-pace-ms", "86400000", NULL};
    assert_int_equal(sim_proc_start(&sim, args), 0);
    char *fid = upload("c.jsonl", LINE("z", "x"));
    json_t *b = create_batch(fid, "llmqb-4");
    char path[128];
    snprintf(path, sizeof(path), "/v1/batches/%s/cancel", sim_jstr(b, "id"));
    long st;
    json_t *c = call(path, "", &st);
    /* the pace is 300 ms: a cancel right after creation finds it running */
    assert_int_equal(st, 200);
    /* as OpenAI: cancelling, then cancelled (the lines done by then kept:
     * none at this pace, so no output file) */
    assert_string_equal(sim_jstr(c, "status"), "cancelling");
    json_t *again = wait_batch(sim_jstr(b, "id")); /* returns at once: not in_progress */
    assert_string_equal(sim_jstr(again, "status"), "cancelled");
    assert_true(json_is_null(json_object_get(again, "output_file_id")));
    assert_true(json_is_integer(json_object_get(again, "cancelling_at")));
    json_t *nf = call("/v1/batches/batch_nope", NULL, &st);
    assert_int_equal(st, 404);
    json_decref(nf);
    json_decref(again);
    json_decref(c);
    json_decref(b);
    free(fid);
    assert_int_equal(sim_proc_stop(&sim), 0);
    sim = fast;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batch_completes_with_output_and_error_files),
        cmocka_unit_test(two_models_fail_validation),
        cmocka_unit_test(cancel_ends_an_unfinished_batch),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
