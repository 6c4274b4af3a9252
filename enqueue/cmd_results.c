/* llmq results: Batch output lines of finished jobs, by id, or all that are
 * kept (done ones from the retention index P results, oldest first, then the
 * dead ones from P dead). With --wait, named jobs are waited for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobs/job_store.h"
#include "redis/keys.h"
#include "redis/redis.h"

#define CHUNK 500

static void usage(FILE *out)
{
    fputs("usage: llmq results ID... [--wait [--timeout S]] [--output FILE]\n"
          "       llmq results --all [--output FILE]\n\n"
          "Prints the Batch output line of each job (one JSON object per line):\n"
          "{\"id\", \"custom_id\", \"response\": {\"status_code\", \"request_id\", \"body\"}, "
          "\"error\"}.\n"
          "--all prints every result kept (done jobs oldest first, then dead ones).\n"
          "--wait waits for the named jobs to end (--timeout S: at most S seconds).\n\n"
          "Options: --redis URL, --account NAME, --help\n"
          "Exit: 0 ok; 1 a job has no result (or the wait timed out), Redis failure;\n"
          "2 usage error; 3 some job was dead-lettered.\n",
          out);
}

struct printing {
    FILE *out;
    size_t dead;
};

static void print_result(const char *id, int dead, const char *line, void *ud)
{
    struct printing *p = ud;
    (void)id;
    p->dead += dead != 0;
    fprintf(p->out, "%s\n", line);
}

/* Prints res:<id> for each id of a reply listing ids (flat array of ids or
 * of stream entries whose "id" field names the job). */
static int print_ids(redisContext *c, const char *prefix, const char **ids, size_t n, FILE *out)
{
    for (size_t i = 0; i < n; i++)
        redisAppendCommand(c, "GET %sres:%s", prefix, ids[i]);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK)
            return 0;
        if (r->type == REDIS_REPLY_STRING)
            fprintf(out, "%s\n", r->str);
        else if (r->type == REDIS_REPLY_ERROR)
            ok = 0;
        freeReplyObject(r);
    }
    return ok;
}

/* Prints every done result (index order) then every dead one. */
static int print_all(const struct llmq_cli *cli, redisContext *c, const char *prefix, FILE *out)
{
    for (int dead = 0; dead < 2; dead++) {
        char from[64] = "-";
        for (long long start = 0;; start += CHUNK) {
            redisReply *r =
                dead ? redisCommand(c, "XRANGE %sdead %s + COUNT %d", prefix, from, CHUNK)
                     : redisCommand(c, "ZRANGE %sresults %lld %lld", prefix, start,
                                    start + CHUNK - 1);
            if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
                llmq_cli_error(cli, "reading results: %s",
                               r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
                if (r != NULL)
                    freeReplyObject(r);
                return LLMQ_EXIT_FAIL;
            }
            const char *ids[CHUNK];
            size_t n = 0;
            for (size_t i = 0; i < r->elements && n < CHUNK; i++) {
                const redisReply *e = r->element[i];
                if (!dead && e->type == REDIS_REPLY_STRING)
                    ids[n++] = e->str;
                else if (dead && e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
                         e->element[1]->type == REDIS_REPLY_ARRAY && e->element[1]->elements >= 2 &&
                         e->element[1]->element[1]->type == REDIS_REPLY_STRING) {
                    ids[n++] = e->element[1]->element[1]->str; /* fields start {id, <id>} */
                    snprintf(from, sizeof(from), "(%s", e->element[0]->str);
                }
            }
            size_t got = r->elements;
            int ok = print_ids(c, prefix, ids, n, out);
            freeReplyObject(r);
            if (!ok)
                return LLMQ_EXIT_FAIL;
            if (got < CHUNK)
                break;
        }
    }
    return LLMQ_EXIT_OK;
}

/* Prints the named results; with wait, waits for the missing ones. */
static int print_named(const struct llmq_cli *cli, redisContext *c, const char *prefix, char **ids,
                       size_t n, int wait, long long timeout_s, FILE *out)
{
    struct printing p = {out, 0};
    struct llmq_error err = {0};
    size_t done = 0;
    struct llmq_job_waiter w = {.on_result = print_result, .ud = &p};
    enum llmq_rc rc =
        llmq_job_store_wait(c, prefix, (const char *const *)ids, n,
                            wait ? (timeout_s < 0 ? -1 : timeout_s * 1000) : 0, &w, &done, &err);
    if (rc == LLMQ_ETIMEOUT && !wait)
        llmq_cli_error(cli, "%zu of %zu job(s) have no result", n - done, n);
    else if (rc != LLMQ_OK)
        llmq_cli_error(cli, "%s", err.msg);
    if (rc != LLMQ_OK)
        return LLMQ_EXIT_FAIL;
    return p.dead > 0 ? LLMQ_EXIT_DEAD : LLMQ_EXIT_OK;
}

int llmq_cmd_results(struct llmq_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {{"wait", no_argument, NULL, 'w'},
                                         {"all", no_argument, NULL, 'a'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"output", required_argument, NULL, 'o'},
                                         LLMQ_CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    int opt, wait = 0, all = 0;
    long long timeout_s = -1;
    const char *output = NULL;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return LLMQ_EXIT_OK;
        }
        if (opt == 'w' || opt == 'a')
            *(opt == 'w' ? &wait : &all) = 1;
        else if (opt == 'o')
            output = optarg;
        else if (opt == 't') {
            if (llmq_cli_parse_int64(cli, "timeout", optarg, 0, 1LL << 31, &timeout_s) != 0)
                return LLMQ_EXIT_USAGE;
        } else if (!llmq_cli_common_option(cli, opt, optarg))
            return LLMQ_EXIT_USAGE;
    }
    size_t n = (size_t)(argc - optind);
    if (all == (n > 0) || (all && wait)) {
        usage(stderr);
        return LLMQ_EXIT_USAGE;
    }
    for (size_t i = 0; i < n; i++)
        if (!llmq_name_valid(argv[optind + i])) {
            llmq_cli_error(cli, "'%s' is not a job id", argv[optind + i]);
            return LLMQ_EXIT_USAGE;
        }
    char prefix[LLMQ_KEY_PREFIX_MAX];
    if (llmq_cli_prefix(cli, prefix, sizeof(prefix)) != 0)
        return LLMQ_EXIT_USAGE;
    FILE *out = output ? fopen(output, "w") : stdout;
    if (out == NULL) {
        llmq_cli_error(cli, "%s: cannot open for writing", output);
        return LLMQ_EXIT_FAIL;
    }
    redisContext *c = llmq_cli_connect(cli);
    int code = c == NULL ? LLMQ_EXIT_FAIL
               : all     ? print_all(cli, c, prefix, out)
                         : print_named(cli, c, prefix, argv + optind, n, wait, timeout_s, out);
    if (c != NULL)
        redisFree(c);
    if ((out != stdout ? fclose(out) : fflush(out)) != 0 && code == LLMQ_EXIT_OK)
        code = LLMQ_EXIT_FAIL;
    return code;
}
