/* What a person sees while jobs wait and in `llmq status`, with a real Redis,
 * openai-sim and llmq-worker:
 * - `enqueue --wait` with no worker says that no worker consumes the account,
 *   shows the jobs as queued (not running), and writes few progress lines to
 *   a non-terminal; once a worker starts, the jobs complete;
 * - status lists a running worker as live and, after it exited, not as live;
 * - a busy account: buckets ordered model, its tenants, its users; soft and
 *   paused buckets marked; models without a limit warned about; every line
 *   within 100 columns; --json numbers are numbers. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "llmq/limiter.h"
#include "redis/redis.h"
#include "testsupport.h"
#include "worker_support.h"

static char *read_file(const char *path)
{
    return cli_slurp(path);
}

static void run_ok(const char *account, const char *const *argv)
{
    struct cli_run r = cli_run(account, argv);
    if (r.status != 0)
        fail_msg("%s %s: exit %d: %s", argv[1], argv[2] ? argv[2] : "", r.status, r.err);
    cli_free(&r);
}

static size_t count_of(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

static void test_wait_without_worker_then_with_one(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128];
    llmq_test_unique_name(account, sizeof(account), "nowork");
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-nowork-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-nowork-%d.log", (int)getpid());
    worker_write_jobs(jobs, "n", 5, "gpt-4o-mini", 10, NULL);
    const char *limits[] = {"llmq", "limits", "set",     "gpt-4o-mini", "--rpm",
                            "1000", "--tpm",  "1000000", NULL};
    run_ok(account, limits);

    /* stderr is a file: not a terminal */
    const char *wait[] = {"llmq", "enqueue", "--wait", "--timeout", "120", jobs, NULL};
    pid_t cli = cli_start(account, wait);
    char err_path[64];
    snprintf(err_path, sizeof(err_path), "/tmp/llmq-cli-%d.err", (int)cli);
    char *err = NULL;
    for (int i = 0; i < 600; i++) { /* the first check runs at once; allow a slow machine */
        free(err);
        err = read_file(err_path);
        if (strstr(err, "no worker is consuming") != NULL)
            break;
        usleep(50000);
    }
    if (strstr(err, "no worker is consuming account") == NULL || strstr(err, account) == NULL)
        fail_msg("no word about the missing worker:\n%s", err);
    free(err);

    /* the status of the same account says it too */
    const char *status[] = {"llmq", "status", NULL};
    struct cli_run st = cli_run(account, status);
    assert_int_equal(st.status, 0);
    assert_non_null(strstr(st.out, "workers live (seen within 30 s): 0"));
    cli_free(&st);

    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", "300", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    const char *args[] = {"--concurrency", "2", "--exit-when-idle-ms", "3000", NULL};
    pid_t worker = worker_start(account, &sim, log, args);

    struct cli_run r = cli_finish(cli);
    assert_int_equal(r.status, 0);
    assert_int_equal(cli_count_lines(r.out), 5);
    if (strstr(r.err, "a worker is consuming account") == NULL)
        fail_msg("the worker's arrival was not reported:\n%s", r.err);
    /* while nobody worked the jobs were queued, not running */
    assert_non_null(strstr(r.err, "0/5 done (0 dead), 5 queued, 0 running"));
    assert_non_null(strstr(r.err, "(no worker)"));
    /* sparing: at most a line per tenth of the jobs (5 jobs: 5), the final
     * line, and a 30 s line if the machine is slow */
    size_t lines = count_of(r.err, ": progress: ");
    printf("# %zu progress lines\n", lines);
    assert_true(lines >= 1 && lines <= 8);
    assert_non_null(strstr(r.err, "5/5 done (0 dead), 0 queued, 0 running"));
    cli_free(&r);

    /* the worker is live while it runs ... */
    st = cli_run(account, status);
    assert_int_equal(st.status, 0);
    int live = strstr(st.out, "workers live (seen within 30 s): 1") != NULL;
    int exited = waitpid(worker, NULL, WNOHANG) == worker;
    if (!live && !exited)
        fail_msg("a running worker is not listed as live:\n%s", st.out);
    cli_free(&st);
    /* ... and not after it exited */
    assert_int_equal(exited ? 0 : worker_wait(worker, 60000), 0);
    st = cli_run(account, status);
    assert_int_equal(st.status, 0);
    /* it exited cleanly: stopped, and seen when it last worked, not "never"
     * (issue 33 item 14) */
    int not_live = strstr(st.out, "workers live (seen within 30 s): 0") != NULL;
    int stopped_seen = strstr(st.out, "stopped (silent, nothing pending): 1") != NULL &&
                       strstr(st.out, "seen never") == NULL && strstr(st.out, " ago ") != NULL;
    if (!not_live || !stopped_seen)
        printf("%s", st.out);
    cli_free(&st);
    if (!not_live)
        fail_msg("an exited worker is still listed as live");
    if (!stopped_seen)
        fail_msg("an exited worker is not listed as stopped, seen a moment ago");
    const char *status_json[] = {"llmq", "status", "--json", NULL};
    st = cli_run(account, status_json);
    assert_int_equal(st.status, 0);
    json_t *o = json_loads(st.out, 0, NULL);
    json_t *ws = json_object_get(o, "workers");
    long long seen = json_array_size(ws) == 1
                         ? json_integer_value(json_object_get(json_array_get(ws, 0), "seen_ms_ago"))
                         : -2;
    json_decref(o);
    cli_free(&st);
    printf("# the stopped worker was seen %lld ms ago\n", seen);
    assert_true(seen >= 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(jobs);
    unlink(log);
}

/* Position of needle in hay, or -1. */
static long pos_of(const char *hay, const char *needle)
{
    const char *p = strstr(hay, needle);
    return p ? (long)(p - hay) : -1;
}

static void test_busy_status_is_readable(void **state)
{
    (void)state;
    char account[64], prefix[128], jobs[128];
    llmq_test_unique_name(account, sizeof(account), "busy");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    /* buckets created out of order, with long names and big numbers */
    const char *sets[][12] = {
        {"llmq", "limits", "set", "gpt-4o", "--user", "u-with-a-rather-long-user-name-000001",
         "--rpm", "999999999", NULL},
        {"llmq", "limits", "set", "gpt-4o", "--tenant", "acme", "--tpm", "200000000000", "--soft",
         NULL},
        {"llmq", "limits", "set", "a-model-whose-name-is-much-longer-than-a-column", "--rpm",
         "123456789012", "--tpm", "987654321098", NULL},
        {"llmq", "limits", "set", "gpt-4o", "--tenant", "beta", "--rpm", "10", NULL},
        {"llmq", "limits", "set", "gpt-4o", "--tenant", "acme", "--user", "bob", "--rpm", "7",
         NULL},
        {"llmq", "limits", "set", "gpt-4o", "--rpm", "5000", "--tpm", "800000", NULL},
        {"llmq", "limits", "set", "gpt-4o", "--user", "*", "--rpm", "60", NULL},
        {"llmq", "limits", "set", "gpt-4o", "--tenant", "*", "--tpm", "100000", "--soft", NULL},
        {"llmq", "limits", "set", "gpt-4.1", "--rpm", "30000", "--tpm", "150000000", NULL},
    };
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
        run_ok(account, sets[i]);
    redisContext *c = llmq_test_redis_connect();
    /* a pause on gpt-4.1 (as after a 429 with a long retry-after) */
    struct llmq_limiter_config cfg = {.redis_url = llmq_test_redis_url()};
    struct llmq_limiter *lim = llmq_limiter_new(&cfg, NULL);
    assert_non_null(lim);
    assert_int_equal(llmq_limiter_pause(lim, account, "gpt-4.1", 600000, NULL, NULL), LLMQ_OK);
    llmq_limiter_free(lim);
    /* jobs of a model without a limit, and a dead consumer with a long name */
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-busy-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "b", 30, "gpt-4o-mini", 10, NULL);
    const char *enq[] = {"llmq", "enqueue", "--quiet", jobs, NULL};
    struct cli_run r = cli_run(account, enq);
    assert_int_equal(r.status, 0);
    assert_int_equal(count_of(r.err, "warning: model gpt-4o-mini has no limit"), 1);
    cli_free(&r);
    /* what a dispatch delivers lands in q:normal (lua/dispatch.lua: XADD,
     * then XREADGROUP to the worker's consumer) */
    for (int i = 0; i < 3; i++)
        freeReplyObject(redisCommand(c, "XADD %sq:normal * id b-%d", prefix, i));
    freeReplyObject(redisCommand(c,
                                 "XREADGROUP GROUP workers "
                                 "a-worker-that-exited-long-ago-with-a-very-long-host-name-12345 "
                                 "COUNT 3 STREAMS %sq:normal >",
                                 prefix));
    /* a worker that exited cleanly: its consumer stays, nothing pending */
    freeReplyObject(
        redisCommand(c, "XGROUP CREATECONSUMER %sq:normal workers a-clean-exit", prefix));

    const char *status[] = {"llmq", "status", NULL};
    r = cli_run(account, status);
    assert_int_equal(r.status, 0);
    printf("%s", r.out);
    size_t line_no = 0;
    for (char *line = r.out, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        assert_non_null(nl);
        line_no++;
        if (nl - line > 100)
            fail_msg("line %zu is %ld columns: %.*s", line_no, (long)(nl - line), (int)(nl - line),
                     line);
    }
    /* order: each model, then its tenants each with its users, then the
     * users without a tenant (and of every tenant) */
    const char *order[] = {
        "    a-model-whose-name-is", "    gpt-4.1 ",        "    gpt-4o ",
        "      gpt-4o/t/*",          "      gpt-4o/t/acme", "        gpt-4o/t/acme/u/bob",
        "      gpt-4o/t/beta",       "      gpt-4o/u/*",    "      gpt-4o/u/u-with-a-rath"};
    for (size_t i = 0; i + 1 < sizeof(order) / sizeof(order[0]); i++) {
        long a = pos_of(r.out, order[i]), b = pos_of(r.out, order[i + 1]);
        if (a < 0 || b < 0 || a > b)
            fail_msg("'%s' (%ld) should come before '%s' (%ld)", order[i], a, order[i + 1], b);
    }
    /* marks */
    long acme = pos_of(r.out, "      gpt-4o/t/acme");
    assert_true(strncmp(r.out + acme + strlen("      gpt-4o/t/acme"), "              soft", 18) ==
                0);
    assert_true(pos_of(r.out, "PAUSED") > pos_of(r.out, "    gpt-4.1 "));
    assert_true(pos_of(r.out, "PAUSED") < pos_of(r.out, "    gpt-4o "));
    assert_non_null(strstr(r.out, "WARNING: model gpt-4o-mini has no limit"));
    assert_non_null(strstr(r.out, "workers live (seen within 30 s): 0"));
    /* silent with jobs pending: gone (they are reclaimed); silent with
     * none: stopped, listed after */
    assert_non_null(strstr(r.out, "gone (silent; their jobs are reclaimed after the visibility "
                                  "timeout): 1\n    a-worker-that-exited"));
    assert_non_null(strstr(r.out, "stopped (silent, nothing pending): 1\n    a-clean-exit"));
    cli_free(&r);

    /* JSON for machines: numbers as numbers */
    const char *sj[] = {"llmq", "status", "--json", NULL};
    r = cli_run(account, sj);
    assert_int_equal(r.status, 0);
    json_t *o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    json_t *b0 = json_array_get(json_object_get(o, "buckets"), 0);
    assert_true(json_is_integer(json_object_get(b0, "requests_limit")));
    assert_true(json_is_boolean(json_object_get(b0, "soft")));
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(o, "unlimited_models"), 0)),
        "gpt-4o-mini");
    json_t *w0 = NULL, *w;
    size_t wi;
    json_array_foreach(json_object_get(o, "workers"), wi, w)
    {
        if (strncmp(json_string_value(json_object_get(w, "name")), "a-worker-that-exited", 20) == 0)
            w0 = w;
    }
    assert_non_null(w0);
    assert_true(json_is_false(json_object_get(w0, "live")));
    assert_int_equal(json_integer_value(json_object_get(w0, "pending")), 3);
    json_decref(o);
    cli_free(&r);
    const char *lj[] = {"llmq", "limits", "get", "--json", NULL};
    r = cli_run(account, lj);
    assert_int_equal(r.status, 0);
    o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    json_t *g = json_object_get(json_object_get(o, "limits"), "gpt-4o");
    assert_int_equal(json_integer_value(json_object_get(g, "requests")), 5000);
    assert_int_equal(json_integer_value(json_object_get(g, "tokens")), 800000);
    json_t *t = json_object_get(json_object_get(o, "limits"), "gpt-4o/t/acme");
    assert_true(json_is_true(json_object_get(t, "soft")));
    json_decref(o);
    cli_free(&r);
    redisFree(c);
    unlink(jobs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_without_worker_then_with_one),
        cmocka_unit_test(test_busy_status_is_readable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
