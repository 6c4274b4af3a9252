/* The llmq CLI: shared context, options and exit codes of every subcommand.
 *
 * Conventions: data on stdout, messages on stderr, `--help` on every command.
 * Exit codes (documented in the README):
 *   0 success; 1 runtime failure (Redis unreachable, a script error);
 *   2 usage error or invalid input; 3 jobs ended in the dead-letter stream. */
#ifndef LLMQ_CLI_H
#define LLMQ_CLI_H

#include <getopt.h>
#include <hiredis/hiredis.h>

#define LLMQ_EXIT_OK 0
#define LLMQ_EXIT_FAIL 1
#define LLMQ_EXIT_USAGE 2
#define LLMQ_EXIT_DEAD 3

struct llmq_cli {
    const char *redis_url; /* --redis, $LLMQ_REDIS_URL, or the default */
    const char *account;   /* --account, $LLMQ_ACCOUNT, or "default" */
    const char *prog;      /* "llmq limits" etc., for messages */
};

/* Options every subcommand accepts; append to a command's own long options
 * with LLMQ_CLI_COMMON_OPTIONS and let llmq_cli_common_option() take them. */
#define LLMQ_CLI_OPT_REDIS 1000
#define LLMQ_CLI_OPT_ACCOUNT 1001
#define LLMQ_CLI_COMMON_OPTIONS                                                                    \
    {"redis", required_argument, NULL, LLMQ_CLI_OPT_REDIS},                                        \
        {"account", required_argument, NULL, LLMQ_CLI_OPT_ACCOUNT},                                \
        {"help", no_argument, NULL, 'h'}

/* Handles a common option; returns 1 if opt was one, 0 otherwise. */
int llmq_cli_common_option(struct llmq_cli *cli, int opt, const char *arg);

/* Writes the key prefix of the CLI's account into prefix (size n); prints
 * what is wrong with the account name and returns -1 when it is invalid. */
int llmq_cli_prefix(const struct llmq_cli *cli, char *prefix, size_t n);

/* Connects to the CLI's Redis; prints the error and returns NULL on failure. */
redisContext *llmq_cli_connect(const struct llmq_cli *cli);

/* Parses a non-negative integer option value into *out, printing
 * "PROG: --NAME: expected ..." and returning -1 when it is not one. */
int llmq_cli_parse_int64(const struct llmq_cli *cli, const char *name, const char *arg,
                         long long min, long long max, long long *out);

/* Prints "PROG: message" to stderr. */
void llmq_cli_error(const struct llmq_cli *cli, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Subcommands: argv[0] is the subcommand name; return an exit code. */
int llmq_cmd_limits(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_enqueue(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_status(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_results(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_dead(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_settings(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_keys(struct llmq_cli *cli, int argc, char **argv);

#endif
