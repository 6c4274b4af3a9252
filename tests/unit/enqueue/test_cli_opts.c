/* The CLI's one option parser (enqueue/cli_opts.h): a table of options is
 * parsed by kind into its targets, errors name the command and the option
 * and exit 2, and --help is printed from the same table (every row, with its
 * argument exactly when the parser wants one). In-process: argv arrays in,
 * stderr and stdout captured through files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli.h"
#include "cli_opts.h"

struct t_opts {
    int json;
    const char *tenant, *model, *mode, *window_text;
    long long limit;
    const char *seen_call;
};

static int take_call(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    struct t_opts *o = target;
    if (strcmp(arg, "bad") == 0) {
        llmq_cli_error(cli, "%s: refused '%s'", name, arg);
        return LLMQ_EXIT_USAGE;
    }
    o->seen_call = arg;
    return 0;
}

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_FLAG("json", struct t_opts, json, "as JSON"),
    LLMQ_CLI_OPT_NAME("tenant", "T", struct t_opts, tenant, "only tenant T"),
    LLMQ_CLI_OPT_STR("model", "M", struct t_opts, model, "only model M"),
    LLMQ_CLI_OPT_INT("limit", "N", struct t_opts, limit, -5, 50, "at most N\nsecond line"),
    LLMQ_CLI_OPT_WORD("mode", "off|all|auto", struct t_opts, mode, "the policy"),
    LLMQ_CLI_OPT_CALL_ALL("call", "X", take_call, "a handler of its own"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq t VERB [options]\n",
    .about = "What t does.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 2 usage error.\n",
};

struct outcome {
    int code;
    int n_pos;
    char *pos[4];
    char out[4096], err[1024];
    struct llmq_cli cli;
    struct t_opts o;
};

static void slurp(FILE *f, char *buf, size_t n)
{
    fflush(f);
    rewind(f);
    size_t len = fread(buf, 1, n - 1, f);
    buf[len] = '\0';
    fclose(f);
}

/* Runs the parser over args (NULL-ended, after the command) with stdout and
 * stderr sent to files; fills r. */
static void run(struct outcome *r, const char *const *args)
{
    char *argv[32] = {"llmq t"};
    int argc = 1;
    for (; args[argc - 1] != NULL; argc++)
        argv[argc] = (char *)args[argc - 1];
    memset(r, 0, sizeof(*r));
    r->cli = (struct llmq_cli){
        .redis_url = "redis://127.0.0.1:6379/0", .account = "default", .prog = "llmq t"};
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    r->code =
        llmq_cli_parse(&r->cli, &spec, argc, argv, &r->o, r->pos, 3, &r->n_pos); /* at most 3 */
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    slurp(out, r->out, sizeof(r->out));
    slurp(err, r->err, sizeof(r->err));
}

#define RUN(r, ...)                                                                                \
    do {                                                                                           \
        const char *const a_[] = {__VA_ARGS__, NULL};                                              \
        run(r, a_);                                                                                \
    } while (0)

static void test_kinds_fill_their_targets(void **state)
{
    (void)state;
    struct outcome r;
    RUN(&r, "get", "--json", "--tenant", "acme", "--model=gpt-4o", "--limit", "-5", "x", "--mode",
        "auto", "--call", "ok", "--redis", "redis://h:1/0", "--account", "a1");
    assert_int_equal(r.code, -1);
    assert_string_equal(r.err, "");
    assert_int_equal(r.o.json, 1);
    assert_string_equal(r.o.tenant, "acme");
    assert_string_equal(r.o.model, "gpt-4o");
    assert_int_equal(r.o.limit, -5); /* "-5" is the value, not an option */
    assert_string_equal(r.o.mode, "auto");
    assert_string_equal(r.o.seen_call, "ok");
    assert_string_equal(r.cli.redis_url, "redis://h:1/0");
    assert_string_equal(r.cli.account, "a1");
    assert_int_equal(r.n_pos, 2);
    assert_string_equal(r.pos[0], "get");
    assert_string_equal(r.pos[1], "x");
    /* a repeated option: the last wins; after "--" every word is positional */
    RUN(&r, "--limit", "3", "--limit", "7", "--", "--json", "-x");
    assert_int_equal(r.code, -1);
    assert_int_equal(r.o.limit, 7);
    assert_int_equal(r.o.json, 0);
    assert_int_equal(r.n_pos, 2);
    assert_string_equal(r.pos[0], "--json");
    assert_string_equal(r.pos[1], "-x");
}

/* Each bad input: exit 2 and a message naming the command and the option. */
static void test_errors_name_command_and_option(void **state)
{
    (void)state;
    static const struct {
        const char *args[4];
        const char *err;
    } cases[] = {
        {{"--nope"}, "llmq t: unrecognized option '--nope'"},
        {{"--nope"}, "(see llmq t --help)"},
        {{"--limit"}, "llmq t: option '--limit' requires an argument"},
        {{"--json=1"}, "llmq t: option '--json' doesn't allow an argument"},
        {{"--limit", "51"}, "llmq t: --limit: expected an integer in -5..50, got '51'"},
        {{"--limit", "-6"}, "llmq t: --limit: expected an integer in -5..50, got '-6'"},
        {{"--limit", "4x"}, "llmq t: --limit: expected an integer in -5..50, got '4x'"},
        {{"--tenant", "a b"}, "llmq t: --tenant: 'a b' is not a valid name"},
        {{"--mode", "some"}, "llmq t: --mode: expected off, all or auto, got 'some'"},
        {{"--mode", "al"}, "llmq t: --mode: expected off, all or auto, got 'al'"},
        {{"--call", "bad"}, "llmq t: --call: refused 'bad'"},
        {{"a", "b", "c", "d"}, "llmq t: unexpected argument 'd' (see llmq t --help)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct outcome r;
        const char *args[5] = {NULL};
        memcpy(args, cases[i].args, sizeof(cases[i].args));
        run(&r, args);
        if (r.code != LLMQ_EXIT_USAGE || strstr(r.err, cases[i].err) == NULL)
            fail_msg("case %zu: exit %d, stderr '%s'; wanted 2 and '%s'", i, r.code, r.err,
                     cases[i].err);
        assert_string_equal(r.out, ""); /* messages never go to stdout */
    }
}

/* --help: exit 0, stdout only; usage, about, then one line per row of the
 * table and the common options, each with its argument exactly when the
 * row takes one, continuation lines indented, then the exit codes. */
static void test_help_is_the_table(void **state)
{
    (void)state;
    struct outcome r;
    RUN(&r, "--json", "--help", "--nope");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    const char *want = "usage: llmq t VERB [options]\n"
                       "\n"
                       "What t does.\n"
                       "\n"
                       "Options:\n"
                       "  --json                as JSON\n"
                       "  --tenant T            only tenant T\n"
                       "  --model M             only model M\n"
                       "  --limit N             at most N\n"
                       "                        second line\n"
                       "  --mode off|all|auto   the policy\n"
                       "  --call X              a handler of its own\n"
                       "  --redis URL           Redis to use (env LLMQ_REDIS_URL, default ";
    if (strncmp(r.out, want, strlen(want)) != 0)
        fail_msg("help printed:\n%s\nwanted it to start:\n%s", r.out, want);
    assert_non_null(strstr(r.out, "\n  --account NAME        the account (env LLMQ_ACCOUNT"));
    assert_non_null(strstr(r.out, "\n  --help                print this help and exit 0\n\n"
                                  "Exit: 0 ok; 2 usage error.\n"));
    RUN(&r, "-h");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Options:\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_fill_their_targets),
        cmocka_unit_test(test_errors_name_command_and_option),
        cmocka_unit_test(test_help_is_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
