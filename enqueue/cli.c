/* Options and helpers shared by the llmq subcommands. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "llmq/error.h"
#include "redis/redis.h"

int llmq_cli_common_option(struct llmq_cli *cli, int opt, const char *arg)
{
    switch (opt) {
    case LLMQ_CLI_OPT_REDIS:
        cli->redis_url = arg;
        return 1;
    case LLMQ_CLI_OPT_ACCOUNT:
        cli->account = arg;
        return 1;
    default:
        return 0;
    }
}

void llmq_cli_error(const struct llmq_cli *cli, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", cli->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int llmq_cli_prefix(const struct llmq_cli *cli, char *prefix, size_t n)
{
    struct llmq_error err = {0};
    if (llmq_account_prefix(cli->account, prefix, n, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "--account: %s", err.msg);
        return -1;
    }
    return 0;
}

redisContext *llmq_cli_connect(const struct llmq_cli *cli)
{
    struct llmq_error err = {0};
    redisContext *c = llmq_redis_connect(cli->redis_url, 5000, &err);
    if (c == NULL)
        llmq_cli_error(cli, "%s", err.msg);
    return c;
}

int llmq_cli_parse_int64(const struct llmq_cli *cli, const char *name, const char *arg,
                         long long min, long long max, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || v < min || v > max) {
        llmq_cli_error(cli, "--%s: expected an integer in %lld..%lld, got '%s'", name, min, max,
                       arg);
        return -1;
    }
    *out = v;
    return 0;
}
