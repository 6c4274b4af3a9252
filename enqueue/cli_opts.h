/* The llmq CLI's one option parser: each command describes its options in a
 * table (name, argument kind, help text, target), and llmq_cli_parse both
 * parses argv by that table and prints `--help` from it, so help and parsing
 * cannot drift. Every command also takes --redis URL, --account NAME and
 * --help, which the parser adds; -h is --help.
 *
 * A target is a field of the command's own options struct (the `opts`
 * llmq_cli_parse is given), named by offsetof; the row macros check at
 * compile time that the field has the type its kind writes:
 *   FLAG  int          set to 1
 *   STR   const char * the argument (borrowed from argv)
 *   NAME  const char * the argument, refused unless a valid name
 *                      (llmq_name_valid: tenant, user, model names)
 *   INT   long long    the argument as an integer in MIN..MAX
 *   WORD  const char * the argument, refused unless one of "a|b|c"
 *   CALL  any          take(cli, name, arg, target) checks and stores arg
 *                      (NULL for an option without argument) and returns 0
 *                      or, after printing what was wrong, an exit code; its
 *                      target is a field, or the whole struct for an option
 *                      that sets several (LLMQ_CLI_OPT_CALL_ALL)
 * A repeated option takes its last value. Errors name the command and the
 * option ("llmq limits: --rpm: expected an integer in 0..…, got 'x'") and exit
 * 2 (README "Exit codes").
 *
 * Adding an option to a command: one row in its table (and its field in the
 * command's options struct), then a line "- `--name ARG` — …" on its page
 * docs/man/llmq-<command>.md (the docs_options test checks both agree). */
#ifndef LLMQ_CLI_OPTS_H
#define LLMQ_CLI_OPTS_H

#include <stddef.h>
#include <stdio.h>

struct llmq_cli;

enum llmq_cli_kind {
    LLMQ_CLI_FLAG,
    LLMQ_CLI_STR,
    LLMQ_CLI_NAME,
    LLMQ_CLI_INT,
    LLMQ_CLI_WORD,
    LLMQ_CLI_CALL,
};

/* A CALL option's handler: name is "--name", arg the argument (NULL when the
 * option takes none), target its field (or the command's options struct).
 * Returns 0, or an exit code after printing what was wrong with
 * llmq_cli_error. */
typedef int llmq_cli_take_fn(const struct llmq_cli *cli, const char *name, const char *arg,
                             void *target);

struct llmq_cli_opt {
    const char *name; /* the long option without "--"; NULL ends a table */
    enum llmq_cli_kind kind;
    const char *arg;        /* what help calls the argument ("N", "T"); NULL: none */
    size_t at;              /* offsetof the target in the command's options struct */
    long long min, max;     /* INT: the range */
    const char *words;      /* WORD: the values accepted, "|"-separated */
    llmq_cli_take_fn *take; /* CALL */
    const char *help;       /* one line or several ('\n'), without the option */
};

/* The row macros. TYPE is the command's options struct, FIELD its member
 * (may be nested: d.tenant). The _Generic term is 0 and refuses, at compile
 * time, a field of another type than the kind writes. */
#define LLMQ_CLI_AT_(TYPE, FIELD, CTYPE)                                                           \
    (offsetof(TYPE, FIELD) + _Generic(((TYPE *)0)->FIELD, CTYPE : 0))
#define LLMQ_CLI_OPT_FLAG(NAME, TYPE, FIELD, HELP)                                                 \
    {                                                                                              \
        .name = NAME, .kind = LLMQ_CLI_FLAG, .at = LLMQ_CLI_AT_(TYPE, FIELD, int), .help = HELP    \
    }
#define LLMQ_CLI_OPT_STR(NAME, ARG, TYPE, FIELD, HELP)                                             \
    {                                                                                              \
        .name = NAME, .kind = LLMQ_CLI_STR, .arg = ARG,                                            \
        .at = LLMQ_CLI_AT_(TYPE, FIELD, const char *), .help = HELP                                \
    }
#define LLMQ_CLI_OPT_NAME(NAME, ARG, TYPE, FIELD, HELP)                                            \
    {                                                                                              \
        .name = NAME, .kind = LLMQ_CLI_NAME, .arg = ARG,                                           \
        .at = LLMQ_CLI_AT_(TYPE, FIELD, const char *), .help = HELP                                \
    }
#define LLMQ_CLI_OPT_INT(NAME, ARG, TYPE, FIELD, MIN, MAX, HELP)                                   \
    {                                                                                              \
        .name = NAME, .kind = LLMQ_CLI_INT, .arg = ARG,                                            \
        .at = LLMQ_CLI_AT_(TYPE, FIELD, long long), .min = MIN, .max = MAX, .help = HELP           \
    }
#define LLMQ_CLI_OPT_WORD(NAME, WORDS, TYPE, FIELD, HELP)                                          \
    {                                                                                              \
        .name = NAME, .kind = LLMQ_CLI_WORD, .arg = WORDS,                                         \
        .at = LLMQ_CLI_AT_(TYPE, FIELD, const char *), .words = WORDS, .help = HELP                \
    }
#define LLMQ_CLI_OPT_CALL(NAME, ARG, TYPE, FIELD, TAKE, HELP)                                      \
    {                                                                                              \
        .name = NAME, .kind = LLMQ_CLI_CALL, .arg = ARG, .at = offsetof(TYPE, FIELD),              \
        .take = TAKE, .help = HELP                                                                 \
    }
#define LLMQ_CLI_OPT_CALL_ALL(NAME, ARG, TAKE, HELP)                                               \
    {                                                                                              \
        .name = NAME, .kind = LLMQ_CLI_CALL, .arg = ARG, .at = 0, .take = TAKE, .help = HELP       \
    }
#define LLMQ_CLI_OPT_END                                                                           \
    {                                                                                              \
        .name = NULL                                                                               \
    }

/* A command's help and options. --help prints usage, a blank line, about
 * (if any), more(out) (if any), "Options:" with one line per option of opts
 * and the common ones, and exit. */
struct llmq_cli_spec {
    const char *usage;               /* "usage: llmq X ...\n" and its other forms */
    const char *about;               /* what the command does, "\n"-ended; NULL: none */
    void (*more)(FILE *out);         /* printed after about (a table of fields); NULL: none */
    const struct llmq_cli_opt *opts; /* ended by LLMQ_CLI_OPT_END */
    const char *exit;                /* "Exit: ...\n" */
};

/* Parses argv (argv[0] the command, as in llmq_cmd_*) by spec into opts
 * (borrowed; the targets of spec's rows) and the common options into cli.
 * The positional arguments go to pos[0..*n_pos) in order (at most max; more
 * is a usage error); a word that reads as a negative number ("-5") is one, so
 * a bad value gets its range message and not "invalid option"; after "--"
 * every word is one. Returns -1 when the command goes on; else its exit code:
 * 0 after printing help to stdout (--help), 2 after printing what was wrong
 * (an unknown option, a missing argument, a bad value). */
int llmq_cli_parse(struct llmq_cli *cli, const struct llmq_cli_spec *spec, int argc, char **argv,
                   void *opts, char **pos, int max, int *n_pos);

/* Shared CALL handlers. completion_window: "24h" (jobs/job.h
 * llmq_job_completion_window_parse) into a long long of ms. */
llmq_cli_take_fn llmq_cli_take_completion_window;
/* weight: a fair-share weight, a number in 0.001..1000000, stored as its
 * text (const char *). */
llmq_cli_take_fn llmq_cli_take_weight;

/* Prints spec's help (see struct llmq_cli_spec) to out. */
void llmq_cli_help(const struct llmq_cli_spec *spec, FILE *out);

#endif
