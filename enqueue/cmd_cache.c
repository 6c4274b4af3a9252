/* llmq cache: the response cache's entries and counters (docs/cache.md,
 * lua/lib/cache.lua).
 *   stats   entries and bytes stored (of a tenant, a model), and the
 *           account's hits, misses, coalesced waits, answers stored and
 *           tokens saved;
 *   purge   deletes the entries (of a tenant, a model; all without either).
 * Both go over the entries' index in steps (lua/cache_admin.lua). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/script.h"

struct cache_args {
    const char *tenant; /* "*": any */
    const char *model;  /* "*": any */
    int json;
    int purge;
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_STR("tenant", "T", struct cache_args, tenant,
                     "only tenant T's entries ('': the requests without a tenant)"),
    LLMQ_CLI_OPT_STR("model", "M", struct cache_args, model, "only model M's entries"),
    LLMQ_CLI_OPT_FLAG("json", struct cache_args, json, "stats as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq cache stats [--tenant T] [--model M] [--json]\n"
             "       llmq cache purge [--tenant T] [--model M]\n",
    .about = "The response cache (docs/cache.md): requests with cache mode use or refresh\n"
             "(llmq.cache in a Batch line, the producer's cache option, the gateway's\n"
             "x-llmq-cache header) store their good answers per tenant and model. stats shows\n"
             "the entries stored and the account's counters (hits, misses, coalesced waits,\n"
             "answers stored, tokens saved); purge deletes entries.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

enum { N_REPLY = 9 };

/* Runs every step of op; sums entries and bytes, keeps the counters. */
static int run_steps(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                     const struct cache_args *a, long long *v)
{
    long long rank = 0;
    v[0] = v[1] = 0;
    while (rank >= 0) {
        char rank_s[24];
        snprintf(rank_s, sizeof(rank_s), "%lld", rank);
        const char *argv[] = {prefix, a->purge ? "purge" : "stats", a->tenant, a->model, rank_s};
        struct llmq_error err = {0};
        redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_CACHE_ADMIN, 1, 5, argv, NULL, &err);
        int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == N_REPLY;
        for (size_t i = 0; ok && i < N_REPLY; i++)
            ok = r->element[i]->type == REDIS_REPLY_INTEGER;
        if (!ok) {
            return llmq_cli_reply_failed(cli, a->purge ? "cache purge" : "cache stats", r, &err);
        }
        v[0] += r->element[0]->integer;
        v[1] += r->element[1]->integer;
        rank = r->element[2]->integer;
        for (size_t i = 3; i < N_REPLY; i++)
            v[i] = r->element[i]->integer;
        freeReplyObject(r);
    }
    return LLMQ_EXIT_OK;
}

static int cache_run(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct cache_args *a = ud;
    long long v[N_REPLY] = {0};
    int code = run_steps(cli, c, prefix, a, v);
    if (code != LLMQ_EXIT_OK)
        return code;
    if (a->purge) {
        printf("purged %lld entries (%lld bytes)\n", v[0], v[1]);
        return LLMQ_EXIT_OK;
    }
    if (a->json) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "account",
                              cli->account, "entries", (json_int_t)v[0], "bytes", (json_int_t)v[1],
                              "hits", (json_int_t)v[3], "misses", (json_int_t)v[4], "coalesced",
                              (json_int_t)v[5], "stored", (json_int_t)v[6], "stored_bytes",
                              (json_int_t)v[7], "saved_tokens", (json_int_t)v[8]);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(o);
        return LLMQ_EXIT_OK;
    }
    printf("entries       %lld (%lld bytes stored)\n", v[0], v[1]);
    printf("hits          %lld\n", v[3]);
    printf("misses        %lld\n", v[4]);
    printf("coalesced     %lld (waited for an identical request in flight)\n", v[5]);
    printf("stored        %lld answers (%lld bytes)\n", v[6], v[7]);
    printf("saved_tokens  %lld (estimated cost of the hits)\n", v[8]);
    return LLMQ_EXIT_OK;
}

int llmq_cmd_cache(struct llmq_cli *cli, int argc, char **argv)
{
    struct cache_args a = {.tenant = "*", .model = "*"};
    int n = 0;
    char *pos[1];
    int code = llmq_cli_parse(cli, &spec, argc, argv, &a, pos, 1, &n);
    if (code >= 0)
        return code;
    const char *verb = n > 0 ? pos[0] : "";
    if (strcmp(verb, "stats") != 0 && strcmp(verb, "purge") != 0) {
        llmq_cli_error(cli, "expected stats or purge (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    a.purge = strcmp(verb, "purge") == 0;
    if (a.purge && a.json) {
        llmq_cli_error(cli, "--json belongs to 'cache stats' (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if ((strcmp(a.tenant, "*") != 0 && a.tenant[0] != '\0' && !llmq_name_valid(a.tenant)) ||
        (strcmp(a.model, "*") != 0 && !llmq_name_valid(a.model))) {
        llmq_cli_error(cli, "--tenant and --model take names (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    return llmq_cli_on_account(cli, cache_run, &a);
}
