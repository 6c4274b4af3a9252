/* Options and helpers shared by the llmq subcommands. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/backoff.h"
#include "base/clock.h"
#include "base/parse_int.h"
#include "base/rng.h"
#include "jobs/job_id.h"
#include "llmq/llmq.h"
#include "llmq/error.h"
#include "redis/redis.h"
#include "redis/redis_url.h"
#include "redis/reply_read.h"

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

int llmq_limit_value_set(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_STRING && llmq_reply_int_or(r, 0) > 0;
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

int llmq_cli_reply_failed(const struct llmq_cli *cli, const char *what, redisReply *r,
                          const struct llmq_error *err)
{
    const char *msg = r != NULL && r->type == REDIS_REPLY_ERROR ? r->str
                      : r == NULL && err != NULL && err->msg[0] ? err->msg
                      : r == NULL                               ? "no reply from Redis"
                                                                : "unexpected reply";
    if (what != NULL)
        llmq_cli_error(cli, "%s: %s", what, msg);
    else
        llmq_cli_error(cli, "%s", msg);
    if (r != NULL)
        freeReplyObject(r);
    return LLMQ_EXIT_FAIL;
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

int llmq_cli_key(const struct llmq_cli *cli, char *buf, size_t len, const char *prefix,
                 enum llmq_key_kind kind, const char *name)
{
    struct llmq_error err = {0};
    if (llmq_key(buf, len, prefix, kind, name, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return -1;
    }
    return 0;
}

redisContext *llmq_cli_connect(const struct llmq_cli *cli, int *code)
{
    struct llmq_error err = {0};
    struct llmq_redis_url url;
    if (llmq_redis_url_parse(cli->redis_url, &url, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "--redis: %s", err.msg);
        *code = LLMQ_EXIT_USAGE;
        return NULL;
    }
    llmq_redis_url_route(&url, cli->account); /* a cluster: the account's node */
    redisContext *c = llmq_redis_connect_parsed(&url, 5000, &err);
    if (c == NULL) {
        llmq_cli_error(cli, "%s", err.msg);
        *code = LLMQ_EXIT_FAIL;
    }
    return c;
}

redisContext *llmq_cli_reconnect(const struct llmq_cli *cli, long long until_ms, char *where,
                                 size_t where_len, struct llmq_error *err)
{
    struct llmq_redis_url url;
    if (llmq_redis_url_parse(cli->redis_url, &url, err) != LLMQ_OK)
        return NULL;
    llmq_redis_url_route(&url, cli->account);
    snprintf(where, where_len, "%s:%d", url.host, url.port);
    /* the workers' reconnect backoff (redis_async.c): from 100 ms, doubling
     * to 2 s, jittered */
    int64_t step = 100;
    uint64_t rng;
    llmq_rng_seed(&rng, (uint64_t)llmq_monotonic_ms() ^ (uint64_t)getpid());
    redisContext *c = NULL;
    for (;;) {
        c = llmq_redis_connect_parsed(&url, 2000, err);
        long long now = llmq_monotonic_ms();
        if (c != NULL || now >= until_ms)
            break;
        int64_t delay = llmq_backoff_reconnect_ms(&step, 2000, &rng);
        if (delay > until_ms - now)
            delay = until_ms - now;
        struct timespec ts = {(time_t)(delay / 1000), (long)(delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    memset(&url, 0, sizeof(url)); /* the password */
    return c;
}

redisContext *llmq_cli_open(const struct llmq_cli *cli, char *prefix, size_t n, int *code)
{
    if (prefix != NULL && llmq_cli_prefix(cli, prefix, n) != 0) {
        *code = LLMQ_EXIT_USAGE;
        return NULL;
    }
    return llmq_cli_connect(cli, code);
}

int llmq_cli_on_account(const struct llmq_cli *cli, llmq_cli_account_fn *fn, void *ud)
{
    char prefix[LLMQ_KEY_PREFIX_MAX];
    int code = LLMQ_EXIT_OK;
    redisContext *c = llmq_cli_open(cli, prefix, sizeof(prefix), &code);
    if (c == NULL)
        return code;
    code = fn(cli, c, prefix, ud);
    redisFree(c);
    return code;
}

int llmq_cli_job_ids(const struct llmq_cli *cli, char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char id[LLMQ_JOB_ID_MAX + 1];
        struct llmq_error err = {0};
        if (llmq_job_id_from_custom(ids[i], strlen(ids[i]), id, sizeof(id), &err) != LLMQ_OK) {
            llmq_cli_error(cli, "'%s' is not a job id: %s", ids[i], err.msg);
            llmq_cli_job_ids_free(ids, i);
            return -1;
        }
        if ((ids[i] = strdup(id)) == NULL) {
            llmq_cli_error(cli, "out of memory");
            llmq_cli_job_ids_free(ids, i);
            return -1;
        }
    }
    return 0;
}

void llmq_cli_job_ids_free(char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(ids[i]);
        ids[i] = NULL;
    }
}

int llmq_cli_parse_int64(const struct llmq_cli *cli, const char *name, const char *arg,
                         long long min, long long max, long long *out)
{
    int64_t v = 0;
    if (llmq_parse_int64(arg, min, max, &v) != 0) {
        llmq_cli_error(cli, "%s: expected an integer in %lld..%lld, got '%s'", name, min, max, arg);
        return -1;
    }
    *out = v;
    return 0;
}
