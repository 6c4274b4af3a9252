/* llmq: the command-line front end. The folder enqueue/ holds the whole
 * `llmq` CLI (it is named for its first command): this file dispatches to one
 * subcommand per file (cmd_<name>.c), cli.c has what they share. Global
 * defaults come from the environment (LLMQ_REDIS_URL, LLMQ_ACCOUNT); each
 * command's options are on its page docs/man/llmq-<name>.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "redis/redis_url.h"

struct command {
    const char *name;
    int (*run)(struct llmq_cli *cli, int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"enqueue", llmq_cmd_enqueue, "push Batch-format JSONL jobs; optionally wait for results"},
    {"status", llmq_cmd_status, "queues, in flight, dead letters, bucket use and consumers"},
    {"results", llmq_cmd_results, "print results (Batch output lines) by job id"},
    {"dead", llmq_cmd_dead, "list, retry or purge dead-lettered jobs"},
    {"settings", llmq_cmd_settings, "show or change retention and enqueue settings"},
    {"limits", llmq_cmd_limits, "show or change rate limits and limiter policy"},
    {"keys", llmq_cmd_keys, "create, list or revoke llmq-gateway API keys"},
    {"account", llmq_cmd_account, "show or lift the pause after the API refused the key"},
    {"endpoints", llmq_cmd_endpoints, "the endpoints (keys, orgs, Azure deployments) of a model"},
    {"budgets", llmq_cmd_budgets, "set, list or remove spend budgets (tokens or USD)"},
    {"prices", llmq_cmd_prices, "show or override model prices (USD per 1M tokens)"},
    {"spend", llmq_cmd_spend, "what jobs spent, by model, tenant, user or day"},
    {"estimate", llmq_cmd_estimate, "tokens, cost range and time a file would take"},
    {"top", llmq_cmd_top, "live view: rates, bucket use, queues, spend, ETA"},
    {"cache", llmq_cmd_cache, "the response cache: entries, counters, purge"},
    {"offload", llmq_cmd_offload, "policy per model and provider batches of jobs that wait"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: llmq [--version] [--help] COMMAND [ARGS]\n\n"
                 "Shared RPM/TPM limits and a job queue for OpenAI API calls, over Redis.\n\n"
                 "Commands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\nEvery command takes --redis URL (env LLMQ_REDIS_URL, default %s)\n"
            "and --account NAME (env LLMQ_ACCOUNT, default 'default').\n"
            "Run 'llmq COMMAND --help' for a command's options.\n"
            "Exit codes: 0 ok, 1 runtime failure, 2 usage or invalid input,\n"
            "3 jobs were dead-lettered.\n",
            LLMQ_REDIS_URL_DEFAULT);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return LLMQ_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return LLMQ_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("llmq %s\n", LLMQ_VERSION);
        return LLMQ_EXIT_OK;
    }
    struct llmq_cli cli = {
        .redis_url = getenv("LLMQ_REDIS_URL"),
        .account = getenv("LLMQ_ACCOUNT"),
    };
    if (cli.redis_url == NULL || cli.redis_url[0] == '\0')
        cli.redis_url = LLMQ_REDIS_URL_DEFAULT;
    if (cli.account == NULL || cli.account[0] == '\0')
        cli.account = "default";
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            char prog[64];
            snprintf(prog, sizeof(prog), "llmq %s", commands[i].name);
            cli.prog = prog;
            argv[1] = prog; /* getopt's messages name the command */
            return commands[i].run(&cli, argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "llmq: unknown command '%s' (see llmq --help)\n", argv[1]);
    return LLMQ_EXIT_USAGE;
}
