/* Offload's eligibility and policy, without a worker: which jobs are staged
 * for a provider batch and which queue live (docs/DESIGN.md §3.10).
 *   - `llmq offload set` stores the policy per model under the account's
 *     hash tag; `get` prints it (auto too); an unknown mode is refused
 *     saying why; a default model is off (a model with endpoints offloads
 *     on them: offload_endpoints).
 *   - under `all`, a line marked completion_window "24h" (or a file enqueued
 *     with --completion-window 24h, or the producer API's option) is staged,
 *     with the window as its deadline when it had none; an unmarked line of
 *     the same file queues live; under `off` a marked line queues live.
 *   - a tenant's own policy (--tenant) wins over the model's for its jobs;
 *   - a marked job whose deadline or ttl is shorter than the window is
 *     refused naming the field, and so is a streamed one.
 *   - setting the model back to off sends its staged jobs live (worker-side
 *     script pbatch_next);
 *   - a staged job that is cancelled (job_cancel.lua) ends cancelled and is
 *     left out of the next provider batch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include <sys/time.h>

#include "account.h"
#include "jobs_cli_run.h"
#include "redis/script.h"

static const char *chat =
    "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

/* Unix ms (the deadlines' clock). */
static long long wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The job's field name (static buffer; "" when none). */
static const char *job_field(struct llmq_test_account *a, const char *id, const char *name)
{
    static char v[256];
    redisReply *r = redisCommand(a->c, "HGET %sjob:%s %s", a->prefix, id, name);
    snprintf(v, sizeof(v), "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    return v;
}

static struct cli_run llmq(struct llmq_test_account *a, const char *const *argv)
{
    return cli_run(a->name, argv);
}

static void policy_set_get_and_refusals(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offpol");
    const char *set[] = {"llmq", "offload", "set", "m1", "--mode", "all", "--poll-ms", "250", NULL};
    struct cli_run r = llmq(&a, set);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    const char *get[] = {"llmq", "offload", "get", "m1", NULL};
    r = llmq(&a, get);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "m1 mode=all poll_ms=250"));
    cli_free(&r);
    redisReply *h = redisCommand(a.c, "HGET %soffload m1", a.prefix);
    assert_int_equal(h->type, REDIS_REPLY_STRING);
    assert_non_null(strstr(h->str, "\"mode\":\"all\""));
    freeReplyObject(h);
    const char *other[] = {"llmq", "offload", "get", "m2", NULL};
    r = llmq(&a, other);
    assert_non_null(strstr(r.out, "m2 mode=off (default)"));
    cli_free(&r);
    const char *autom[] = {"llmq", "offload",     "set", "m4", "--mode",
                           "auto", "--horizon-s", "60",  NULL};
    r = llmq(&a, autom);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "m4 mode=auto horizon_s=60"));
    cli_free(&r);
    const char *bogus[] = {"llmq", "offload", "set", "m1", "--mode", "sometimes", NULL};
    r = llmq(&a, bogus);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "expected off, all or auto"));
    cli_free(&r);
    llmq_test_account_close(&a);
}

#define LINE(id, llmq)                                                                             \
    "{\"custom_id\":\"" id "\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":"     \
    "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" llmq "}\n"

#define MARKED(t) ",\"llmq\":{\"completion_window\":\"24h\",\"tenant\":\"" t "\"}"

/* A tenant's own policy wins over its model's for that tenant's jobs: under
 * a model left off, tenant acme's marked job is staged (all), tenant beta's
 * is queued live at priority low and listed for the auto step (auto), and
 * another tenant's queues live as before. */
static void tenant_policy_wins(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offten");
    const char *acme[] = {"llmq", "offload",  "set",  "gpt-4o-mini", "--mode",
                          "all",  "--tenant", "acme", NULL};
    struct cli_run r = llmq(&a, acme);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    const char *beta[] = {"llmq", "offload",  "set",  "gpt-4o-mini", "--mode",
                          "auto", "--tenant", "beta", NULL};
    r = llmq(&a, beta);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    const char *get[] = {"llmq", "offload", "get", "gpt-4o-mini", "--tenant", "acme", NULL};
    r = llmq(&a, get);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "gpt-4o-mini/t/acme mode=all"));
    cli_free(&r);
    const char *bad[] = {"llmq", "offload", "list", "--tenant", "acme", NULL};
    r = llmq(&a, bad);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--tenant belongs to"));
    cli_free(&r);
    const char *path = "/tmp/offload-policy-tenant.jsonl";
    write_file(path,
               LINE("ta", MARKED("acme")) LINE("tb", MARKED("beta")) LINE("tc", MARKED("other")));
    const char *enq[] = {"llmq", "enqueue", path, NULL};
    r = llmq(&a, enq);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    assert_string_equal(job_field(&a, "ta", "state"), "staged");
    redisReply *x = redisCommand(a.c, "LRANGE %skq:low|gpt-4o-mini|beta| 0 -1", a.prefix);
    assert_int_equal(x->elements, 1);
    assert_string_equal(x->element[0]->str, "tb");
    freeReplyObject(x);
    x = redisCommand(a.c, "LRANGE %spbe:gpt-4o-mini 0 -1", a.prefix);
    assert_int_equal(x->elements, 1);
    assert_string_equal(x->element[0]->str, "tb");
    freeReplyObject(x);
    x = redisCommand(a.c, "LRANGE %skq:normal|gpt-4o-mini|other| 0 -1", a.prefix);
    assert_int_equal(x->elements, 1);
    assert_string_equal(x->element[0]->str, "tc");
    freeReplyObject(x);
    llmq_test_account_close(&a);
}

static void marked_jobs_staged_under_all_only(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offelig");
    const char *path = "/tmp/offload-policy-1.jsonl";
    /* under off (the default): a marked job queues live */
    write_file(path, LINE("live-marked", ",\"llmq\":{\"completion_window\":\"24h\"}"));
    const char *enq[] = {"llmq", "enqueue", path, NULL};
    struct cli_run r = llmq(&a, enq);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    redisReply *x = redisCommand(a.c, "EXISTS %sjr:live-marked", a.prefix);
    assert_int_equal(x->integer, 1); /* a record in a key queue: live */
    freeReplyObject(x);
    const char *set[] = {"llmq", "offload", "set", "gpt-4o-mini", "--mode", "all", NULL};
    r = llmq(&a, set);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    write_file(path, LINE("m1", ",\"llmq\":{\"completion_window\":\"24h\"}") LINE("u1", "")
                         LINE("m2", ",\"llmq\":{\"completion_window\":\"24h\",\"deadline_ms\":"
                                    "99999999999999}"));
    long long before = wall_ms();
    r = llmq(&a, enq);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    assert_string_equal(job_field(&a, "m1", "state"), "staged");
    long long deadline = strtoll(job_field(&a, "m1", "deadline_ms"), NULL, 10);
    assert_true(deadline >= before + 86400000LL - 60000 &&
                deadline <= wall_ms() + 86400000LL + 60000);
    assert_string_equal(job_field(&a, "m2", "deadline_ms"), "99999999999999");
    assert_string_equal(job_field(&a, "m2", "state"), "staged");
    x = redisCommand(a.c, "EXISTS %sjr:u1", a.prefix);
    assert_int_equal(x->integer, 1); /* unmarked: live */
    freeReplyObject(x);
    x = redisCommand(a.c, "LRANGE %spbs:gpt-4o-mini|/v1/chat/completions 0 -1", a.prefix);
    assert_int_equal(x->elements, 2);
    assert_string_equal(x->element[0]->str, "m1");
    assert_string_equal(x->element[1]->str, "m2");
    freeReplyObject(x);
    /* --completion-window marks the lines that say nothing */
    write_file(path, LINE("f1", ""));
    const char *enqw[] = {"llmq", "enqueue", path, "--completion-window", "24h", NULL};
    r = llmq(&a, enqw);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    assert_string_equal(job_field(&a, "f1", "state"), "staged");
    /* the producer API's option */
    struct llmq_job_options o = {.job_id = "p1", .completion_window = "24h"};
    struct llmq_enqueue_result res;
    assert_int_equal(
        llmq_producer_enqueue(a.producer, "/v1/chat/completions", chat, &o, &res, NULL), LLMQ_OK);
    assert_string_equal(res.state, "staged");
    o.job_id = "p2";
    o.ttl_ms = 60000;
    struct llmq_error err = {0};
    assert_int_not_equal(
        llmq_producer_enqueue(a.producer, "/v1/chat/completions", chat, &o, &res, &err), LLMQ_OK);
    assert_non_null(strstr(res.message[0] ? res.message : err.msg, "ttl_ms"));
    llmq_test_account_close(&a);
}

static void short_deadline_and_stream_refused(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offref");
    const char *path = "/tmp/offload-policy-2.jsonl";
    write_file(path,
               LINE("d1", ",\"llmq\":{\"completion_window\":\"24h\",\"deadline_ms\":"
                          "99999999999999}")
                   LINE("d2", ",\"llmq\":{\"completion_window\":\"24h\",\"ttl_ms\":3600000}"));
    const char *enq[] = {"llmq", "enqueue", path, NULL};
    struct cli_run r = llmq(&a, enq);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, ":2: ttl_ms"));
    assert_non_null(strstr(r.err, "completion window"));
    cli_free(&r);
    char line[512];
    snprintf(line, sizeof(line),
             LINE("d3", ",\"llmq\":{\"completion_window\":\"24h\","
                        "\"deadline_ms\":%lld}"),
             wall_ms() + 3600000LL);
    write_file(path, line);
    r = llmq(&a, enq);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "deadline_ms"));
    cli_free(&r);
    write_file(path, "{\"custom_id\":\"s1\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                     "\"body\":{\"model\":\"gpt-4o-mini\",\"stream\":true,\"messages\":[]},"
                     "\"llmq\":{\"completion_window\":\"24h\"}}\n");
    r = llmq(&a, enq);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "stream"));
    cli_free(&r);
    write_file(path, LINE("w1", ",\"llmq\":{\"completion_window\":\"1h\"}"));
    r = llmq(&a, enq);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "24h"));
    cli_free(&r);
    llmq_test_account_close(&a);
}

static void policy_off_sends_staged_jobs_live(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offback");
    const char *set[] = {"llmq", "offload", "set", "gpt-4o-mini", "--mode", "all", NULL};
    struct cli_run r = llmq(&a, set);
    cli_free(&r);
    struct llmq_job_options o = {.job_id = "b1", .completion_window = "24h"};
    struct llmq_enqueue_result res;
    assert_int_equal(
        llmq_producer_enqueue(a.producer, "/v1/chat/completions", chat, &o, &res, NULL), LLMQ_OK);
    assert_string_equal(job_field(&a, "b1", "state"), "staged");
    const char *off[] = {"llmq", "offload", "set", "gpt-4o-mini", "--mode", "off", NULL};
    r = llmq(&a, off);
    cli_free(&r);
    const char *argv[] = {a.prefix, "test-worker", "60000"};
    redisReply *x = llmq_script_run(a.c, LLMQ_SCRIPT_PBATCH_NEXT, 1, 3, argv, NULL, NULL);
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_ARRAY);
    assert_int_equal(x->elements, 0); /* nothing to offload */
    freeReplyObject(x);
    assert_string_equal(job_field(&a, "b1", "state"), "queued");
    x = redisCommand(a.c, "LRANGE %skq:normal|gpt-4o-mini|| 0 -1", a.prefix);
    assert_int_equal(x->elements, 1);
    assert_string_equal(x->element[0]->str, "b1");
    freeReplyObject(x);
    llmq_test_account_close(&a);
}

static void cancelled_staged_job_is_left_out(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offcancel");
    const char *set[] = {"llmq", "offload", "set", "gpt-4o-mini", "--mode", "all", NULL};
    struct cli_run r = llmq(&a, set);
    cli_free(&r);
    struct llmq_enqueue_result res;
    struct llmq_job_options o = {.job_id = "k1", .completion_window = "24h"};
    assert_int_equal(
        llmq_producer_enqueue(a.producer, "/v1/chat/completions", chat, &o, &res, NULL), LLMQ_OK);
    o.job_id = "k2";
    assert_int_equal(
        llmq_producer_enqueue(a.producer, "/v1/chat/completions", chat, &o, &res, NULL), LLMQ_OK);
    const char *cancel[] = {a.prefix, "", "k1"};
    redisReply *x = llmq_script_run(a.c, LLMQ_SCRIPT_JOB_CANCEL, 1, 3, cancel, NULL, NULL);
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_ARRAY);
    assert_int_equal(x->element[0]->integer, 1); /* cancelled */
    freeReplyObject(x);
    const char *next[] = {a.prefix, "test-worker", "60000"};
    x = llmq_script_run(a.c, LLMQ_SCRIPT_PBATCH_NEXT, 1, 3, next, NULL, NULL);
    assert_int_equal(x->type, REDIS_REPLY_ARRAY);
    assert_true(x->elements > 1); /* a new provider batch: k2 only */
    char jobs_key[256];
    snprintf(jobs_key, sizeof(jobs_key), "%spbj:%s", a.prefix, x->element[0]->str);
    freeReplyObject(x);
    x = redisCommand(a.c, "LRANGE %s 0 -1", jobs_key);
    assert_int_equal(x->elements, 1);
    assert_string_equal(x->element[0]->str, "k2");
    freeReplyObject(x);
    assert_string_equal(job_field(&a, "k2", "state"), "offloaded");
    x = redisCommand(a.c, "EXISTS %sres:k1", a.prefix);
    assert_int_equal(x->integer, 1); /* k1 ended (cancelled) */
    freeReplyObject(x);
    llmq_test_account_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(policy_set_get_and_refusals),
        cmocka_unit_test(marked_jobs_staged_under_all_only),
        cmocka_unit_test(tenant_policy_wins),
        cmocka_unit_test(short_deadline_and_stream_refused),
        cmocka_unit_test(policy_off_sends_staged_jobs_live),
        cmocka_unit_test(cancelled_staged_job_is_left_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
