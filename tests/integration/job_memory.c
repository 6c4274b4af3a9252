/* Redis memory of one job (common/redis/keys.h, docs/operations.md "Sizing Redis"), read
 * with MEMORY USAGE ... SAMPLES 0 (every element counted), under the fixture
 * redis-server's default configuration. For request bodies of 100 B, 4 KiB,
 * 100 KiB and 1 MiB of prose, and of 4 KiB, 100 KiB and 1 MiB holding a
 * base64 image (the most random text a JSON body holds: 6 bits a byte, what
 * packing cannot squeeze below three quarters), with results of the same
 * two kinds (an answer, or a base64 embedding):
 *   - a queued job is one key, its record (P jr:<id>, the body packed:
 *     jobs/job_pack.h), and with its queue entries it stays within its
 *     Batch line's bytes + 150 B (issue 25), no job hash and no body key;
 *   - a finished (done) job, taken by dispatch (a hash and a body) and ended
 *     as a settle ends it, is one key, its ended record (P res:<id>,
 *     lua/lib/job_ended.lua: a few fields, then the output line packed as
 *     the worker sends it), and with its entry of P done and its TTL it
 *     stays within its output line's bytes + 150 B (issue 25): no hash, no
 *     body, no waiting record;
 *   - `llmq status --json` reports the backlog's memory per job as MEMORY
 *     USAGE of the jobs' keys says.
 * The sizes are printed against the line's bytes for docs/operations.md. A size
 * bound on a deterministic quantity (jemalloc size classes, Redis 7's
 * encodings, zlib's output for fixed input), not a timing. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "account.h"
#include "job_fields.h"
#include "jobs/job_pack.h"
#include "jobs_cli_run.h"
#include "llmq/llmq.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/script.h"
#include "testsupport.h"

/* A body's or a result's text: prose (letters and spaces) or base64. */
enum text_kind { TEXT_PROSE, TEXT_BASE64 };

static const struct {
    size_t bytes;
    enum text_kind kind;
} bodies[] = {
    {100, TEXT_PROSE},   {4096, TEXT_PROSE},    {102400, TEXT_PROSE},   {1048576, TEXT_PROSE},
    {4096, TEXT_BASE64}, {102400, TEXT_BASE64}, {1048576, TEXT_BASE64},
};

/* What a waiting job may cost over its Batch line, and a done job over its
 * output line (issue 25). */
#define OVER_LINE_MAX 150
/* What a waiting job takes besides its key: its entries in its key queue
 * and P backlog:<prio> (lists of listpacks: about 20 B a job,
 * tests/bench/bench_job_memory.sh). */
#define QUEUE_ENTRIES_BYTES 24
/* What a done job takes besides its key (MEMORY USAGE counts neither): its
 * entry of P done ("<fin_ms>:<id>" in a list of listpacks, about 30 B for
 * these ids) and its TTL's entry in the keyspace's expires (a dict entry of
 * 24 B in a 32 B class and its bucket, 8-16 B). */
#define FINISHED_ENTRIES_BYTES (32 + 48)

/* head, then text of kind from a fixed pseudo-random sequence (seed), then
 * tail: exactly n bytes (n > both). Prose is letters with a space one time
 * in seven; base64 is its 64 characters alike, as the base64 of random
 * bytes (an image) is. New string. */
static char *text_of(enum text_kind kind, const char *head, const char *tail, size_t n,
                     unsigned seed)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t h = strlen(head), t = strlen(tail);
    assert_true(n > h + t);
    char *b = malloc(n + 1);
    assert_non_null(b);
    memcpy(b, head, h);
    unsigned x = seed;
    for (size_t i = h; i < n - t; i++) {
        x = x * 1103515245u + 12345u;
        if (kind == TEXT_BASE64)
            b[i] = b64[(x >> 16) & 63];
        else
            b[i] = (x >> 16) % 7 == 0 ? ' ' : (char)('a' + (x >> 8) % 26);
    }
    memcpy(b + n - t, tail, t + 1);
    return b;
}

/* A chat body of exactly n bytes (n >= 200): the prompt in prose, or an
 * image as a base64 data URL. */
static char *body_of(enum text_kind kind, size_t n)
{
    if (kind == TEXT_BASE64)
        return text_of(kind,
                       "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":"
                       "[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,",
                       "\"}}]}]}", n, 12345);
    return text_of(kind,
                   "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"",
                   "\"}]}", n, 12345);
}

/* A Batch output line of job id of exactly n bytes: a chat completion's as
 * the worker writes it, its answer in prose, or an embedding's in base64
 * (encoding_format base64); another sequence than the body's, so there is
 * no copy of the prompt to pack against. New string. */
static char *output_line_of(enum text_kind kind, const char *id, size_t n)
{
    /* the response body around the answer, as chat completion or embedding */
    static const char *const around[][2] = {
        [TEXT_PROSE] = {"{\"object\":\"chat.completion\",\"choices\":[{\"message\":{\"role\":"
                        "\"assistant\",\"content\":\"",
                        "\"},\"finish_reason\":\"stop\"}],\"usage\":{\"total_tokens\":65}}"},
        [TEXT_BASE64] = {"{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
                         "\"embedding\":\"",
                         "\"}],\"model\":\"text-embedding-3-small\",\"usage\":{\"prompt_tokens\":"
                         "8,\"total_tokens\":8}}"},
    };
    char head[512], tail[256];
    snprintf(head, sizeof(head),
             "{\"id\":\"batch_req_%s\",\"custom_id\":\"%s\",\"response\":{\"status_code\":200,"
             "\"body\":%s",
             id, id, around[kind][0]);
    snprintf(tail, sizeof(tail), "%s},\"error\":null}", around[kind][1]);
    return text_of(kind, head, tail, n, 777);
}

/* MEMORY USAGE of key (every element), 0 when it does not exist. */
static long long usage(redisContext *c, const char *key)
{
    redisReply *r = redisCommand(c, "MEMORY USAGE %s SAMPLES 0", key);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    freeReplyObject(r);
    return v;
}

/* What len bytes cost as a plain string under a key as long as key: the
 * floor any layout that keeps those bytes pays (jemalloc rounds each
 * allocation up to its size class). */
static long long plain_usage(redisContext *c, const char *key, size_t len)
{
    char scratch[512];
    size_t kl = strlen(key);
    assert_true(kl < sizeof(scratch));
    memset(scratch, 'z', kl);
    scratch[kl] = '\0';
    char *v = malloc(len + 1);
    assert_non_null(v);
    memset(v, 'v', len);
    freeReplyObject(redisCommand(c, "SET %s %b", scratch, v, len));
    long long u = usage(c, scratch);
    freeReplyObject(redisCommand(c, "DEL %s", scratch));
    free(v);
    return u;
}

static void key_of(char *buf, size_t n, const char *prefix, enum llmq_key_kind kind, const char *id)
{
    assert_int_equal(llmq_key(buf, n, prefix, kind, id, NULL), LLMQ_OK);
}

/* Prints and asserts that a job whose key takes key_bytes (MEMORY USAGE) and
 * its entries elsewhere entries_bytes stays within line_len + OVER_LINE_MAX. */
static void assert_within_line(const char *what, long long key_bytes, long long entries_bytes,
                               size_t line_len)
{
    long long total = key_bytes + entries_bytes;
    print_message("%s line %7zu B: its key %lld B; with its entries %lld B = line + %lld\n", what,
                  line_len, key_bytes, total, total - (long long)line_len);
    assert_true(key_bytes > 0);
    assert_true(total <= (long long)line_len + OVER_LINE_MAX);
}

/* Takes the one queued job of a through lua/dispatch.lua, as a worker does:
 * it becomes its hash of small fields and its body (what a finish ends). */
static void take_one(const struct llmq_test_account *a)
{
    const char *argv[] = {a->prefix, "mem-worker", "1"};
    redisReply *r = llmq_script_run(a->c, LLMQ_SCRIPT_DISPATCH, 1, 3, argv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 5); /* one grant */
    freeReplyObject(r);
}

/* The call that ends a job, as a settle records it (lua/lib/attempts.lua):
 * a 200 of 850 ms, 40 tokens in and 64 out, by the account's key. */
#define ENDING_CALL "done 200 1765000000000 850 40 64 - gpt-4o-mini"

/* Ends job id as done with output line line through lua/job_finish.lua
 * (llmq_job_finish, as a settle does), the line packed as the worker sends
 * a done job's (worker/job_settle.c) and the call that ended it kept in its
 * record, as a settle keeps it (checked: job_fields att). */
static void finish_with_line(const struct llmq_test_account *a, const char *id, const char *line)
{
    char *packed = NULL;
    size_t packed_len = 0;
    assert_int_equal(llmq_job_pack(line, strlen(line), &packed, &packed_len, NULL), LLMQ_OK);
    assert_non_null(packed);
    const char *argv[] = {a->prefix, id, "done", packed, "", ENDING_CALL};
    const size_t lens[] = {strlen(a->prefix), strlen(id), 4, packed_len, 0, strlen(ENDING_CALL)};
    redisReply *r = llmq_script_run(a->c, LLMQ_SCRIPT_JOB_FINISH, 1, 6, argv, lens, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    free(packed);
    char *att = llmq_test_job_field(a->c, a->prefix, id, "att");
    assert_non_null(att);
    assert_string_equal(att, "1|" ENDING_CALL);
    free(att);
}

/* job_finish.lua refuses an ending call that is not 8 words, naming it, and
 * writes nothing: the job stays a waiting record (not ended, not unpacked). */
static void test_finish_call_refused(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "memcall");
    struct llmq_job_options jo = {.job_id = "bad-call"};
    assert_int_equal(llmq_producer_enqueue(a.producer, "/v1/chat/completions",
                                           "{\"model\":\"m\",\"messages\":[]}", &jo, NULL, NULL),
                     LLMQ_OK);
    const char *argv[] = {a.prefix, "bad-call", "done", "{}", "", "done 200 x|y"};
    redisReply *r = llmq_script_run(a.c, LLMQ_SCRIPT_JOB_FINISH, 1, 6, argv, NULL, NULL);
    assert_true(r != NULL && r->type == REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "LLMQ_EINVAL"));
    assert_non_null(strstr(r->str, "done 200 x|y"));
    freeReplyObject(r);
    char jk[256], wk[256], rk[256];
    key_of(wk, sizeof(wk), a.prefix, LLMQ_KEY_JOB_RECORD, "bad-call");
    key_of(jk, sizeof(jk), a.prefix, LLMQ_KEY_JOB, "bad-call");
    key_of(rk, sizeof(rk), a.prefix, LLMQ_KEY_RESULT, "bad-call");
    assert_true(usage(a.c, wk) > 0);
    assert_int_equal(usage(a.c, jk), 0);
    assert_int_equal(usage(a.c, rk), 0);
    llmq_test_account_close(&a);
}

static void test_job_memory(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "mem");
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        size_t n = bodies[i].bytes;
        enum text_kind kind = bodies[i].kind;
        char id[32], jk[256], bk[256], rk[256];
        snprintf(id, sizeof(id), "mem-%s-%zu", kind == TEXT_BASE64 ? "b64" : "prose", n);
        print_message("%s body of %zu B:\n", kind == TEXT_BASE64 ? "base64" : "prose", n);
        char *body = body_of(kind, n);
        struct llmq_job_options jo = {.job_id = id};
        assert_int_equal(
            llmq_producer_enqueue(a.producer, "/v1/chat/completions", body, &jo, NULL, NULL),
            LLMQ_OK);
        /* the Batch line the job came from */
        size_t line_len = strlen("{\"custom_id\":\"\",\"method\":\"POST\",\"url\":"
                                 "\"/v1/chat/completions\",\"body\":}") +
                          strlen(id) + n;
        key_of(jk, sizeof(jk), a.prefix, LLMQ_KEY_JOB, id);
        key_of(bk, sizeof(bk), a.prefix, LLMQ_KEY_JOB_BODY, id);
        key_of(rk, sizeof(rk), a.prefix, LLMQ_KEY_RESULT, id);

        char wk[256];
        key_of(wk, sizeof(wk), a.prefix, LLMQ_KEY_JOB_RECORD, id);
        assert_within_line("queued  ", usage(a.c, wk), QUEUE_ENTRIES_BYTES, line_len);
        assert_int_equal(usage(a.c, jk), 0); /* one key: no hash, no body key */
        assert_int_equal(usage(a.c, bk), 0);

        size_t result_len = n + 200; /* a response about the request's size */
        char *line = output_line_of(kind, id, result_len);
        take_one(&a);
        assert_true(usage(a.c, jk) > 0 && usage(a.c, bk) > 0);
        finish_with_line(&a, id, line);
        print_message("(finished: the output line as a plain string would be %lld B)\n",
                      plain_usage(a.c, rk, result_len));
        assert_within_line("finished", usage(a.c, rk), FINISHED_ENTRIES_BYTES, result_len);
        assert_int_equal(usage(a.c, jk), 0); /* one key: no hash, no body, no record */
        assert_int_equal(usage(a.c, bk), 0);
        assert_int_equal(usage(a.c, wk), 0);
        char *back = llmq_test_job_result(a.c, a.prefix, id); /* and it reads back as text */
        assert_non_null(back);
        assert_string_equal(back, line);
        free(back);
        free(line);
        free(body);
    }
    llmq_test_account_close(&a);
}

/* llmq status: the backlog's memory from a sample of its jobs, as MEMORY
 * USAGE of their keys (plus their share of the key queue) says. */
static void test_status_memory(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "memst");
    char *body = body_of(TEXT_PROSE, 4096);
    long long keys_bytes = 0;
    for (int i = 0; i < 10; i++) {
        char id[32], jk[256], bk[256];
        snprintf(id, sizeof(id), "st-%d", i);
        struct llmq_job_options jo = {.job_id = id};
        assert_int_equal(
            llmq_producer_enqueue(a.producer, "/v1/chat/completions", body, &jo, NULL, NULL),
            LLMQ_OK);
        key_of(jk, sizeof(jk), a.prefix, LLMQ_KEY_JOB_RECORD, id);
        key_of(bk, sizeof(bk), a.prefix, LLMQ_KEY_JOB, id);
        keys_bytes += usage(a.c, jk) + usage(a.c, bk);
    }
    const char *argv[] = {"llmq", "status", "--json", NULL};
    struct cli_run r = cli_run(a.name, argv);
    assert_int_equal(r.status, 0);
    json_t *s = json_loads(r.out, 0, NULL);
    assert_non_null(s);
    json_t *m = json_object_get(s, "memory");
    assert_non_null(m);
    long long each = json_integer_value(json_object_get(m, "bytes_per_queued_job"));
    long long total = json_integer_value(json_object_get(m, "queued_bytes"));
    print_message("status: %lld B per queued job, backlog %lld B; keys %lld B per job\n", each,
                  total, keys_bytes / 10);
    assert_int_equal(json_integer_value(json_object_get(m, "queued_sampled")), 10);
    /* the keys' bytes, plus a share of the two lists of at most 64 B a job */
    assert_true(each >= keys_bytes / 10 && each <= keys_bytes / 10 + 64);
    assert_int_equal(total, each * 10);
    json_decref(s);
    cli_free(&r);
    const char *text[] = {"llmq", "status", NULL};
    r = cli_run(a.name, text);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "memory: backlog ~"));
    cli_free(&r);

    /* ... and the results kept, as MEMORY USAGE of their ended records says */
    long long results_bytes = 0;
    for (int i = 0; i < 10; i++) {
        char id[32], rk[256];
        snprintf(id, sizeof(id), "st-%d", i);
        char *line = output_line_of(TEXT_PROSE, id, 4096);
        finish_with_line(&a, id, line);
        free(line);
        key_of(rk, sizeof(rk), a.prefix, LLMQ_KEY_RESULT, id);
        results_bytes += usage(a.c, rk);
    }
    r = cli_run(a.name, argv);
    assert_int_equal(r.status, 0);
    s = json_loads(r.out, 0, NULL);
    m = json_object_get(s, "memory");
    print_message("status: %lld B per result; records %lld B per job\n",
                  (long long)json_integer_value(json_object_get(m, "bytes_per_result")),
                  results_bytes / 10);
    assert_int_equal(json_integer_value(json_object_get(m, "results_sampled")), 10);
    assert_int_equal(json_integer_value(json_object_get(m, "bytes_per_result")),
                     results_bytes / 10);
    json_decref(s);
    cli_free(&r);
    free(body);
    llmq_test_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_memory),
        cmocka_unit_test(test_status_memory),
        cmocka_unit_test(test_finish_call_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
