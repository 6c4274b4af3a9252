/* A collected stream's result line says who served it as a whole answer's
 * does (docs/endpoints.md: "endpoint", "model", "asked_model"). A job
 * with "stream": true that no gateway waits for (`llmq enqueue`: no lease)
 * runs collected: its result line carries the answer assembled from the
 * events. Two endpoints: ep0 serves gpt-4o and is disabled, ep1 serves
 * gpt-4o-mini, and gpt-4o falls back to gpt-4o-mini. For each model one
 * whole job and one streamed job run; checks: the streamed line's body is
 * the assembled answer (the stream was collected, not relayed or read
 * whole), and its "endpoint", "model" and "asked_model" are exactly the
 * whole line's: ep1 / gpt-4o-mini / gpt-4o for the fallback, ep1 /
 * gpt-4o-mini / none on the named endpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"
#include "job_fields.h"

static const char *const served_by[] = {"endpoint", "model", "asked_model"};

/* Writes the job id of model to f, a streamed one when stream is set. */
static void write_job(FILE *f, const char *id, const char *model, int stream)
{
    fprintf(f,
            "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
            "\"body\":{\"model\":\"%s\",\"max_tokens\":20,%s"
            "\"messages\":[{\"role\":\"user\",\"content\":\"question %s\"}]}}\n",
            id, model, stream ? "\"stream\":true," : "", id);
}

/* The result line of job id of account (new JSON; fails when none). */
static json_t *result_of(const char *account, const char *id)
{
    redisContext *c = llmq_test_redis_connect();
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    char *text = llmq_test_job_result(c, prefix, id);
    json_t *o = text != NULL ? json_loads(text, 0, NULL) : NULL;
    free(text);
    redisFree(c);
    if (o == NULL)
        fail_msg("no result line for %s", id);
    return o;
}

/* Asserts the streamed line of stream_id has the served-by fields of the
 * whole line of whole_id, which are endpoint, model and asked_model (NULL:
 * absent), and an assembled chat.completion as its body. */
static void assert_served_alike(const char *account, const char *whole_id, const char *stream_id,
                                const char *endpoint, const char *model, const char *asked_model)
{
    json_t *whole = result_of(account, whole_id), *streamed = result_of(account, stream_id);
    const char *want[] = {endpoint, model, asked_model};
    for (size_t i = 0; i < sizeof(served_by) / sizeof(served_by[0]); i++) {
        const json_t *w = json_object_get(whole, served_by[i]);
        const json_t *s = json_object_get(streamed, served_by[i]);
        printf("# %s: %s whole %s, streamed %s\n", whole_id, served_by[i],
               w ? json_string_value(w) : "(none)", s ? json_string_value(s) : "(none)");
        if (want[i] == NULL) {
            assert_null(w);
        } else {
            assert_non_null(w);
            assert_string_equal(json_string_value(w), want[i]);
        }
        if (w == NULL)
            assert_null(s);
        else if (s == NULL || !json_equal(w, s))
            fail_msg("%s: the streamed line's \"%s\" is not the whole line's", stream_id,
                     served_by[i]);
    }
    const json_t *body = json_object_get(json_object_get(streamed, "response"), "body");
    assert_string_equal(json_string_value(json_object_get(body, "object")), "chat.completion");
    assert_true(json_is_null(json_object_get(streamed, "error")));
    json_decref(whole);
    json_decref(streamed);
}

static void test_collected_stream_says_who_served_it(void **state)
{
    (void)state;
    char account[64], jobs[128], logs[1][128], store[2][96];
    llmq_test_unique_name(account, sizeof(account), "epcoll");
    struct ep_sim eps[2];
    for (int i = 0; i < 2; i++) {
        ep_init(&eps[i], i);
        ep_sim_start(&eps[i], NULL);
        ep_add(account, &eps[i], "/v1", NULL);
    }
    ep_limit(account, &eps[0], "gpt-4o", 1000, 60000);
    ep_limit(account, &eps[1], "gpt-4o-mini", 1000, 60000);
    struct cli_run r = ep_cli(account, 0, "endpoints", "fallback", "gpt-4o", "gpt-4o-mini", NULL);
    cli_free(&r);
    r = ep_cli(account, 0, "endpoints", "disable", "ep0", NULL);
    cli_free(&r);

    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epcoll-%d.jsonl", (int)getpid());
    FILE *f = fopen(jobs, "w");
    assert_non_null(f);
    write_job(f, "fb-whole", "gpt-4o", 0);
    write_job(f, "fb-stream", "gpt-4o", 1);
    write_job(f, "ep-whole", "gpt-4o-mini", 0);
    write_job(f, "ep-stream", "gpt-4o-mini", 1);
    fclose(f);
    worker_enqueue(account, jobs);

    const char *args[4 + 2 * 2 + 1] = {"--concurrency", "4", "--exit-when-idle-ms", "1200"};
    ep_key_args(eps, 2, args, 4, store);
    pid_t pid;
    worker_start_n(account, &eps[0].sim, "epcoll", 1, logs, &pid, args);
    worker_wait_n(&pid, 1, 60000);
    unlink(logs[0]);

    assert_served_alike(account, "fb-whole", "fb-stream", "ep1", "gpt-4o-mini", "gpt-4o");
    assert_served_alike(account, "ep-whole", "ep-stream", "ep1", "gpt-4o-mini", NULL);
    for (int i = 0; i < 2; i++)
        ep_sim_stop(&eps[i]);
    unlink(jobs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collected_stream_says_who_served_it),
    };
    return cmocka_run_group_tests_name("endpoints_stream_collected", tests, NULL, NULL);
}
