/* worker/settle_request.c: the settle request's one field table.
 *
 * - The argument vector puts every field where lua/job_settle.lua's ARGV
 *   header says (the header is read from the source tree and compared name
 *   by name), with the value of the job's own field.
 * - Every spooled field survives the spool's JSON write and read, and a line
 *   as the spool wrote it before the table existed is read the same way.
 * - Unusable lines are refused, missing members take their defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "settle_request.h"
#include "worker.h"

/* A job with a distinct value in every field. */
static struct worker_job *full_job(void)
{
    struct worker_job *job = calloc(1, sizeof(*job));
    assert_non_null(job);
    job->settle.mode = WORKER_SETTLE_RETRY;
    snprintf(job->prio, sizeof(job->prio), "high");
    snprintf(job->eid, sizeof(job->eid), "1700000000000-7");
    job->id = strdup("job-42");
    job->handle = strdup("h:gpt-4o:99");
    job->model = strdup("gpt-4o");
    job->settle.actual_tokens = 1234;
    job->settle.line = strdup("{\"custom_id\":\"job-42\"}");
    snprintf(job->settle.reason, sizeof(job->settle.reason), "http 503");
    job->settle.delay_ms = 2500;
    job->settle.refund = 1;
    job->settle.pause_ms = 700;
    job->settle.rem_req = 11;
    job->settle.rem_tok = 22;
    job->settle.reset_req_ms = 33;
    job->settle.reset_tok_ms = 44;
    job->settle.lim_req = 55;
    job->settle.lim_tok = 66;
    job->cost = 77;
    job->attempts = 2;
    job->max_attempts = 5;
    return job;
}

static void free_job(struct worker_job *job)
{
    llmq_worker_job_free(job); /* no account, no slot: memory only */
}

/* ARGV names job_settle.lua documents, one "-- ARGV[n] name: ..." line each:
 * names[n] (new strings); returns the highest n. */
static int lua_argv_names(char names[LLMQ_WORKER_SETTLE_ARGC + 8][32])
{
    const char *src = getenv("LLMQ_SOURCE_DIR");
    assert_non_null(src);
    char path[1024];
    snprintf(path, sizeof(path), "%s/lua/job_settle.lua", src);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    int max = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        int n;
        char name[32];
        if (sscanf(line, "-- ARGV[%d] %31[a-z_]:", &n, name) != 2)
            continue;
        assert_true(n > 0 && n < LLMQ_WORKER_SETTLE_ARGC + 8);
        snprintf(names[n], sizeof(names[n]), "%s", name);
        max = n > max ? n : max;
    }
    fclose(f);
    return max;
}

static void test_argv_follows_the_script_header(void **state)
{
    (void)state;
    char names[LLMQ_WORKER_SETTLE_ARGC + 8][32];
    memset(names, 0, sizeof(names));
    int documented = lua_argv_names(names);
    assert_int_equal(documented, LLMQ_WORKER_SETTLE_ARGC - 1);
    for (int i = 1; i <= documented; i++) {
        const char *ours = llmq_worker_settle_argv_name(i);
        assert_non_null(ours);
        assert_string_equal(ours, names[i]);
    }
    assert_null(llmq_worker_settle_argv_name(0));
    assert_null(llmq_worker_settle_argv_name(LLMQ_WORKER_SETTLE_ARGC));
}

static void test_argv_carries_every_field(void **state)
{
    (void)state;
    /* What each documented name must carry for full_job(). */
    static const struct {
        const char *name, *value;
    } want[] = {
        {"mode", "retry"},
        {"prio", "high"},
        {"eid", "1700000000000-7"},
        {"id", "job-42"},
        {"handle", "h:gpt-4o:99"},
        {"actual", "1234"},
        {"line", "{\"custom_id\":\"job-42\"}"},
        {"reason", "http 503"},
        {"delay_ms", "2500"},
        {"refund", "1"},
        {"model", "gpt-4o"},
        {"pause_ms", "700"},
        {"rem_req", "11"},
        {"rem_tok", "22"},
        {"reset_req_ms", "33"},
        {"reset_tok_ms", "44"},
        {"lim_req", "55"},
        {"lim_tok", "66"},
        {"key_id", "0123456789abcdef"},
    };
    struct worker_job *job = full_job();
    struct worker_settle_argv args;
    memset(&args, 0, sizeof(args));
    assert_int_equal(llmq_worker_settle_argv(job, "llmq:{a}:", "0123456789abcdef", &args),
                     LLMQ_WORKER_SETTLE_ARGC);
    assert_string_equal(args.argv[0], "llmq:{a}:");
    int seen = 0;
    for (int i = 1; i < LLMQ_WORKER_SETTLE_ARGC; i++) {
        const char *name = llmq_worker_settle_argv_name(i);
        assert_non_null(args.argv[i]);
        for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++)
            if (strcmp(want[k].name, name) == 0) {
                assert_string_equal(args.argv[i], want[k].value);
                seen++;
            }
    }
    assert_int_equal(seen, (int)(sizeof(want) / sizeof(want[0])));

    /* No line: an empty argument; refund off: "0"; no mode: nothing sent. */
    free(job->settle.line);
    job->settle.line = NULL;
    job->settle.refund = 0;
    assert_int_equal(llmq_worker_settle_argv(job, "p", "k", &args), LLMQ_WORKER_SETTLE_ARGC);
    assert_string_equal(args.argv[7], "");
    assert_string_equal(args.argv[10], "0");
    job->settle.mode = WORKER_SETTLE_UNSET;
    assert_int_equal(llmq_worker_settle_argv(job, "p", "k", &args), -1);
    free_job(job);
}

/* Every field of a and b that the spool keeps is equal. */
static void assert_same_spooled(const struct worker_job *a, const struct worker_job *b)
{
    assert_int_equal(a->settle.mode, b->settle.mode);
    assert_string_equal(a->prio, b->prio);
    assert_string_equal(a->eid, b->eid);
    assert_string_equal(a->id, b->id);
    assert_string_equal(a->handle, b->handle);
    assert_string_equal(a->model, b->model);
    assert_int_equal(a->settle.actual_tokens, b->settle.actual_tokens);
    if (a->settle.line == NULL)
        assert_null(b->settle.line);
    else
        assert_string_equal(a->settle.line, b->settle.line);
    assert_string_equal(a->settle.reason, b->settle.reason);
    assert_int_equal(a->settle.delay_ms, b->settle.delay_ms);
    assert_int_equal(a->settle.refund, b->settle.refund);
    assert_int_equal(a->settle.pause_ms, b->settle.pause_ms);
    assert_int_equal(a->settle.rem_req, b->settle.rem_req);
    assert_int_equal(a->settle.rem_tok, b->settle.rem_tok);
    assert_int_equal(a->settle.reset_req_ms, b->settle.reset_req_ms);
    assert_int_equal(a->settle.reset_tok_ms, b->settle.reset_tok_ms);
    assert_int_equal(a->settle.lim_req, b->settle.lim_req);
    assert_int_equal(a->settle.lim_tok, b->settle.lim_tok);
    assert_int_equal(a->cost, b->cost);
    assert_int_equal(a->attempts, b->attempts);
    assert_int_equal(a->max_attempts, b->max_attempts);
}

static struct worker_job *read_back(const char *text)
{
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    struct worker_job *job = calloc(1, sizeof(*job));
    assert_non_null(job);
    int rc = llmq_worker_settle_from_json(job, o);
    json_decref(o);
    if (rc != 0) {
        free_job(job);
        return NULL;
    }
    return job;
}

static void test_spool_round_trip_of_every_field(void **state)
{
    (void)state;
    struct worker_job *job = full_job();
    for (int m = WORKER_SETTLE_DONE; m < WORKER_SETTLE_MODE_COUNT; m++) {
        job->settle.mode = (enum worker_settle_mode)m;
        json_t *o = llmq_worker_settle_to_json(job, job->settle.mode);
        assert_non_null(o);
        assert_null(json_object_get(o, "key_id")); /* never spooled */
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        struct worker_job *back = read_back(text);
        free(text);
        assert_non_null(back);
        assert_same_spooled(job, back);
        free_job(back);
    }
    /* The mode written can differ from the job's (authpause as handback). */
    job->settle.mode = WORKER_SETTLE_AUTHPAUSE;
    json_t *o = llmq_worker_settle_to_json(job, WORKER_SETTLE_HANDBACK);
    assert_string_equal(json_string_value(json_object_get(o, "mode")), "handback");
    json_decref(o);
    /* No line: left out, and read back as none. */
    free(job->settle.line);
    job->settle.line = NULL;
    o = llmq_worker_settle_to_json(job, WORKER_SETTLE_DEAD);
    assert_null(json_object_get(o, "line"));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    struct worker_job *back = read_back(text);
    free(text);
    assert_non_null(back);
    assert_null(back->settle.line);
    free_job(back);
    free_job(job);
}

/* A line exactly as the spool wrote it before the field table (json_pack of
 * 21 members, then "line"): a spool left by that version is still read. */
static void test_reads_a_spool_line_of_the_previous_format(void **state)
{
    (void)state;
    const char *old =
        "{\"v\":1,\"mode\":\"retry\",\"prio\":\"high\",\"eid\":\"1700000000000-7\","
        "\"id\":\"job-42\",\"handle\":\"h:gpt-4o:99\",\"model\":\"gpt-4o\",\"actual\":1234,"
        "\"reason\":\"http 503\",\"delay_ms\":2500,\"refund\":1,\"pause_ms\":700,"
        "\"rem_req\":11,\"rem_tok\":22,\"reset_req_ms\":33,\"reset_tok_ms\":44,"
        "\"lim_req\":55,\"lim_tok\":66,\"cost\":77,\"attempts\":2,\"max_attempts\":5,"
        "\"line\":\"{\\\"custom_id\\\":\\\"job-42\\\"}\"}";
    struct worker_job *want = full_job();
    struct worker_job *back = read_back(old);
    assert_non_null(back);
    assert_same_spooled(want, back);
    free_job(back);
    free_job(want);
}

static void test_defaults_and_refusals(void **state)
{
    (void)state;
    struct worker_job *job = read_back("{\"mode\":\"done\",\"prio\":\"low\",\"eid\":\"1-0\","
                                       "\"id\":\"j\"}");
    assert_non_null(job);
    assert_int_equal(job->settle.mode, WORKER_SETTLE_DONE);
    assert_string_equal(job->handle, "");
    assert_string_equal(job->model, "");
    assert_string_equal(job->settle.reason, "");
    assert_null(job->settle.line);
    assert_int_equal(job->settle.actual_tokens, -1);
    assert_int_equal(job->settle.delay_ms, 0);
    assert_int_equal(job->settle.refund, 0);
    assert_int_equal(job->settle.rem_req, -1);
    assert_int_equal(job->settle.reset_tok_ms, -1);
    assert_int_equal(job->settle.lim_tok, -1);
    assert_int_equal(job->cost, 0);
    assert_int_equal(job->max_attempts, 0);
    free_job(job);

    static const char *const unusable[] = {
        "{\"prio\":\"low\",\"eid\":\"1-0\",\"id\":\"j\"}",                        /* no mode */
        "{\"mode\":\"finish\",\"prio\":\"low\",\"eid\":\"1-0\",\"id\":\"j\"}",    /* bad mode */
        "{\"mode\":\"done\",\"eid\":\"1-0\",\"id\":\"j\"}",                       /* no prio */
        "{\"mode\":\"done\",\"prio\":\"lowest!!\",\"eid\":\"1-0\",\"id\":\"j\"}", /* too long */
        "{\"mode\":\"done\",\"prio\":\"low\",\"id\":\"j\"}",                      /* no eid */
        "{\"mode\":\"done\",\"prio\":\"low\",\"eid\":\"1-0\"}",                   /* no id */
        "{\"mode\":\"done\",\"prio\":\"low\",\"eid\":\"1-0\",\"id\":7}",          /* id no string */
        "[1,2]",
    };
    for (size_t i = 0; i < sizeof(unusable) / sizeof(unusable[0]); i++) {
        struct worker_job *bad = read_back(unusable[i]);
        if (bad != NULL)
            fail_msg("accepted: %s", unusable[i]);
    }
}

static void test_mode_names(void **state)
{
    (void)state;
    static const char *const names[] = {"done", "retry", "dead", "handback", "authpause"};
    for (int m = WORKER_SETTLE_DONE; m < WORKER_SETTLE_MODE_COUNT; m++) {
        const char *name = llmq_worker_settle_mode_name((enum worker_settle_mode)m);
        assert_string_equal(name, names[m - WORKER_SETTLE_DONE]);
        assert_int_equal(llmq_worker_settle_mode_parse(name), m);
    }
    assert_null(llmq_worker_settle_mode_name(WORKER_SETTLE_UNSET));
    assert_null(llmq_worker_settle_mode_name(WORKER_SETTLE_MODE_COUNT));
    assert_int_equal(llmq_worker_settle_mode_parse("Done"), WORKER_SETTLE_UNSET);
    assert_int_equal(llmq_worker_settle_mode_parse(NULL), WORKER_SETTLE_UNSET);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argv_follows_the_script_header),
        cmocka_unit_test(test_argv_carries_every_field),
        cmocka_unit_test(test_spool_round_trip_of_every_field),
        cmocka_unit_test(test_reads_a_spool_line_of_the_previous_format),
        cmocka_unit_test(test_defaults_and_refusals),
        cmocka_unit_test(test_mode_names),
    };
    return cmocka_run_group_tests_name("settle_request", tests, NULL, NULL);
}
