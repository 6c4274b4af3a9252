/* llmq dead: the dead-letter stream P dead of an account.
 *
 * list reads it; retry (lua/dead_retry.lua) puts jobs back in their queue
 * with fresh attempts from the body their hash kept; purge
 * (lua/dead_purge.lua) deletes them. Both work on named ids or, with --all,
 * on the whole stream in bounded chunks so no script runs long. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_opts.h"
#include "jobs/job_id.h"
#include "llmq/llmq.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/script.h"

#define CHUNK 500

static const char *field(const redisReply *f, const char *name)
{
    for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2)
        if (f->element[i]->type == REDIS_REPLY_STRING &&
            f->element[i + 1]->type == REDIS_REPLY_STRING && strcmp(f->element[i]->str, name) == 0)
            return f->element[i + 1]->str;
    return "";
}

/* "2026-11-30T05:00:00.123Z" from unix ms text (as is when not a number). */
static void format_ts(char *buf, size_t n, const char *ms_text)
{
    char *end = NULL;
    long long ms = strtoll(ms_text, &end, 10);
    struct tm tm;
    time_t t = (time_t)(ms / 1000);
    if (end == ms_text || *end != '\0' || gmtime_r(&t, &tm) == NULL) {
        snprintf(buf, n, "%s", ms_text);
        return;
    }
    size_t len = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + len, n - len, ".%03lldZ", ms % 1000);
}

static void print_entry(const redisReply *e, int as_json)
{
    const redisReply *f = e->element[1];
    char id[LLMQ_JOB_ID_MAX + 1]; /* shown as the custom_id it came from */
    llmq_job_id_to_custom(field(f, "id"), id, sizeof(id));
    if (!as_json) {
        char ts[64];
        format_ts(ts, sizeof(ts), field(f, "ts"));
        printf("%s\t%s\t%s\t%s\n", id, ts, field(f, "reason"), field(f, "error"));
        return;
    }
    json_t *err = json_loads(field(f, "error"), 0, NULL);
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", id, "entry", e->element[0]->str, "ts",
                          (json_int_t)strtoll(field(f, "ts"), NULL, 10), "reason",
                          field(f, "reason"), "error", err ? err : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s != NULL)
        printf("%s\n", s);
    free(s);
    json_decref(o);
}

static int list(const struct llmq_cli *cli, redisContext *c, const char *prefix, int as_json,
                long long limit)
{
    char from[64] = "-", key[LLMQ_KEY_FIXED_MAX];
    long long shown = 0;
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_DEAD, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    while (limit <= 0 || shown < limit) {
        long long want = limit > 0 && limit - shown < CHUNK ? limit - shown : CHUNK;
        redisReply *r = redisCommand(c, "XRANGE %s %s + COUNT %lld", key, from, want);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            llmq_cli_error(cli, "XRANGE dead: %s",
                           r && r->type == REDIS_REPLY_ERROR ? r->str
                           : c->err                          ? llmq_redis_context_error(c)
                                                             : "bad reply");
            if (r != NULL)
                freeReplyObject(r);
            return LLMQ_EXIT_FAIL;
        }
        size_t n = r->elements;
        for (size_t i = 0; i < n; i++) {
            const redisReply *e = r->element[i];
            if (e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
                e->element[0]->type == REDIS_REPLY_STRING) {
                print_entry(e, as_json);
                snprintf(from, sizeof(from), "(%s", e->element[0]->str);
                shown++;
            }
        }
        freeReplyObject(r);
        if ((long long)n < want)
            break;
    }
    return LLMQ_EXIT_OK;
}

/* Prints one {id, outcome} of a retry/purge reply; returns 1 if it did what
 * was asked (outcome == ok). */
static int print_outcome(const redisReply *e, const char *ok, long long *n_ok, int *bad)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_STRING || e->element[1]->type != REDIS_REPLY_STRING)
        return 0;
    const char *outcome = e->element[1]->str;
    if (strcmp(outcome, ok) == 0) {
        printf("%s\n", e->element[0]->str);
        (*n_ok)++;
        return 1;
    }
    const char *why = strcmp(outcome, "not_dead") == 0 ? "is not dead (nothing done)"
                      : strcmp(outcome, "gone") == 0   ? "no such job"
                      : strcmp(outcome, "no_body") == 0
                          ? "its body is gone: cannot be retried (dead-letter entry dropped)"
                          : outcome;
    fprintf(stderr, "%s: %s\n", e->element[0]->str, why);
    *bad = 1;
    return 0;
}

/* Runs dead_retry or dead_purge on ids (or, when none, on the whole stream,
 * a chunk per call until a call finds nothing). */
static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix,
               enum llmq_script_id script, const char *ok, char **ids, int n_ids)
{
    long long n_ok = 0;
    int bad = 0, named = n_ids > 0;
    for (;;) {
        const char *argv[2 + CHUNK];
        char limit[16];
        snprintf(limit, sizeof(limit), "%d", CHUNK);
        int argc = 2, taken = n_ids < CHUNK ? n_ids : CHUNK;
        argv[0] = prefix;
        argv[1] = limit;
        for (int i = 0; i < taken; i++)
            argv[argc++] = ids[i];
        struct llmq_error err = {0};
        redisReply *r = llmq_script_run(c, script, 1, argc, argv, NULL, &err);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            llmq_cli_error(cli, "%s", r && r->type == REDIS_REPLY_ERROR ? r->str : err.msg);
            if (r != NULL)
                freeReplyObject(r);
            return LLMQ_EXIT_FAIL;
        }
        size_t got = r->elements;
        for (size_t i = 0; i < got; i++)
            print_outcome(r->element[i], ok, &n_ok, &bad);
        freeReplyObject(r);
        ids += taken;
        n_ids -= taken;
        if ((taken > 0 && n_ids == 0) || (taken == 0 && got == 0))
            break;
    }
    fprintf(stderr, "%s: %lld job(s) %s\n", cli->prog, n_ok, ok);
    /* a named id not acted on is an error (2: the input named something not
     * dead); with --all, an entry of a job that lives again is just dropped */
    return bad && named ? LLMQ_EXIT_USAGE : LLMQ_EXIT_OK;
}

struct dead_opts {
    int as_json, all;
    long long limit;
    /* the command, once checked */
    int is_list, is_retry;
    char **ids;
    int n_ids;
};

/* ud: the checked struct dead_opts */
static int act_on(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct dead_opts *o = ud;
    if (o->is_list)
        return list(cli, c, prefix, o->as_json, o->limit);
    return act(cli, c, prefix, o->is_retry ? LLMQ_SCRIPT_DEAD_RETRY : LLMQ_SCRIPT_DEAD_PURGE,
               o->is_retry ? "queued" : "purged", o->ids, o->n_ids);
}

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_FLAG("json", struct dead_opts, as_json, "list as JSON lines"),
    LLMQ_CLI_OPT_INT("limit", "N", struct dead_opts, limit, 1, 1LL << 40, "list at most N jobs"),
    LLMQ_CLI_OPT_FLAG("all", struct dead_opts, all, "retry or purge every dead-lettered job"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq dead list [--json] [--limit N]\n"
             "       llmq dead retry (--all | ID...)\n"
             "       llmq dead purge (--all | ID...)\n",
    .about =
        "list: dead-lettered jobs, oldest first: id, time (UTC), reason, error (tab-separated).\n"
        "retry: enqueue them again with fresh attempts (same id, same body).\n"
        "purge: delete them and their results for good.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error, or a named id that is not dead\n"
            "or does not exist (named on stderr; the others are still done).\n",
};

/* Runs the parsed command: pos[0] the verb, then the ids. */
static int run(const struct llmq_cli *cli, struct dead_opts *o, char **pos, int n_pos)
{
    const char *verb = n_pos > 0 ? pos[0] : "";
    int n_ids = n_pos > 0 ? n_pos - 1 : 0;
    char **ids = pos + 1;
    int is_list = strcmp(verb, "list") == 0;
    int is_retry = strcmp(verb, "retry") == 0, is_purge = strcmp(verb, "purge") == 0;
    if (!is_list && !is_retry && !is_purge) {
        if (n_pos > 0)
            llmq_cli_error(cli, "unknown subcommand '%s' (list, retry or purge; see --help)", verb);
        else
            llmq_cli_error(cli, "expected list, retry or purge (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if ((is_list && o->all) || (!is_list && (o->as_json || o->limit > 0))) {
        llmq_cli_error(cli, "%s belongs to '%s' (see --help)",
                       is_list      ? "--all"
                       : o->as_json ? "--json"
                                    : "--limit",
                       is_list ? "dead retry|purge" : "dead list");
        return LLMQ_EXIT_USAGE;
    }
    if (is_list && n_ids > 0) {
        llmq_cli_error(cli, "list takes no job ids (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (!is_list && o->all == (n_ids > 0)) {
        llmq_cli_error(cli, "%s: give --all or job ids, not both (see --help)", verb);
        return LLMQ_EXIT_USAGE;
    }
    if (llmq_cli_job_ids(cli, ids, (size_t)n_ids) != 0)
        return LLMQ_EXIT_USAGE;
    o->is_list = is_list;
    o->is_retry = is_retry;
    o->ids = ids;
    o->n_ids = n_ids;
    int code = llmq_cli_on_account(cli, act_on, o);
    llmq_cli_job_ids_free(ids, (size_t)n_ids);
    return code;
}

int llmq_cmd_dead(struct llmq_cli *cli, int argc, char **argv)
{
    struct dead_opts o = {0};
    char **pos = calloc((size_t)argc + 1, sizeof(*pos));
    int n_pos = 0;
    if (pos == NULL)
        return LLMQ_EXIT_FAIL;
    int code = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, argc, &n_pos);
    if (code < 0)
        code = run(cli, &o, pos, n_pos);
    free(pos);
    return code;
}
