/* openai-sim over real sockets: the shape and usage of each endpoint,
 * streaming with include_usage, the window's 429s and headers, settlement,
 * the window freeing after its period, Azure style, bad requests, and the
 * optional header variants. No timing thresholds: waits only follow the
 * server's own retry hints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "openai_sim_support.h"
#include "data_files.h"

static const char *const auth[] = {"Authorization: Bearer sk-test-key",
                                   "X-Client-Request-Id: job-1", NULL};

/* Starts the sim with the old counting rules (--prompt-count bytes, --charge
 * usage), which the shape tests below are written in, plus args. */
static void start(struct sim_proc *p, const char *const *args)
{
    const char *all[32] = {"--prompt-count", "bytes", "--charge", "usage"};
    int n = 4;
    for (int i = 0; args != NULL && args[i] != NULL && n < 31; i++)
        all[n++] = args[i];
    all[n] = NULL;
    assert_int_equal(sim_proc_start(p, all), 0);
}

/* Starts the sim with its defaults (counting as OpenAI) plus args. */
static void start_openai_rules(struct sim_proc *p, const char *const *args)
{
    assert_int_equal(sim_proc_start(p, args), 0);
}

static void stop(struct sim_proc *p)
{
    assert_int_equal(sim_proc_stop(p), 0);
    unlink(p->log_file);
}

static void test_chat_shape(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    start(&p, NULL);
    /* "user" + "hello world!" = 16 bytes -> 4 prompt tokens */
    sim_http(&p, "/v1/chat/completions",
             "{\"model\":\"gpt-4o-mini\",\"max_tokens\":10,\"n\":3,"
             "\"messages\":[{\"role\":\"user\",\"content\":\"hello world!\"}]}",
             auth, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(sim_header(&r, "x-request-id"));
    json_t *j = sim_json(&r);
    assert_non_null(j);
    assert_string_equal(sim_jstr(j, "object"), "chat.completion");
    assert_string_equal(sim_jstr(j, "model"), "gpt-4o-mini");
    json_t *u = json_object_get(j, "usage");
    assert_int_equal(sim_jint(u, "prompt_tokens"), 4);
    long long c = sim_jint(u, "completion_tokens");
    assert_true(c >= 3 && c <= 30);
    assert_int_equal(sim_jint(u, "total_tokens"), 4 + c);
    json_t *choices = json_object_get(j, "choices");
    assert_int_equal(json_array_size(choices), 3);
    size_t text = 0;
    for (size_t i = 0; i < 3; i++) {
        const json_t *m = json_object_get(json_array_get(choices, i), "message");
        text += strlen(sim_jstr(m, "content"));
    }
    assert_int_equal(text, 4 * (size_t)c); /* "sim " per completion token */
    json_decref(j);
    /* Same body, same seed: same completion. */
    sim_resp_free(&r);
    sim_http(&p, "/v1/chat/completions",
             "{\"model\":\"gpt-4o-mini\",\"max_tokens\":10,\"n\":3,"
             "\"messages\":[{\"role\":\"user\",\"content\":\"hello world!\"}]}",
             auth, &r);
    j = sim_json(&r);
    assert_int_equal(sim_jint(json_object_get(j, "usage"), "completion_tokens"), c);
    json_decref(j);
    sim_resp_free(&r);
    stop(&p);
}

static void test_embeddings_and_responses_shape(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    start(&p, NULL);
    sim_http(
        &p, "/v1/embeddings",
        "{\"model\":\"text-embedding-3-small\",\"input\":[\"abcd\",\"efghi\"],\"dimensions\":5}",
        auth, &r);
    assert_int_equal(r.status, 200);
    json_t *j = sim_json(&r);
    assert_string_equal(sim_jstr(j, "object"), "list");
    json_t *data = json_object_get(j, "data");
    assert_int_equal(json_array_size(data), 2);
    assert_int_equal(json_array_size(json_object_get(json_array_get(data, 1), "embedding")), 5);
    assert_int_equal(sim_jint(json_object_get(j, "usage"), "prompt_tokens"), 3); /* 9 bytes */
    assert_int_equal(sim_jint(json_object_get(j, "usage"), "total_tokens"), 3);
    json_decref(j);
    sim_resp_free(&r);

    sim_http(&p, "/v1/responses",
             "{\"model\":\"gpt-4o\",\"input\":\"hello\",\"instructions\":\"be brief\","
             "\"max_output_tokens\":7}",
             auth, &r);
    assert_int_equal(r.status, 200);
    j = sim_json(&r);
    assert_string_equal(sim_jstr(j, "object"), "response");
    json_t *u = json_object_get(j, "usage");
    assert_int_equal(sim_jint(u, "input_tokens"), 4); /* 13 bytes */
    long long out = sim_jint(u, "output_tokens");
    assert_true(out >= 1 && out <= 7);
    assert_int_equal(sim_jint(u, "total_tokens"), 4 + out);
    json_decref(j);
    sim_resp_free(&r);
    stop(&p);
}

static void check_stream(const struct sim_resp *r, int include_usage)
{
    assert_int_equal(r->status, 200);
    assert_non_null(strstr(sim_header(r, "content-type"), "text/event-stream"));
    size_t content = 0;
    json_t *last = NULL;
    const char *s = r->body;
    int done = 0;
    while ((s = strstr(s, "data: ")) != NULL) {
        s += 6;
        if (strncmp(s, "[DONE]", 6) == 0) {
            done = 1;
            break;
        }
        json_decref(last);
        last = json_loads(s, JSON_DISABLE_EOF_CHECK, NULL);
        assert_non_null(last);
        const json_t *ch = json_array_get(json_object_get(last, "choices"), 0);
        const char *piece = sim_jstr(json_object_get(ch, "delta"), "content");
        content += piece ? strlen(piece) : 0;
    }
    assert_true(done);
    const json_t *u = json_object_get(last, "usage");
    if (include_usage) {
        assert_int_equal(json_array_size(json_object_get(last, "choices")), 0);
        assert_int_equal(sim_jint(u, "completion_tokens") * 4, (long long)content);
        assert_int_equal(sim_jint(u, "prompt_tokens"), 2);
    } else {
        assert_true(u == NULL || json_is_null(u));
    }
    json_decref(last);
}

static void test_stream_include_usage(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    const char *const args[] = {"--latency-ms", "200", NULL}; /* chunks spread over it */
    start(&p, args);
    sim_http(&p, "/v1/chat/completions",
             "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
             "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
             auth, &r);
    check_stream(&r, 1);
    sim_resp_free(&r);
    sim_http(
        &p, "/v1/chat/completions",
        "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        auth, &r);
    check_stream(&r, 0);
    sim_resp_free(&r);
    stop(&p);
}

/* Counts the events of an SSE body: data events, named events of type
 * name (NULL: any name), and whether it ended with data: [DONE]. */
static int count_events(const char *body, const char *name, int *done)
{
    int n = 0;
    *done = strstr(body, "data: [DONE]\n\n") != NULL;
    for (const char *s = body; (s = strstr(s, name ? name : "data: ")) != NULL; s++)
        n++;
    return n;
}

/* --stream-gap-ms: one token per content chunk; /v1/responses sends the
 * named events with the usage in response.completed; /v1/completions
 * streams with its usage chunk; --stream-error breaks a stream off with an
 * error event and no [DONE], logged as stream_error. */
static void test_stream_paced_responses_completions_error(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    int done;
    const char *const args[] = {"--stream-gap-ms", "5", "--completion-tokens", "6:6", NULL};
    start_openai_rules(&p, args);
    sim_http(&p, "/v1/chat/completions",
             "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}]}",
             auth, &r);
    assert_int_equal(r.status, 200);
    /* role, 6 one-token chunks, finish, [DONE] */
    assert_int_equal(count_events(r.body, NULL, &done), 9);
    assert_int_equal(count_events(r.body, "{\"content\":\"sim \"}", &done), 6);
    assert_true(done);
    sim_resp_free(&r);
    sim_http(&p, "/v1/responses", "{\"model\":\"m\",\"stream\":true,\"input\":\"hi\"}", auth, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(count_events(r.body, "event: response.output_text.delta\n", &done), 6);
    assert_false(done); /* the Responses API sends no [DONE] */
    const char *completed = strstr(r.body, "event: response.completed\ndata: ");
    assert_non_null(completed);
    assert_true(strstr(r.body, "event: response.created\n") < completed);
    json_t *j = json_loads(completed + 32, JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(j);
    json_t *u = json_object_get(json_object_get(j, "response"), "usage");
    assert_int_equal(sim_jint(u, "output_tokens"), 6);
    assert_int_equal(sim_jint(u, "total_tokens"), sim_jint(u, "input_tokens") + 6);
    json_decref(j);
    sim_resp_free(&r);
    sim_http(&p, "/v1/completions",
             "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
             "\"prompt\":\"hi\"}",
             auth, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(count_events(r.body, "\"text\":\"sim \"", &done), 6);
    assert_true(done);
    assert_non_null(strstr(r.body, "\"choices\":[],\"usage\":{\"prompt_tokens\":1,"
                                   "\"completion_tokens\":6,\"total_tokens\":7}"));
    sim_resp_free(&r);
    stop(&p);

    const char *const err_args[] = {
        "--stream-gap-ms", "1", "--completion-tokens", "6:6", "--stream-error", "100", NULL};
    start_openai_rules(&p, err_args);
    sim_http(&p, "/v1/chat/completions",
             "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}]}",
             auth, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(count_events(r.body, "{\"content\":\"sim \"}", &done), 3);
    assert_false(done);
    assert_non_null(strstr(r.body, "data: {\"error\":{\"message\":"));
    sim_resp_free(&r);
    sim_http(&p, "/v1/responses", "{\"model\":\"m\",\"stream\":true,\"input\":\"hi\"}", auth, &r);
    assert_non_null(strstr(r.body, "event: error\ndata: {\"type\":\"error\""));
    assert_null(strstr(r.body, "response.completed"));
    sim_resp_free(&r);
    assert_int_equal(sim_proc_stop(&p), 0);
    char *log = llmq_test_read_file(p.log_file, NULL);
    assert_non_null(log);
    assert_int_equal(count_events(log, "\"outcome\":\"stream_error\"", &done), 2);
    assert_int_equal(count_events(log, "\"completion_tokens\":3,", &done), 2);
    free(log);
    unlink(p.log_file);
}

static const char chat_small[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                                 "\"hello world!\"}],\"max_tokens\":90}";

static void test_limit_requests_and_window(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    const char *const args[] = {"--rpm", "2", "--period-ms", "1500", NULL};
    start(&p, args);
    for (int i = 0; i < 2; i++) {
        sim_http(&p, "/v1/chat/completions", chat_small, auth, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(sim_header(&r, "x-ratelimit-limit-requests"), "2");
        sim_resp_free(&r);
    }
    sim_http(&p, "/v1/chat/completions", chat_small, auth, &r);
    assert_int_equal(r.status, 429);
    assert_string_equal(sim_header(&r, "x-ratelimit-remaining-requests"), "0");
    assert_non_null(sim_header(&r, "x-ratelimit-reset-requests"));
    assert_non_null(sim_header(&r, "retry-after"));
    const char *ms = sim_header(&r, "retry-after-ms");
    assert_non_null(ms);
    long wait_ms = strtol(ms, NULL, 10);
    assert_true(wait_ms > 0 && wait_ms <= 1500);
    json_t *j = sim_json(&r);
    json_t *e = json_object_get(j, "error");
    assert_string_equal(sim_jstr(e, "code"), "rate_limit_exceeded");
    assert_string_equal(sim_jstr(e, "type"), "requests");
    assert_non_null(strstr(sim_jstr(e, "message"), "Rate limit reached for m "));
    assert_non_null(strstr(sim_jstr(e, "message"), "Limit 2, Used 2, Requested 1."));
    assert_true(json_is_null(json_object_get(e, "param")));
    json_decref(j);
    sim_resp_free(&r);
    /* Another key has its own window. */
    const char *const other[] = {"Authorization: Bearer sk-other", NULL};
    sim_http(&p, "/v1/chat/completions", chat_small, other, &r);
    assert_int_equal(r.status, 200);
    sim_resp_free(&r);
    /* The window frees once the hint has passed. */
    usleep((useconds_t)(wait_ms + 50) * 1000);
    sim_http(&p, "/v1/chat/completions", chat_small, auth, &r);
    assert_int_equal(r.status, 200);
    sim_resp_free(&r);
    stop(&p);
}

static void test_limit_tokens_and_settlement(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    const char *const args[] = {"--limit", "m=0:100", NULL};
    start(&p, args);
    /* charged 4 + 90 = 94 at admission, settled to 4 + completion (<= 64) */
    sim_http(&p, "/v1/chat/completions", chat_small, auth, &r);
    assert_int_equal(r.status, 200);
    assert_null(sim_header(&r, "x-ratelimit-limit-requests")); /* unlimited dimension */
    assert_string_equal(sim_header(&r, "x-ratelimit-limit-tokens"), "100");
    assert_string_equal(sim_header(&r, "x-ratelimit-remaining-tokens"), "6");
    json_t *j = sim_json(&r);
    long long total = sim_jint(json_object_get(j, "usage"), "total_tokens");
    json_decref(j);
    sim_resp_free(&r);
    sim_http(&p, "/v1/chat/completions", chat_small, auth, &r);
    assert_int_equal(r.status, 429);
    assert_non_null(sim_header(&r, "retry-after-ms"));
    j = sim_json(&r);
    json_t *e = json_object_get(j, "error");
    assert_string_equal(sim_jstr(e, "type"), "tokens");
    char want[96];
    snprintf(want, sizeof(want), "Limit 100, Used %lld, Requested 94.", total);
    assert_non_null(strstr(sim_jstr(e, "message"), want)); /* settled to the real usage */
    json_decref(j);
    sim_resp_free(&r);
    /* A request that alone exceeds the limit can never fit. */
    sim_http(
        &p, "/v1/chat/completions",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":500}",
        auth, &r);
    assert_int_equal(r.status, 429);
    assert_non_null(strstr(r.body, "Request too large for m"));
    sim_resp_free(&r);
    /* Other models are unlimited. */
    sim_http(&p, "/v1/chat/completions",
             "{\"model\":\"other\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_"
             "tokens\":500}",
             auth, &r);
    assert_int_equal(r.status, 200);
    sim_resp_free(&r);
    stop(&p);
}

/* Every request of tests/data/cost/requests.jsonl without tools (their
 * count is llmq's cookbook approximation, not a reference): the usage the sim
 * reports is the reference count (OpenAI's own for the cookbook examples,
 * the cookbook rule evaluated with npm tiktoken for the others). */
static void test_prompt_tokens_as_openai(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    start_openai_rules(&p, NULL);
    char path[512];
    const char *src = getenv("LLMQ_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/tests/data/cost/requests.jsonl", src ? src : "..");
    json_error_t e;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[65536];
    int checked = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *c = json_loads(line, 0, &e);
        assert_non_null(c);
        json_t *body = json_object_get(c, "body");
        if (json_object_get(body, "tools") != NULL || json_object_get(body, "functions")) {
            json_decref(c);
            continue;
        }
        char *text = json_dumps(body, JSON_COMPACT);
        sim_http(&p, sim_jstr(c, "url"), text, auth, &r);
        free(text);
        assert_int_equal(r.status, 200);
        json_t *j = sim_json(&r);
        if (sim_jint(json_object_get(j, "usage"), "prompt_tokens") != sim_jint(c, "prompt_tokens"))
            fail_msg("%s: sim counted %lld, reference %lld", sim_jstr(c, "category"),
                     sim_jint(json_object_get(j, "usage"), "prompt_tokens"),
                     sim_jint(c, "prompt_tokens"));
        json_decref(j);
        sim_resp_free(&r);
        json_decref(c);
        checked++;
    }
    fclose(f);
    assert_true(checked >= 250);
    stop(&p);
}

/* OpenAI's admission charge: prompt + max_tokens x n, kept for the whole
 * window even though the answer used less. */
static void test_admission_charge_not_refunded(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    const char *const args[] = {"--limit", "gpt-4o=0:1000", NULL};
    start_openai_rules(&p, args);
    /* "user" 1 + "hello" 1 + 3 per message + 3 priming = 8; + 40 x 2 */
    const char *body = "{\"model\":\"gpt-4o\",\"max_tokens\":40,\"n\":2,"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}";
    sim_http(&p, "/v1/chat/completions", body, auth, &r);
    assert_int_equal(r.status, 200);
    json_t *j = sim_json(&r);
    assert_int_equal(sim_jint(json_object_get(j, "usage"), "prompt_tokens"), 8);
    assert_true(sim_jint(json_object_get(j, "usage"), "completion_tokens") < 80);
    json_decref(j);
    assert_string_equal(sim_header(&r, "x-ratelimit-remaining-tokens"), "912");
    sim_resp_free(&r);
    /* After the answer the charge is still 88: the next request sees 912 - 88. */
    sim_http(&p, "/v1/chat/completions", body, auth, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(sim_header(&r, "x-ratelimit-remaining-tokens"), "824");
    sim_resp_free(&r);
    stop(&p);
    /* The old mode gives the unused reservation back. */
    const char *const usage[] = {"--limit", "gpt-4o=0:1000", "--charge", "usage", NULL};
    start_openai_rules(&p, usage);
    sim_http(&p, "/v1/chat/completions", body, auth, &r);
    sim_resp_free(&r);
    sim_http(&p, "/v1/chat/completions", body, auth, &r);
    assert_int_equal(r.status, 200);
    assert_true(atoll(sim_header(&r, "x-ratelimit-remaining-tokens")) > 824);
    sim_resp_free(&r);
    stop(&p);
}

static void test_azure(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    const char *const args[] = {"--azure", "--api-key", "az-key", "--rpm", "1", NULL};
    const char *const key[] = {"api-key: az-key", NULL};
    const char *const badkey[] = {"api-key: nope", NULL};
    const char *path = "/openai/deployments/dep-1/chat/completions?api-version=2024-10-21";
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    start(&p, args);
    sim_http(&p, path, body, badkey, &r);
    assert_int_equal(r.status, 401);
    sim_resp_free(&r);
    sim_http(&p, path, body, key, &r);
    assert_int_equal(r.status, 200);
    json_t *j = sim_json(&r);
    assert_string_equal(sim_jstr(j, "model"), "dep-1");
    assert_non_null(sim_header(&r, "x-ratelimit-remaining-requests"));
    json_decref(j);
    sim_resp_free(&r);
    sim_http(&p, path, body, key, &r);
    assert_int_equal(r.status, 429);
    assert_non_null(sim_header(&r, "retry-after"));
    j = sim_json(&r);
    json_t *e = json_object_get(j, "error");
    assert_string_equal(sim_jstr(e, "code"), "429");
    assert_non_null(strstr(sim_jstr(e, "message"), "have exceeded call rate limit"));
    assert_non_null(strstr(sim_jstr(e, "message"), "Please retry after "));
    json_decref(j);
    sim_resp_free(&r);
    sim_http(&p, "/openai/deployments/dep-1/chat/completions", body, key, &r);
    assert_int_equal(r.status, 404); /* no api-version */
    sim_resp_free(&r);
    stop(&p);
}

static void expect_status(const struct sim_proc *p, const char *path, const char *body,
                          const char *const *headers, long status, const char *code)
{
    struct sim_resp r;
    sim_http(p, path, body, headers, &r);
    assert_int_equal(r.status, status);
    json_t *j = sim_json(&r);
    assert_non_null(json_object_get(j, "error"));
    if (code != NULL)
        assert_string_equal(sim_jstr(json_object_get(j, "error"), "code"), code);
    json_decref(j);
    sim_resp_free(&r);
}

static void test_bad_requests(void **state)
{
    (void)state;
    struct sim_proc p;
    const char *const args[] = {"--api-key",        "sk-test-key", "--models", "m,gpt-4o",
                                "--max-body-bytes", "2000",        NULL};
    const char *const chunked[] = {"Authorization: Bearer sk-test-key",
                                   "Transfer-Encoding: chunked", NULL};
    const char *const wrong[] = {"Authorization: Bearer sk-wrong", NULL};
    const char *chat = "/v1/chat/completions";
    static char big[4096];
    memset(big, 'x', sizeof(big) - 1);
    start(&p, args);
    expect_status(&p, chat, "{not json", auth, 400, NULL);
    expect_status(&p, chat, "[1,2]", auth, 400, NULL);
    expect_status(&p, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", auth, 400,
                  NULL);
    expect_status(&p, chat, "{\"model\":\"m\"}", auth, 400, NULL);
    expect_status(&p, chat,
                  "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}],\"max_tokens\":-1}", auth,
                  400, NULL);
    expect_status(&p, chat, "{\"model\":\"nope\",\"messages\":[{\"content\":\"x\"}]}", auth, 404,
                  "model_not_found");
    expect_status(&p, chat, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", NULL, 401,
                  NULL);
    expect_status(&p, chat, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", wrong, 401,
                  "invalid_api_key");
    expect_status(&p, chat, big, auth, 413, NULL);
    expect_status(&p, chat, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", chunked, 411,
                  NULL);
    expect_status(&p, "/v1/nothing", "{}", auth, 404, NULL);
    expect_status(&p, chat, NULL, auth, 405, NULL);
    /* still serving */
    expect_status(&p, chat, "{\"model\":\"m\",\"messages\":[]}", auth, 400, NULL);
    struct sim_resp r;
    sim_http(&p, chat, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", auth, &r);
    assert_int_equal(r.status, 200);
    sim_resp_free(&r);
    stop(&p);
}

static void test_header_variants(void **state)
{
    (void)state;
    struct sim_proc p;
    struct sim_resp r;
    const char *body = "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}";
    const char *const usage[] = {"--rpm",       "5", "--tpm", "1000", "--ratelimit-headers",
                                 "usage_based", NULL};
    start(&p, usage);
    sim_http(&p, "/v1/chat/completions", body, auth, &r);
    assert_non_null(sim_header(&r, "x-ratelimit-remaining-tokens_usage_based"));
    assert_null(sim_header(&r, "x-ratelimit-remaining-tokens"));
    assert_string_equal(sim_header(&r, "x-ratelimit-remaining-requests"), "4");
    sim_resp_free(&r);
    stop(&p);
    const char *const neg[] = {"--rpm", "5", "--ratelimit-headers", "negative", NULL};
    start(&p, neg);
    sim_http(&p, "/v1/chat/completions", body, auth, &r);
    assert_string_equal(sim_header(&r, "x-ratelimit-limit-tokens"), "-1");
    sim_resp_free(&r);
    stop(&p);
    const char *const none[] = {"--rpm", "5", "--ratelimit-headers", "none", NULL};
    start(&p, none);
    sim_http(&p, "/v1/chat/completions", body, auth, &r);
    assert_null(sim_header(&r, "x-ratelimit-limit-requests"));
    sim_resp_free(&r);
    stop(&p);
    const char *const quota[] = {"--insufficient-quota", "100", "--should-retry", NULL};
    start(&p, quota);
    sim_http(&p, "/v1/chat/completions", body, auth, &r);
    assert_int_equal(r.status, 429);
    assert_string_equal(sim_header(&r, "x-should-retry"), "false");
    json_t *j = sim_json(&r);
    assert_string_equal(sim_jstr(json_object_get(j, "error"), "code"), "insufficient_quota");
    json_decref(j);
    sim_resp_free(&r);
    stop(&p);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_shape),
        cmocka_unit_test(test_embeddings_and_responses_shape),
        cmocka_unit_test(test_stream_include_usage),
        cmocka_unit_test(test_stream_paced_responses_completions_error),
        cmocka_unit_test(test_limit_requests_and_window),
        cmocka_unit_test(test_limit_tokens_and_settlement),
        cmocka_unit_test(test_prompt_tokens_as_openai),
        cmocka_unit_test(test_admission_charge_not_refunded),
        cmocka_unit_test(test_azure),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_header_variants),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
