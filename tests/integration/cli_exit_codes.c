/* The CLI's one exit-code contract (README "Exit codes"), walked per
 * subcommand: 0 ok; 1 runtime failure (Redis unreachable, a job without a
 * result yet); 2 usage or invalid input (unknown option, missing argument, a
 * value out of range, an unknown id, subcommand or setting, a malformed Redis
 * URL, a bad account name); 3 dead-lettered (enqueue_cli.c, results_cli.c).
 * Every command parses its options with the one parser (llmq_cli_parse), so
 * a bad option names the command's --help.
 * Each case also names what was wrong on stderr: the message must carry the
 * expected words, and help goes to stdout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs_cli_run.h"
#include "llmq/limiter.h"
#include "redis/redis.h"
#include "job_fields.h"
#include "testsupport.h"

#define MAX_ARGS 12
#define UNREACHABLE "redis://127.0.0.1:1/0" /* nothing listens on port 1 */
#define MALFORMED "redis://127.0.0.1:notaport/0"

struct exit_case {
    const char *argv[MAX_ARGS]; /* after "llmq"; "@FILE" is a valid batch file */
    int code;
    const char *err; /* stderr must contain this (NULL: not checked) */
    const char *out; /* stdout must contain this (NULL: not checked) */
};

static const struct exit_case cases[] = {
    /* the front end */
    {{NULL}, 2, "usage: llmq", NULL},
    {{"nosuch"}, 2, "unknown command 'nosuch'", NULL},
    {{"--help"}, 0, NULL, "Exit codes: 0 ok, 1 runtime failure, 2 usage or invalid input"},
    {{"--version"}, 0, NULL, "llmq "},

    /* enqueue */
    {{"enqueue", "--help"}, 0, NULL, "usage: llmq enqueue"},
    {{"enqueue", "--no-such-option", "@FILE"}, 2, "unrecognized option '--no-such-option'", NULL},
    {{"enqueue", "@FILE", "--priority"}, 2, "requires an argument", NULL},
    {{"enqueue", "@FILE", "--priority", "urgent"},
     2,
     "--priority: expected high, normal or low",
     NULL},
    {{"enqueue", "@FILE", "--max-attempts", "-5"},
     2,
     "--max-attempts: expected an integer in 1..100",
     NULL},
    {{"enqueue", "@FILE", "--timeout", "soon"}, 2, "--timeout: expected an integer", NULL},
    {{"enqueue"}, 2, "expected one FILE", NULL},
    {{"enqueue", "@FILE", "--timeout", "5"}, 2, "--timeout only applies with --wait", NULL},
    {{"enqueue", "@FILE", "--output", "/tmp/x"}, 2, "--output only applies with --wait", NULL},
    {{"enqueue", "--check", "--wait", "@FILE"}, 2, "nothing to --wait for", NULL},
    {{"enqueue", "@FILE", "@FILE"}, 2, "unexpected argument", NULL},
    {{"enqueue", "/nonexistent/jobs.jsonl"}, 2, "/nonexistent/jobs.jsonl", NULL},
    {{"enqueue", "--check", "@FILE"}, 0, "1 valid job(s)", NULL},
    /* a count that would wrap the cost: line and field named, nothing enqueued */
    {{"enqueue", "@BIGN"}, 2, ":2: Invalid 'n': integer above maximum value", NULL},
    {{"enqueue", "--check", "@BIGN"}, 2, "1 invalid line(s)", NULL},
    {{"enqueue", "@FILE", "--redis", UNREACHABLE}, 1, "Connection refused", NULL},
    {{"enqueue", "@FILE", "--redis", MALFORMED}, 2, "--redis: redis url", NULL},
    {{"enqueue", "@FILE", "--account", "a b"}, 2, "--account: account name", NULL},

    /* status */
    {{"status", "--help"}, 0, NULL, "usage: llmq status"},
    {{"status", "--no-such-option"}, 2, "unrecognized option '--no-such-option'", NULL},
    {{"status", "extra"}, 2, "unexpected argument 'extra'", NULL},
    {{"status", "--redis"}, 2, "requires an argument", NULL},
    {{"status"}, 0, NULL, "account "},
    {{"status", "--redis", UNREACHABLE}, 1, "Connection refused", NULL},
    {{"status", "--redis", MALFORMED}, 2, "--redis: redis url", NULL},
    {{"status", "--account", "a b"}, 2, "--account: account name", NULL},

    /* results */
    {{"results", "--help"}, 0, NULL, "usage: llmq results"},
    {{"results", "--no-such-option", "q1"}, 2, "unrecognized option '--no-such-option'", NULL},
    {{"results"}, 2, "give job ids or --all", NULL},
    {{"results", "--all", "q1"}, 2, "give job ids or --all", NULL},
    {{"results", "--timeout", "-1", "--wait", "q1"}, 2, "--timeout: expected an integer", NULL},
    {{"results", ""}, 2, "'' is not a job id: custom_id must not be empty", NULL},
    {{"results", "not an id"}, 2, "not an id: no such job", NULL}, /* a custom_id: any string */
    {{"results", "--timeout", "5", "q1"}, 2, "--timeout only applies with --wait", NULL},
    {{"results", "nosuch-id"}, 2, "nosuch-id: no such job", NULL},
    {{"results", "q1", "nosuch-id"}, 2, "nosuch-id: no such job", NULL},
    {{"results", "q1"}, 1, "q1: no result yet (job queued)", NULL},
    {{"results", "--wait", "--timeout", "0", "q1"}, 1, NULL, NULL},
    {{"results", "q1", "--redis", UNREACHABLE}, 1, "Connection refused", NULL},
    {{"results", "q1", "--redis", MALFORMED}, 2, "--redis: redis url", NULL},

    /* dead */
    {{"dead", "--help"}, 0, NULL, "usage: llmq dead"},
    {{"dead", "list", "--no-such-option"}, 2, "unrecognized option '--no-such-option'", NULL},
    {{"dead"}, 2, "expected list, retry or purge", NULL},
    {{"dead", "frob"}, 2, "unknown subcommand 'frob'", NULL},
    {{"dead", "list", "--limit"}, 2, "requires an argument", NULL},
    {{"dead", "list", "--limit", "0"}, 2, "--limit: expected an integer", NULL},
    {{"dead", "list", "q1"}, 2, "list takes no job ids", NULL},
    {{"dead", "retry"}, 2, "give --all or job ids", NULL},
    {{"dead", "list", "--all"}, 2, "--all belongs to 'dead retry|purge'", NULL},
    {{"dead", "retry", "--json", "q1"}, 2, "--json belongs to 'dead list'", NULL},
    {{"dead", "retry", "--all", "q1"}, 2, "give --all or job ids", NULL},
    {{"dead", "retry", "nosuch-id"}, 2, "nosuch-id: no such job", NULL},
    {{"dead", "retry", "q1"}, 2, "q1: is not dead", NULL},
    {{"dead", "purge", "nosuch-id"}, 2, "nosuch-id: no such job", NULL},
    {{"dead", "purge", "q1"}, 2, "q1: is not dead", NULL},
    {{"dead", "list"}, 0, NULL, NULL},
    {{"dead", "retry", "--all"}, 0, "0 job(s) queued", NULL},
    {{"dead", "list", "--redis", UNREACHABLE}, 1, "Connection refused", NULL},
    {{"dead", "list", "--redis", MALFORMED}, 2, "--redis: redis url", NULL},

    /* settings */
    {{"settings", "--help"}, 0, NULL, "usage: llmq settings"},
    {{"settings", "--no-such-option"}, 2, "unrecognized option '--no-such-option'", NULL},
    {{"settings", "frob"}, 2, "unknown subcommand 'frob'", NULL},
    {{"settings", "set", "result_max"}, 2, "set takes FIELD VALUE", NULL},
    {{"settings", "set", "result_max", "-5"}, 2, "result_max: expected an integer in 1..", NULL},
    {{"settings", "set", "result_max", "0"}, 2, "result_max: expected an integer in 1..", NULL},
    {{"settings", "set", "result_max", "abc"}, 2, "result_max: expected an integer in 1..", NULL},
    {{"settings", "set", "nosuch", "1"}, 2, "unknown setting 'nosuch'", NULL},
    {{"settings", "set", "max_body_bytes", "99999999999999"},
     2,
     "max_body_bytes: expected an integer in 1..17179869184",
     NULL},
    {{"settings", "get", "nosuch"}, 2, "unknown setting 'nosuch'", NULL},
    {{"settings", "unset"}, 2, "unset takes FIELD", NULL},
    {{"settings", "get"}, 0, NULL, "result_max"},
    {{"settings", "get", "--redis", UNREACHABLE}, 1, "Connection refused", NULL},
    {{"settings", "get", "--redis", MALFORMED}, 2, "--redis: redis url", NULL},

    /* limits */
    {{"limits", "--help"}, 0, NULL, "usage: llmq limits"},
    {{"limits", "get", "--no-such-option"}, 2, "unrecognized option '--no-such-option'", NULL},
    {{"limits"}, 2, "expected set, unset, get or policy", NULL},
    {{"limits", "frob"}, 2, "unknown subcommand 'frob'", NULL},
    {{"limits", "set"}, 2, "MODEL is required", NULL},
    {{"limits", "set", "gpt-4o", "--rpm"}, 2, "requires an argument", NULL},
    {{"limits", "set", "gpt-4o", "--rpm", "-1"}, 2, "--rpm: expected an integer in 0..", NULL},
    {{"limits", "set", "gpt-4o", "--tpm", "lots"}, 2, "--tpm: expected an integer in 0..", NULL},
    {{"limits", "set", "gpt-4o", "--rpm", "0", "--tpm", "0"}, 2, "would have no limit", NULL},
    {{"limits", "set", "gpt-4o", "--mode", "leaky"}, 2, "--mode: expected window or gcra", NULL},
    {{"limits", "set", "gpt-4o", "--soft", "--rpm", "5"}, 2, "always hard", NULL},
    {{"limits", "set", "gpt-4o"}, 2, "nothing to set", NULL},
    {{"limits", "set", "gpt-4o", "--tenant", "*", "--user", "b", "--rpm", "5"},
     2,
     "a user's limit in every tenant is the user's without a tenant",
     NULL},
    {{"limits", "unset", "nosuch-model"}, 2, "no limit is set for bucket 'nosuch-model'", NULL},
    {{"limits", "unset", "gpt-4o", "--tenant", "nobody"},
     2,
     "no limit is set for bucket 'gpt-4o/t/nobody'",
     NULL},
    {{"limits", "policy", "--headroom-low", "0"}, 2, "--headroom-low: expected an integer", NULL},
    {{"limits", "policy", "--rpm", "5"}, 2, "policy takes --headroom-*", NULL},
    {{"limits", "get", "--json"}, 0, NULL, "\"requests\": 100"},
    {{"limits", "get", "--redis", UNREACHABLE}, 1, "Connection refused", NULL},
    {{"limits", "get", "--redis", MALFORMED}, 2, "--redis: redis url", NULL},

    /* keys (the gateway's keys) */
    {{"keys", "--help"}, 0, NULL, "usage: llmq keys"},
    {{"keys", "list", "--no-such-option"}, 2, "unrecognized option '--no-such-option'", NULL},
    {{"keys", "list", "--no-such-option"}, 2, "(see llmq keys --help)", NULL},
    {{"keys"}, 2, "expected create, list or revoke", NULL},
    {{"keys", "frob"}, 2, "unknown action 'frob'", NULL},
    {{"keys", "create", "--tenant"}, 2, "requires an argument", NULL},
    {{"keys", "create", "--priority", "urgent"},
     2,
     "--priority: expected high, normal or low",
     NULL},
    {{"keys", "create", "--tenant", "a b"}, 2, "--tenant: 'a b' is not a valid name", NULL},
    {{"keys", "create", "--models", "a,,b"}, 2, "--models: expected model names", NULL},
    {{"keys", "create", "--cache", "maybe"}, 2, "--cache: expected use, refresh or off", NULL},
    {{"keys", "create", "--cache", "use", "--cache-ttl-s", "0"},
     2,
     "--cache-ttl-s: expected whole seconds in 1..",
     NULL},
    {{"keys", "create", "--cache-ttl-s", "60"}, 2, "--cache-ttl-s needs --cache", NULL},
    {{"keys", "create", "--role", "viewer", "--cache", "use"},
     2,
     "--role makes a dashboard key",
     NULL},
    {{"keys", "list", "extra"}, 2, "list takes no arguments", NULL},
    {{"keys", "revoke"}, 2, "revoke: name at least one key id", NULL},
    {{"keys", "revoke", "xyz"}, 2, "'xyz' is not a key id", NULL},
    {{"keys", "revoke", "0123456789abcdef"}, 2, "no key with id 0123456789abcdef", NULL},
    {{"keys", "list"}, 0, NULL, "PRIORITY"},
    {{"keys", "list", "--redis", UNREACHABLE}, 1, "Connection refused", NULL},
    {{"keys", "list", "--redis", MALFORMED}, 2, "--redis: redis url", NULL},
    {{"keys", "list", "--account", "a b"}, 2, "--account: account name", NULL},

    /* account (the pause after the API refused the key) */
    {{"account", "--help"}, 0, NULL, "usage: llmq account"},
    {{"account", "status", "--no-such-option"}, 2, "unrecognized option '--no-such-option'", NULL},
    {{"account", "status", "--no-such-option"}, 2, "(see llmq account --help)", NULL},
    {{"account"}, 2, "expected status or resume", NULL},
    {{"account", "frob"}, 2, "unknown subcommand 'frob'", NULL},
    {{"account", "status", "extra"}, 2, "unexpected argument 'extra'", NULL},
    {{"account", "status", "--redis"}, 2, "requires an argument", NULL},
    {{"account", "resume", "--json"}, 2, "--json belongs to 'account status'", NULL},
    {{"account", "status"}, 0, NULL, "active (not paused)"},
    {{"account", "status", "--redis", UNREACHABLE}, 1, "Connection refused", NULL},
    {{"account", "status", "--redis", MALFORMED}, 2, "--redis: redis url", NULL},
    {{"account", "resume", "--account", "a b"}, 2, "--account: account name", NULL},

    /* values the table's kinds check (main exited 2 on the first two and
     * said nothing) */
    {{"budgets", "rm", "--unit", "bogus"}, 2, "--unit: expected tokens or usd, got 'bogus'", NULL},
    {{"top", "--interval-ms", "1000x"},
     2,
     "llmq top: --interval-ms: expected an integer in 100..3600000, got '1000x'",
     NULL},
    {{"spend", "--by", "week"}, 2, "--by: expected model, tenant, user or day, got 'week'", NULL},
    {{"spend", "--user", "a b"}, 2, "--user: 'a b' is not a valid name", NULL},
    {{"estimate", "@FILE", "--completion-window", "1h"}, 2, "--completion-window: ", NULL},
    {{"offload", "get", "m", "--tenant", "a b"}, 2, "--tenant: 'a b' is not a valid tenant", NULL},
    {{"endpoints", "add", "e1", "--weight", "0"}, 2, "--weight: expected a number", NULL},
    {{"keys", "create", "--role", "admin", "--priority", "high"},
     2,
     "--role makes a dashboard key",
     NULL},
    {{"settings", "--help"}, 0, NULL, "result_max"},
};

static char batch_file[64];
static char bign_file[64]; /* line 2 asks for n = 2^61 choices */

static void write_batch_file(void)
{
    snprintf(batch_file, sizeof(batch_file), "/tmp/llmq-exit-%d.jsonl", (int)getpid());
    FILE *f = fopen(batch_file, "w");
    assert_non_null(f);
    fputs("{\"custom_id\":\"e1\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":"
          "\"text-embedding-3-small\",\"input\":\"x\"}}\n",
          f);
    fclose(f);
    snprintf(bign_file, sizeof(bign_file), "/tmp/llmq-exit-n-%d.jsonl", (int)getpid());
    f = fopen(bign_file, "w");
    assert_non_null(f);
    fputs("{\"custom_id\":\"n1\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":"
          "\"gpt-4o-mini\",\"messages\":[],\"max_tokens\":8}}\n"
          "{\"custom_id\":\"n2\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":"
          "\"gpt-4o-mini\",\"messages\":[],\"max_tokens\":8,\"n\":2305843009213693952}}\n",
          f);
    fclose(f);
}

/* Runs one case; prints what went wrong and returns 0 when it failed. */
static int run_case(const char *account, const struct exit_case *t)
{
    const char *argv[MAX_ARGS + 2] = {"llmq"};
    char shown[512] = "llmq";
    for (int i = 0; i < MAX_ARGS && t->argv[i] != NULL; i++) {
        argv[i + 1] = strcmp(t->argv[i], "@FILE") == 0   ? batch_file
                      : strcmp(t->argv[i], "@BIGN") == 0 ? bign_file
                                                         : t->argv[i];
        size_t len = strlen(shown);
        snprintf(shown + len, sizeof(shown) - len, " %s", argv[i + 1]);
    }
    struct cli_run r = cli_run(account, argv);
    int ok = r.status == t->code && (t->err == NULL || strstr(r.err, t->err) != NULL) &&
             (t->out == NULL || strstr(r.out, t->out) != NULL);
    /* a failure always says something; help and data never go to stderr */
    if (t->code != 0 && r.err[0] == '\0')
        ok = 0;
    if (t->code == 0 && t->out != NULL && strstr(t->out, "usage") && r.err[0] != '\0')
        ok = 0;
    if (!ok)
        printf("# FAIL %s: exit %d (want %d)\n#   stderr: %s\n#   stdout: %.200s\n#   wanted "
               "stderr '%s' stdout '%s'\n",
               shown, r.status, t->code, r.err, r.out, t->err ? t->err : "", t->out ? t->out : "");
    cli_free(&r);
    return ok;
}

static void test_exit_code_table(void **state)
{
    (void)state;
    char account[96], prefix[128];
    llmq_test_unique_name(account, sizeof(account), "exitc");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    write_batch_file();
    /* one queued job (q1) and one model limit, for the unknown-id cases */
    char path[96];
    snprintf(path, sizeof(path), "/tmp/llmq-exit-q-%d.jsonl", (int)getpid());
    FILE *f = fopen(path, "w");
    fputs("{\"custom_id\":\"q1\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":\"gpt-4o\","
          "\"input\":\"x\"}}\n",
          f);
    fclose(f);
    const char *enq[] = {"llmq", "enqueue", "--quiet", path, NULL};
    struct cli_run r = cli_run(account, enq);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    const char *lim[] = {"llmq", "limits", "set", "gpt-4o", "--rpm", "100", NULL};
    r = cli_run(account, lim);
    assert_int_equal(r.status, 0);
    cli_free(&r);

    size_t failed = 0, n = sizeof(cases) / sizeof(cases[0]);
    for (size_t i = 0; i < n; i++)
        failed += !run_case(account, &cases[i]);
    printf("# %zu of %zu cases kept the contract\n", n - failed, n);
    assert_int_equal(failed, 0);

    /* rejected commands changed nothing: the limit and the job are as set */
    redisContext *c = llmq_test_redis_connect();
    redisReply *h = redisCommand(c, "HGET %slimit:gpt-4o requests", prefix);
    assert_int_equal(h->type, REDIS_REPLY_STRING);
    assert_string_equal(h->str, "100");
    freeReplyObject(h);
    char *q1 = llmq_test_job_field(c, prefix, "q1", "state");
    assert_non_null(q1);
    assert_string_equal(q1, "queued");
    free(q1);
    h = redisCommand(c, "HGET %ssettings result_max", prefix);
    assert_int_equal(h->type, REDIS_REPLY_NIL);
    freeReplyObject(h);
    assert_int_equal(llmq_test_job_exists(c, prefix, "n1"), 0);
    redisFree(c);
    unlink(path);
    unlink(batch_file);
    unlink(bign_file);
}

/* --rpm 0 / --tpm 0 mean no limit on that dimension (as openai-sim): the
 * field is removed, and jobs are not dead-lettered as never fitting a 0. */
static void test_zero_means_no_limit(void **state)
{
    (void)state;
    char account[96], prefix[128];
    llmq_test_unique_name(account, sizeof(account), "exitz");
    llmq_account_prefix(account, prefix, sizeof(prefix), NULL);
    const char *both[] = {"llmq", "limits", "set", "gpt-4o", "--rpm", "50", "--tpm", "9000", NULL};
    struct cli_run r = cli_run(account, both);
    assert_int_equal(r.status, 0);
    cli_free(&r);
    const char *zero[] = {"llmq", "limits", "set", "gpt-4o", "--tpm", "0", NULL};
    r = cli_run(account, zero);
    assert_int_equal(r.status, 0);
    /* a set says what is now in force, read back (tokens gone, requests kept) */
    if (!strstr(r.out, "now in force:") || !strstr(r.out, "BUCKET") ||
        !strstr(r.out, "\ngpt-4o                                           50            -      "
                       "60000 window  no    admission\n"))
        fail_msg("limits set printed:\n%s", r.out);
    cli_free(&r);
    const char *weight[] = {"llmq",  "limits", "set",      "gpt-4o", "--tenant", "acme",
                            "--rpm", "5",      "--weight", "3",      NULL};
    r = cli_run(account, weight);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\ngpt-4o/t/acme "));
    assert_non_null(strstr(r.out, "\nweight gpt-4o/t/acme 3\n"));
    cli_free(&r);
    const char *policy[] = {"llmq", "limits", "policy", "--headroom-low", "70", NULL};
    r = cli_run(account, policy);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "policy: headroom high 100% normal 100% low 70%"));
    cli_free(&r);
    redisContext *c = llmq_test_redis_connect();
    redisReply *h = redisCommand(c, "HMGET %slimit:gpt-4o requests tokens", prefix);
    assert_string_equal(h->element[0]->str, "50");
    assert_int_equal(h->element[1]->type, REDIS_REPLY_NIL);
    freeReplyObject(h);
    /* a 0 stored by hand (or an older CLI) is no limit either: a request is
     * granted, not "never fits" a limit of 0 tokens */
    freeReplyObject(redisCommand(c, "HSET %slimit:gpt-4o tokens 0", prefix));
    struct llmq_limiter_config cfg = {.redis_url = llmq_test_redis_url()};
    struct llmq_limiter *lim = llmq_limiter_new(&cfg, NULL);
    assert_non_null(lim);
    struct llmq_path path;
    assert_int_equal(llmq_path_init(&path, account, "gpt-4o", NULL, NULL, NULL), LLMQ_OK);
    struct llmq_grant g;
    assert_int_equal(llmq_limiter_acquire(lim, &path, 500, LLMQ_PRIORITY_NORMAL, &g, NULL),
                     LLMQ_OK);
    assert_int_equal(g.decision, LLMQ_GRANTED);
    llmq_limiter_free(lim);
    redisFree(c);
}

/* Every option `llmq limits --help` offers is on its reference page,
 * docs/man/llmq-limits.md (the README's table lacked --weight, --settle and
 * --window-guard-ms once); tests/docs/check_docs.sh checks every page both
 * ways. */
static void test_page_lists_limits_options(void **state)
{
    (void)state;
    const char *help[] = {"llmq", "limits", "--help", NULL};
    struct cli_run r = cli_run("default", help);
    assert_int_equal(r.status, 0);
    char path[1024];
    llmq_test_source_path(path, sizeof(path), "docs/man/llmq-limits.md");
    char *page = llmq_test_read_file(path, NULL);
    assert_non_null(page);
    size_t checked = 0;
    /* the usage lines: every [--option ...] up to the first blank line */
    char *usage_end = strstr(r.out, "\n\n");
    assert_non_null(usage_end);
    for (char *p = strstr(r.out, "[--"); p != NULL && p < usage_end; p = strstr(p + 1, "[--")) {
        char opt[64], want[72];
        size_t k = 0;
        for (p++; k + 1 < sizeof(opt) && (p[k] == '-' || (p[k] >= 'a' && p[k] <= 'z')); k++)
            opt[k] = p[k];
        opt[k] = '\0';
        snprintf(want, sizeof(want), "\n- `%s", opt); /* an entry of its Options */
        if (strstr(page, want) == NULL)
            fail_msg("docs/man/llmq-limits.md does not list %s", opt);
        checked++;
    }
    assert_true(checked >= 10);
    free(page);
    cli_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_code_table),
        cmocka_unit_test(test_zero_means_no_limit),
        cmocka_unit_test(test_page_lists_limits_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
