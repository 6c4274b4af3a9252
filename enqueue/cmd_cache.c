/* llmq cache: the response cache's entries, counters and defaults
 * (docs/cache.md, lua/lib/cache.lua).
 *   stats   entries and bytes stored (of a tenant, a namespace, a model),
 *           and the account's hits, misses, coalesced waits, answers
 *           stored, tokens and dollars saved;
 *   purge   deletes the entries (of a tenant, a namespace, a model; all
 *           without a filter). Both go over the entries' index in steps
 *           (lua/cache_admin.lua).
 *   set     a model's default mode for the jobs that ask nothing (a
 *           tenant's own with --tenant), or a tenant's namespace;
 *   unset   removes one; show prints them (P cachecfg). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "cost/money.h"
#include "jobs/job.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/script.h"

struct cache_args {
    const char *tenant;    /* "*": any */
    const char *model;     /* "*": any */
    const char *namespace; /* NULL: none */
    const char *mode;      /* set: use|refresh|off */
    long long ttl_s;       /* set: 0 the default */
    int json;
    int purge;
    const char *verb;
    char scope[256]; /* "/<namespace>": the entries' tenant part */
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_STR("tenant", "T", struct cache_args, tenant,
                     "only tenant T's entries ('': the requests without a tenant); set,\n"
                     "unset: tenant T's own default of MODEL, or T's namespace"),
    LLMQ_CLI_OPT_STR("model", "M", struct cache_args, model, "only model M's entries"),
    LLMQ_CLI_OPT_NAME("namespace", "NAME", struct cache_args, namespace,
                      "stats, purge: only namespace NAME's entries; set: tenant T's\n"
                      "entries go in namespace NAME, shared with its other tenants"),
    LLMQ_CLI_OPT_WORD("mode", "use|refresh|off", struct cache_args, mode,
                      "set: the mode of MODEL's jobs that ask nothing"),
    LLMQ_CLI_OPT_INT("ttl-s", "N", struct cache_args, ttl_s, 1, LLMQ_JOB_CACHE_TTL_S_MAX,
                     "set: how long their answers live (default 86400)"),
    LLMQ_CLI_OPT_FLAG("json", struct cache_args, json, "stats as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq cache stats [--tenant T | --namespace NAME] [--model M] [--json]\n"
             "       llmq cache purge [--tenant T | --namespace NAME] [--model M]\n"
             "       llmq cache set MODEL --mode use|refresh|off [--ttl-s N] [--tenant T]\n"
             "       llmq cache set --tenant T --namespace NAME\n"
             "       llmq cache unset MODEL [--tenant T] | --tenant T\n"
             "       llmq cache show\n",
    .about = "The response cache (docs/cache.md): requests with cache mode use or refresh\n"
             "(llmq.cache in a Batch line, the producer's cache option, the gateway's\n"
             "x-llmq-cache header or its gateway key's default, else the default set here)\n"
             "store their good answers per tenant and model. stats shows the entries stored\n"
             "and the account's counters (hits, misses, coalesced waits, answers stored,\n"
             "tokens and dollars saved); purge deletes entries.\n"
             "set MODEL --mode: the mode of MODEL's jobs that ask nothing (a request's own\n"
             "mode wins, then its gateway key's, then tenant T's default of MODEL with\n"
             "--tenant, then MODEL's); off turns a tenant's off under a model's use.\n"
             "set --tenant T --namespace NAME: tenant T's entries are kept in namespace\n"
             "NAME, shared on purpose with every tenant set to NAME (else a tenant's are\n"
             "its own). unset removes a default (MODEL) or a tenant's namespace (no MODEL);\n"
             "show prints them.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

enum { N_REPLY = 10 };

/* Runs every step of op; sums entries and bytes, keeps the counters. */
static int run_steps(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                     const struct cache_args *a, long long *v)
{
    long long rank = 0;
    v[0] = v[1] = 0;
    while (rank >= 0) {
        char rank_s[24];
        snprintf(rank_s, sizeof(rank_s), "%lld", rank);
        const char *tenant = a->namespace != NULL ? a->scope : a->tenant;
        const char *argv[] = {prefix, a->purge ? "purge" : "stats", tenant, a->model, rank_s};
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
    char usd[40];
    llmq_usd_format(v[9], usd, sizeof(usd));
    if (a->json) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "account",
                              cli->account, "entries", (json_int_t)v[0], "bytes", (json_int_t)v[1],
                              "hits", (json_int_t)v[3], "misses", (json_int_t)v[4], "coalesced",
                              (json_int_t)v[5], "stored", (json_int_t)v[6], "stored_bytes",
                              (json_int_t)v[7], "saved_tokens", (json_int_t)v[8], "saved_nano_usd",
                              (json_int_t)v[9], "saved_usd", (double)v[9] / LLMQ_NANO_PER_USD);
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
    printf("saved_usd     %s (what the hits' original calls cost, at the account's prices)\n", usd);
    return LLMQ_EXIT_OK;
}

/* The field of P cachecfg that set/unset names: MODEL, MODEL/t/TENANT, or
 * ns/TENANT (no MODEL). */
static void config_field(const struct cache_args *a, const char *model, char *buf, size_t n)
{
    if (model == NULL)
        snprintf(buf, n, "ns/%s", a->tenant);
    else if (strcmp(a->tenant, "*") != 0)
        snprintf(buf, n, "%s/t/%s", model, a->tenant);
    else
        snprintf(buf, n, "%s", model);
}

/* One stored row of P cachecfg as a line. */
static void config_print(const char *field, const char *value)
{
    if (strncmp(field, "ns/", 3) == 0) {
        printf("tenant %s namespace=%s\n", field + 3, value);
        return;
    }
    char mode[16] = "?";
    long long ttl = 0;
    if (sscanf(value, "%15s %lld", mode, &ttl) != 2)
        ttl = 0;
    printf("%s mode=%s ttl_s=%lld\n", field, mode, ttl);
}

static int config_run(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct cache_args *a = ud;
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_CACHE_CONFIG, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    redisReply *r;
    if (strcmp(a->verb, "show") == 0) {
        r = llmq_redis_command(c, "HGETALL %s", key);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY)
            return llmq_cli_reply_failed(cli, "cache show", r, NULL);
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            if (r->element[i]->type == REDIS_REPLY_STRING &&
                r->element[i + 1]->type == REDIS_REPLY_STRING)
                config_print(r->element[i]->str, r->element[i + 1]->str);
        freeReplyObject(r);
        return LLMQ_EXIT_OK;
    }
    const char *model = strcmp(a->model, "*") != 0 ? a->model : NULL;
    char field[512], value[256];
    config_field(a, model, field, sizeof(field));
    if (strcmp(a->verb, "unset") == 0) {
        r = llmq_redis_command(c, "HDEL %s %s", key, field);
        if (r == NULL || r->type != REDIS_REPLY_INTEGER)
            return llmq_cli_reply_failed(cli, "cache unset", r, NULL);
        printf("%s: %s\n", field, r->integer ? "removed" : "was not set");
        freeReplyObject(r);
        return LLMQ_EXIT_OK;
    }
    if (model == NULL)
        snprintf(value, sizeof(value), "%s", a->namespace);
    else
        snprintf(value, sizeof(value), "%s %lld", a->mode,
                 a->ttl_s > 0 ? a->ttl_s : LLMQ_JOB_CACHE_TTL_S_DEFAULT);
    r = llmq_redis_command(c, "HSET %s %s %s", key, field, value);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER)
        return llmq_cli_reply_failed(cli, "cache set", r, NULL);
    freeReplyObject(r);
    config_print(field, value);
    return LLMQ_EXIT_OK;
}

/* Checks set/unset/show's arguments (model: the positional MODEL or NULL);
 * returns -1 when they are fine, else an exit code (printed). */
static int config_check(const struct llmq_cli *cli, struct cache_args *a, const char *model)
{
    int tenant = strcmp(a->tenant, "*") != 0;
    if (strcmp(a->verb, "show") == 0) {
        if (model || tenant || a->namespace || a->mode || a->ttl_s || a->json) {
            llmq_cli_error(cli, "cache show takes no argument (see --help)");
            return LLMQ_EXIT_USAGE;
        }
        return -1;
    }
    if (strcmp(a->model, "*") != 0 || a->json) {
        llmq_cli_error(cli, "--model and --json belong to stats and purge; set takes MODEL");
        return LLMQ_EXIT_USAGE;
    }
    if (tenant && !llmq_name_valid(a->tenant)) {
        llmq_cli_error(cli, "--tenant: '%s' is not a valid tenant name", a->tenant);
        return LLMQ_EXIT_USAGE;
    }
    if (model != NULL && !llmq_name_valid(model)) {
        llmq_cli_error(cli, "MODEL: '%s' is not a valid model name", model);
        return LLMQ_EXIT_USAGE;
    }
    int set = strcmp(a->verb, "set") == 0;
    if (model == NULL &&
        (!tenant || a->mode || a->ttl_s || (set && !a->namespace) || (!set && a->namespace))) {
        llmq_cli_error(cli, "expected cache %s MODEL%s, or --tenant T%s (see --help)", a->verb,
                       set ? " --mode use|refresh|off" : "", set ? " --namespace NAME" : "");
        return LLMQ_EXIT_USAGE;
    }
    if (model != NULL && (a->namespace || (set && !a->mode) || (!set && (a->mode || a->ttl_s)))) {
        llmq_cli_error(cli, "cache %s MODEL %s", a->verb,
                       set ? "takes --mode use|refresh|off [--ttl-s N] [--tenant T]"
                           : "takes only --tenant T");
        return LLMQ_EXIT_USAGE;
    }
    a->model = model != NULL ? model : "*";
    return -1;
}

int llmq_cmd_cache(struct llmq_cli *cli, int argc, char **argv)
{
    struct cache_args a = {.tenant = "*", .model = "*"};
    int n = 0;
    char *pos[2];
    int code = llmq_cli_parse(cli, &spec, argc, argv, &a, pos, 2, &n);
    if (code >= 0)
        return code;
    a.verb = n > 0 ? pos[0] : "";
    if (strcmp(a.verb, "set") == 0 || strcmp(a.verb, "unset") == 0 || strcmp(a.verb, "show") == 0) {
        code = config_check(cli, &a, n > 1 ? pos[1] : NULL);
        return code >= 0 ? code : llmq_cli_on_account(cli, config_run, &a);
    }
    if (strcmp(a.verb, "stats") != 0 && strcmp(a.verb, "purge") != 0) {
        llmq_cli_error(cli, "expected stats, purge, set, unset or show (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (n > 1) {
        llmq_cli_error(cli, "cache %s takes no MODEL (--model M; see --help)", a.verb);
        return LLMQ_EXIT_USAGE;
    }
    a.purge = strcmp(a.verb, "purge") == 0;
    if (a.purge && a.json) {
        llmq_cli_error(cli, "--json belongs to 'cache stats' (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (a.mode != NULL || a.ttl_s != 0) {
        llmq_cli_error(cli, "--mode and --ttl-s belong to 'cache set' (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if ((strcmp(a.tenant, "*") != 0 && a.tenant[0] != '\0' && !llmq_name_valid(a.tenant)) ||
        (strcmp(a.model, "*") != 0 && !llmq_name_valid(a.model))) {
        llmq_cli_error(cli, "--tenant and --model take names (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (a.namespace != NULL && strcmp(a.tenant, "*") != 0) {
        llmq_cli_error(cli, "--tenant or --namespace, not both (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (a.namespace != NULL)
        snprintf(a.scope, sizeof(a.scope), "/%s", a.namespace);
    return llmq_cli_on_account(cli, cache_run, &a);
}
