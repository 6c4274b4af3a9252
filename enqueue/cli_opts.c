/* The llmq CLI's table-driven option parser and the --help printed from the
 * same table (cli_opts.h). getopt_long does the scanning (long options, their
 * unambiguous abbreviations, "--name=value", "--"), and prints the messages
 * of an unknown option or a missing argument, which name the command (argv[0]
 * is "llmq X") and the option; the values are checked here, by kind. */
#include "cli_opts.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobs/job.h"
#include "llmq/error.h"
#include "redis/keys.h"
#include "redis/redis_url.h"

/* getopt's codes: 1 a positional argument, 'h' --help, '?' an error; a row
 * of a table is OPT_ROW + its index, the common options LLMQ_CLI_OPT_*. */
enum { OPT_ROW = 256 };

static const struct llmq_cli_opt common_opts[] = {
    {.name = "redis",
     .arg = "URL",
     .help = "Redis to use (env LLMQ_REDIS_URL, default " LLMQ_REDIS_URL_DEFAULT ")"},
    {.name = "account", .arg = "NAME", .help = "the account (env LLMQ_ACCOUNT, default 'default')"},
    {.name = "help", .help = "print this help and exit 0"},
};

#define N_COMMON (sizeof(common_opts) / sizeof(common_opts[0]))

static size_t count_rows(const struct llmq_cli_opt *opts)
{
    size_t n = 0;
    while (opts != NULL && opts[n].name != NULL)
        n++;
    return n;
}

/* "a|b|c" as "a, b or c" into buf. */
static void words_text(const char *words, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (const char *w = words; *w != '\0' && len + 1 < n;) {
        size_t k = strcspn(w, "|");
        const char *sep = w[k] == '\0' ? "" : strchr(w + k + 1, '|') ? ", " : " or ";
        int m = snprintf(buf + len, n - len, "%.*s%s", (int)k, w, sep);
        if (m < 0)
            break;
        len += (size_t)m < n - len ? (size_t)m : n - len - 1;
        w += k + (w[k] == '|');
    }
}

static int word_ok(const char *words, const char *arg)
{
    size_t len = strlen(arg);
    for (const char *w = words; *w != '\0';) {
        size_t k = strcspn(w, "|");
        if (k == len && strncmp(w, arg, k) == 0)
            return 1;
        w += k + (w[k] == '|');
    }
    return 0;
}

/* Takes row o's argument arg into opts; returns 0 or an exit code after
 * printing what was wrong. */
static int take(const struct llmq_cli *cli, const struct llmq_cli_opt *o, const char *arg,
                void *opts)
{
    char name[64];
    snprintf(name, sizeof(name), "--%s", o->name);
    char *target = (char *)opts + o->at;
    switch (o->kind) {
    case LLMQ_CLI_FLAG:
        *(int *)(void *)target = 1;
        return 0;
    case LLMQ_CLI_STR:
        *(const char **)(void *)target = arg;
        return 0;
    case LLMQ_CLI_NAME:
        if (!llmq_name_valid(arg)) {
            llmq_cli_error(cli, "%s: '%s' is not a valid name", name, arg);
            return LLMQ_EXIT_USAGE;
        }
        *(const char **)(void *)target = arg;
        return 0;
    case LLMQ_CLI_INT:
        return llmq_cli_parse_int64(cli, name, arg, o->min, o->max, (long long *)(void *)target)
                   ? LLMQ_EXIT_USAGE
                   : 0;
    case LLMQ_CLI_WORD:
        if (!word_ok(o->words, arg)) {
            char expected[256];
            words_text(o->words, expected, sizeof(expected));
            llmq_cli_error(cli, "%s: expected %s, got '%s'", name, expected, arg);
            return LLMQ_EXIT_USAGE;
        }
        *(const char **)(void *)target = arg;
        return 0;
    case LLMQ_CLI_CALL:
        return o->take(cli, name, arg, target);
    }
    return LLMQ_EXIT_USAGE;
}

int llmq_cli_take_completion_window(const struct llmq_cli *cli, const char *name, const char *arg,
                                    void *target)
{
    struct llmq_error err = {0};
    if (llmq_job_completion_window_parse(arg, target, &err) == LLMQ_OK)
        return 0;
    llmq_cli_error(cli, "%s: %s", name, err.msg);
    return LLMQ_EXIT_USAGE;
}

int llmq_cli_take_weight(const struct llmq_cli *cli, const char *name, const char *arg,
                         void *target)
{
    char *end = NULL;
    double w = strtod(arg, &end);
    if (end == arg || *end != '\0' || !(w >= 0.001 && w <= 1000000)) {
        llmq_cli_error(cli, "%s: expected a number from 0.001 to 1000000, got '%s'", name, arg);
        return LLMQ_EXIT_USAGE;
    }
    *(const char **)target = arg;
    return 0;
}

static int negative_number(const char *s)
{
    return s[0] == '-' && s[1] >= '0' && s[1] <= '9';
}

static int add_positional(const struct llmq_cli *cli, const char *word, char **pos, int max,
                          int *n_pos)
{
    if (*n_pos == max) {
        llmq_cli_error(cli, "unexpected argument '%s' (see %s --help)", word, cli->prog);
        return LLMQ_EXIT_USAGE;
    }
    pos[(*n_pos)++] = (char *)word;
    return 0;
}

/* Scans argv with getopt_long over longopts; see llmq_cli_parse. */
static int scan(struct llmq_cli *cli, const struct llmq_cli_spec *spec, int argc, char **argv,
                const struct option *longopts, void *opts, char **pos, int max, int *n_pos)
{
    optind = 1;
    /* "-": non-options come back in order as opt 1, never permuted */
    while (optind < argc) {
        const char *word = argv[optind];
        int opt = 1;
        if (negative_number(word))
            optind++;
        else if ((opt = getopt_long(argc, argv, "-h", longopts, NULL)) == -1)
            break;
        else if (opt == 1)
            word = optarg;
        int code = 0;
        if (opt == 1) {
            code = add_positional(cli, word, pos, max, n_pos);
        } else if (opt == 'h') {
            llmq_cli_help(spec, stdout);
            return LLMQ_EXIT_OK;
        } else if (opt == '?') {
            fprintf(stderr, "(see %s --help)\n", cli->prog);
            return LLMQ_EXIT_USAGE;
        } else if (!llmq_cli_common_option(cli, opt, optarg)) {
            code = take(cli, &spec->opts[opt - OPT_ROW], optarg, opts);
        }
        if (code != 0)
            return code;
    }
    while (optind < argc) { /* after "--": all positional */
        int code = add_positional(cli, argv[optind++], pos, max, n_pos);
        if (code != 0)
            return code;
    }
    return -1;
}

int llmq_cli_parse(struct llmq_cli *cli, const struct llmq_cli_spec *spec, int argc, char **argv,
                   void *opts, char **pos, int max, int *n_pos)
{
    *n_pos = 0;
    size_t n = count_rows(spec->opts);
    struct option *longopts = calloc(n + N_COMMON + 1, sizeof(*longopts));
    if (longopts == NULL) {
        llmq_cli_error(cli, "out of memory");
        return LLMQ_EXIT_FAIL;
    }
    for (size_t i = 0; i < n; i++) {
        const struct llmq_cli_opt *o = &spec->opts[i];
        longopts[i] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL,
                                      OPT_ROW + (int)i};
    }
    longopts[n] = (struct option){"redis", required_argument, NULL, LLMQ_CLI_OPT_REDIS};
    longopts[n + 1] = (struct option){"account", required_argument, NULL, LLMQ_CLI_OPT_ACCOUNT};
    longopts[n + 2] = (struct option){"help", no_argument, NULL, 'h'};
    int code = scan(cli, spec, argc, argv, longopts, opts, pos, max, n_pos);
    free(longopts);
    return code;
}

/* One option's help: "  --name ARG" padded to a column, then its help, its
 * further lines indented to that column. */
static void print_option(FILE *out, const struct llmq_cli_opt *o)
{
    enum { COLUMN = 24 };
    char head[96];
    snprintf(head, sizeof(head), "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    fputs(head, out);
    size_t at = strlen(head);
    if (at + 1 > COLUMN) { /* too long: its help starts on the next line */
        fputc('\n', out);
        at = 0;
    }
    fprintf(out, "%*s", (int)(COLUMN - at), "");
    for (const char *h = o->help; *h != '\0';) {
        size_t k = strcspn(h, "\n");
        fprintf(out, "%.*s\n", (int)k, h);
        h += k + (h[k] == '\n');
        if (*h != '\0')
            fprintf(out, "%*s", COLUMN, "");
    }
}

void llmq_cli_help(const struct llmq_cli_spec *spec, FILE *out)
{
    fputs(spec->usage, out);
    if (spec->about != NULL) {
        fputc('\n', out);
        fputs(spec->about, out);
    }
    if (spec->more != NULL)
        spec->more(out);
    fputs("\nOptions:\n", out);
    for (size_t i = 0; spec->opts != NULL && spec->opts[i].name != NULL; i++)
        print_option(out, &spec->opts[i]);
    for (size_t i = 0; i < N_COMMON; i++)
        print_option(out, &common_opts[i]);
    fputc('\n', out);
    fputs(spec->exit, out);
}
