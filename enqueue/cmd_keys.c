/* llmq keys: the gateway's API keys (llmq-gateway). A key maps to a tenant, a
 * user (or none: the gateway takes the request's "user" field), a priority for
 * synchronous calls and the models it may use. `create` prints the key once;
 * Redis keeps only its SHA-256 (common/auth/gw_key.h, layout in common/redis/keys.h), so a
 * lost key cannot be recovered, only revoked and replaced. A key is named in
 * `list` and `revoke` by the first hex digits of that hash (its id).
 *
 * A key made with --role (admin or viewer) is a dashboard key
 * (docs/dashboard.md): it logs into /dashboard and nothing else; the gateway
 * refuses it on /v1, and a client key (no role) is refused by the
 * dashboard. Kept apart so a key pasted into a browser cannot spend money,
 * and a key given to a program cannot see or act on the whole account. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_opts.h"
#include "auth/gw_key.h"
#include "base/clock.h"
#include "base/parse_int.h"
#include "jobs/job.h"
#include "redis/keys.h"
#include "redis/redis.h"

#define KEY_ID_LEN 16 /* hex digits of the hash shown as a key's id */
#define KEY_ID_MIN 8  /* fewest hex digits revoke accepts */

/* Checks a comma-separated model list: every model a valid name (strtok_r
 * would skip the empty one of "a,,b": no empty names). */
static int models_valid(const char *list)
{
    char buf[4096];
    if (strlen(list) >= sizeof(buf) || strstr(list, ",,") != NULL)
        return 0;
    snprintf(buf, sizeof(buf), "%s", list);
    char *save = NULL;
    int n = 0;
    for (char *m = strtok_r(buf, ",", &save); m != NULL; m = strtok_r(NULL, ",", &save), n++)
        if (!llmq_name_valid(m))
            return 0;
    return n > 0 && list[strlen(list) - 1] != ',' && list[0] != ',';
}

static int create(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                  const char *tenant, const char *user, const char *prio, const char *models,
                  const char *endpoints, const char *role, const char *cache)
{
    char key[LLMQ_GW_KEY_LEN + 1], hash[LLMQ_GW_KEY_HASH_LEN + 1];
    struct llmq_error err = {0};
    if (llmq_gw_key_generate(key, sizeof(key), &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return LLMQ_EXIT_FAIL;
    }
    llmq_gw_key_hash(key, strlen(key), hash);
    char hk[LLMQ_KEY_FIXED_MAX + LLMQ_GW_KEY_HASH_LEN], ik[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, hk, sizeof(hk), prefix, LLMQ_KEY_GW_KEY, hash) != 0 ||
        llmq_cli_key(cli, ik, sizeof(ik), prefix, LLMQ_KEY_GW_KEYS, NULL) != 0) {
        explicit_bzero(key, sizeof(key));
        return LLMQ_EXIT_USAGE;
    }
    long long now_ms = llmq_wall_ms();
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c,
                       "HSET %s tenant %s user %s priority %s models %s endpoints %s role %s "
                       "cache %s created_ms %lld",
                       hk, tenant, user, prio, models, endpoints, role, cache, now_ms);
    redisAppendCommand(c, "ZADD %s %lld %s", ik, now_ms, hash);
    redisAppendCommand(c, "EXEC");
    int rc = LLMQ_EXIT_OK;
    for (int i = 0; i < 4; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL ||
            r->type == REDIS_REPLY_ERROR || (i == 3 && r->type != REDIS_REPLY_ARRAY)) {
            if (rc == LLMQ_EXIT_OK)
                llmq_cli_error(cli, "storing the key: %s",
                               r && r->type == REDIS_REPLY_ERROR ? r->str
                                                                 : llmq_redis_context_error(c));
            rc = LLMQ_EXIT_FAIL;
        }
        if (r != NULL)
            freeReplyObject(r);
        if (c->err)
            break;
    }
    if (rc == LLMQ_EXIT_OK) {
        printf("%s\n", key);
        fprintf(stderr, "%s: key %.*s created; it is shown only now\n", cli->prog, KEY_ID_LEN,
                hash);
    }
    explicit_bzero(key, sizeof(key));
    return rc;
}

/* The value of field name in an HGETALL reply, or "". */
static const char *field(const redisReply *h, const char *name)
{
    const char *v = llmq_redis_field(h, name);
    return v != NULL ? v : "";
}

static int list(const struct llmq_cli *cli, redisContext *c, const char *prefix, int json)
{
    char ik[LLMQ_KEY_FIXED_MAX], hk[LLMQ_KEY_FIXED_MAX + LLMQ_GW_KEY_HASH_LEN];
    if (llmq_cli_key(cli, ik, sizeof(ik), prefix, LLMQ_KEY_GW_KEYS, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    redisReply *ids = redisCommand(c, "ZRANGE %s 0 -1", ik);
    if (ids == NULL || ids->type != REDIS_REPLY_ARRAY) {
        llmq_cli_error(cli, "ZRANGE keys: %s",
                       ids && ids->str ? ids->str : llmq_redis_context_error(c));
        if (ids != NULL)
            freeReplyObject(ids);
        return LLMQ_EXIT_FAIL;
    }
    if (!json)
        printf("%-16s %-16s %-16s %-8s %-7s %s\n", "ID", "TENANT", "USER", "PRIORITY", "ROLE",
               "MODELS");
    int rc = LLMQ_EXIT_OK;
    for (size_t i = 0; i < ids->elements && rc == LLMQ_EXIT_OK; i++) {
        const char *h = ids->element[i]->str;
        if (llmq_cli_key(cli, hk, sizeof(hk), prefix, LLMQ_KEY_GW_KEY, h) != 0) {
            rc = LLMQ_EXIT_FAIL; /* not a hash this CLI wrote */
            break;
        }
        redisReply *k = redisCommand(c, "HGETALL %s", hk);
        if (k == NULL || k->type != REDIS_REPLY_ARRAY) {
            llmq_cli_error(cli, "HGETALL key: %s",
                           k && k->str ? k->str : llmq_redis_context_error(c));
            rc = LLMQ_EXIT_FAIL;
        } else if (json) {
            printf("{\"id\":\"%.*s\",\"tenant\":\"%s\",\"user\":\"%s\",\"priority\":\"%s\","
                   "\"models\":\"%s\",\"endpoints\":\"%s\",\"role\":\"%s\",\"cache\":\"%s\","
                   "\"created_ms\":%s}\n",
                   KEY_ID_LEN, h, field(k, "tenant"), field(k, "user"), field(k, "priority"),
                   field(k, "models"), field(k, "endpoints"), field(k, "role"), field(k, "cache"),
                   field(k, "created_ms")[0] ? field(k, "created_ms") : "0");
        } else {
            const char *u = field(k, "user");
            const char *m = field(k, "models");
            const char *role = field(k, "role");
            printf("%-16.*s %-16s %-16s %-8s %-7s %s\n", KEY_ID_LEN, h,
                   field(k, "tenant")[0] ? field(k, "tenant") : "-", u[0] ? u : "(request)",
                   field(k, "priority"), role[0] ? role : "client", m[0] ? m : "(all)");
        }
        if (k != NULL)
            freeReplyObject(k);
    }
    freeReplyObject(ids);
    return rc;
}

int llmq_cli_gw_key_resolve(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                            const char *id, char out[65])
{
    size_t len = strlen(id);
    if (len < KEY_ID_MIN || len > LLMQ_GW_KEY_HASH_LEN || strspn(id, "0123456789abcdef") != len) {
        llmq_cli_error(cli, "'%s' is not a key id (%d to %d lower-case hex digits)", id, KEY_ID_MIN,
                       LLMQ_GW_KEY_HASH_LEN);
        return -1;
    }
    char ik[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, ik, sizeof(ik), prefix, LLMQ_KEY_GW_KEYS, NULL) != 0)
        return -2;
    redisReply *r = redisCommand(c, "ZRANGE %s 0 -1", ik);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        llmq_cli_error(cli, "ZRANGE keys: %s", r && r->str ? r->str : llmq_redis_context_error(c));
        if (r != NULL)
            freeReplyObject(r);
        return -2;
    }
    int found = 0;
    for (size_t i = 0; i < r->elements; i++)
        if (strncmp(r->element[i]->str, id, len) == 0 && found++ == 0)
            snprintf(out, LLMQ_GW_KEY_HASH_LEN + 1, "%s", r->element[i]->str);
    freeReplyObject(r);
    if (found != 1) {
        llmq_cli_error(cli, found == 0 ? "no key with id %s" : "id %s names several keys", id);
        return -1;
    }
    return 0;
}

static int revoke(const struct llmq_cli *cli, redisContext *c, const char *prefix, int n,
                  char **ids)
{
    for (int i = 0; i < n; i++) {
        char hash[LLMQ_GW_KEY_HASH_LEN + 1];
        int f = llmq_cli_gw_key_resolve(cli, c, prefix, ids[i], hash);
        if (f != 0)
            return f == -1 ? LLMQ_EXIT_USAGE : LLMQ_EXIT_FAIL;
        char hk[LLMQ_KEY_FIXED_MAX + LLMQ_GW_KEY_HASH_LEN], ik[LLMQ_KEY_FIXED_MAX];
        if (llmq_cli_key(cli, hk, sizeof(hk), prefix, LLMQ_KEY_GW_KEY, hash) != 0 ||
            llmq_cli_key(cli, ik, sizeof(ik), prefix, LLMQ_KEY_GW_KEYS, NULL) != 0)
            return LLMQ_EXIT_FAIL;
        redisReply *d = redisCommand(c, "DEL %s", hk);
        redisReply *z = d ? redisCommand(c, "ZREM %s %s", ik, hash) : NULL;
        int ok = d && z && d->type == REDIS_REPLY_INTEGER && z->type == REDIS_REPLY_INTEGER;
        if (d != NULL)
            freeReplyObject(d);
        if (z != NULL)
            freeReplyObject(z);
        if (!ok) {
            llmq_cli_error(cli, "revoking %s: %s", ids[i],
                           c->err ? llmq_redis_context_error(c) : "bad reply");
            return LLMQ_EXIT_FAIL;
        }
        printf("revoked %.*s\n", KEY_ID_LEN, hash);
    }
    return LLMQ_EXIT_OK;
}

struct keys_opts {
    const char *tenant, *user, *prio, *models, *endpoints, *role;
    const char *cache, *cache_ttl; /* --cache, --cache-ttl-s (NULL: not given) */
    char cache_field[32];          /* the key's field cache: "<mode> <ttl_s>", "" none */
    int json;
    int client_option; /* an option that only a client key takes was given */
    /* the command, once checked */
    const char *verb;
    enum llmq_priority p;
    char **ids;
    int n_ids;
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_STR("tenant", "T", struct keys_opts, tenant, "create: the key's tenant"),
    LLMQ_CLI_OPT_STR("user", "U", struct keys_opts, user,
                     "create: the key's user (default: the request's \"user\" field)"),
    LLMQ_CLI_OPT_STR("priority", "P", struct keys_opts, prio,
                     "create: high|normal|low, of synchronous calls and the most a batch\n"
                     "line may ask (default high)"),
    LLMQ_CLI_OPT_STR("models", "M1,M2,...", struct keys_opts, models,
                     "create: the models the key may use (default all)"),
    LLMQ_CLI_OPT_STR("endpoints", "A,B,...", struct keys_opts, endpoints,
                     "create: pin the key's jobs to these endpoints (default any)"),
    LLMQ_CLI_OPT_STR("role", "admin|viewer", struct keys_opts, role,
                     "create: a dashboard key instead of a client key"),
    LLMQ_CLI_OPT_STR("cache", "use|refresh|off", struct keys_opts, cache,
                     "create: the cache mode of calls that send no x-llmq-cache (default off)"),
    LLMQ_CLI_OPT_STR("cache-ttl-s", "N", struct keys_opts, cache_ttl,
                     "create: their entries' TTL without x-llmq-cache-ttl (default one day)"),
    LLMQ_CLI_OPT_FLAG("json", struct keys_opts, json, "list as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq keys create [--tenant T] [--user U] [--priority high|normal|low]\n"
             "                        [--models M1,M2,...] [--endpoints A,B,...]\n"
             "                        [--cache use|refresh|off] [--cache-ttl-s N]\n"
             "       llmq keys create --role admin|viewer [--tenant T]\n"
             "       llmq keys list [--json]\n"
             "       llmq keys revoke ID...\n",
    .about = "Gateway keys for llmq-gateway. create prints a new key once (stdout) and stores\n"
             "only its SHA-256; without --user the gateway takes the request's \"user\"\n"
             "field; --priority (default high) is that of synchronous calls and the most a\n"
             "batch line may ask; --models limits the models the key may use, by exact name\n"
             "(default: all); --endpoints pins its jobs to those endpoints of their model\n"
             "(`llmq endpoints`; default: any); --cache is the response cache mode of its\n"
             "calls that send no x-llmq-cache header, --cache-ttl-s their entries' TTL when\n"
             "they send no x-llmq-cache-ttl (docs/cache.md; default: off, one day). Every\n"
             "restriction applies to synchronous\n"
             "calls and to every line of a batch. --role makes a dashboard key instead\n"
             "(llmq-gateway's /dashboard; refused on /v1): viewer sees, admin also acts\n"
             "(retry, purge, enable, disable); with --tenant it sees only that tenant. ID is\n"
             "the first 8+ hex digits of the key's hash as list shows them.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error or unknown ID.\n",
};

/* Checks --cache and --cache-ttl-s and writes o->cache_field; returns 0 or
 * an exit code (printed). */
static int check_cache_options(const struct llmq_cli *cli, struct keys_opts *o)
{
    enum llmq_job_cache m = LLMQ_JOB_CACHE_OFF;
    if (o->cache[0] && llmq_job_cache_parse(o->cache, &m, NULL) != LLMQ_OK) {
        llmq_cli_error(cli, "--cache: expected use, refresh or off, got '%s'", o->cache);
        return LLMQ_EXIT_USAGE;
    }
    int64_t ttl = 0;
    if (o->cache_ttl[0] && llmq_parse_int64(o->cache_ttl, 1, LLMQ_JOB_CACHE_TTL_S_MAX, &ttl) != 0) {
        llmq_cli_error(cli, "--cache-ttl-s: expected whole seconds in 1..%lld, got '%s'",
                       LLMQ_JOB_CACHE_TTL_S_MAX, o->cache_ttl);
        return LLMQ_EXIT_USAGE;
    }
    if (o->cache_ttl[0] && !o->cache[0]) {
        llmq_cli_error(cli, "--cache-ttl-s needs --cache (use or refresh)");
        return LLMQ_EXIT_USAGE;
    }
    o->cache_field[0] = '\0';
    if (o->cache[0])
        snprintf(o->cache_field, sizeof(o->cache_field), "%s %lld", o->cache, (long long)ttl);
    return 0;
}

/* Checks the options of create; returns 0 or an exit code (printed). */
static int check_create_options(const struct llmq_cli *cli, const struct keys_opts *o,
                                enum llmq_priority *p)
{
    if (o->tenant[0] && !llmq_name_valid(o->tenant)) {
        llmq_cli_error(cli, "--tenant: '%s' is not a valid name", o->tenant);
        return LLMQ_EXIT_USAGE;
    }
    if (o->user[0] && !llmq_name_valid(o->user)) {
        llmq_cli_error(cli, "--user: '%s' is not a valid name", o->user);
        return LLMQ_EXIT_USAGE;
    }
    if (o->role[0] && strcmp(o->role, "admin") != 0 && strcmp(o->role, "viewer") != 0) {
        llmq_cli_error(cli, "--role: expected admin or viewer, got '%s'", o->role);
        return LLMQ_EXIT_USAGE;
    }
    if (o->role[0] && o->client_option) {
        llmq_cli_error(cli, "--role makes a dashboard key: it takes --tenant only (not --user, "
                            "--priority, --models, --endpoints or --cache, which are a client "
                            "key's)");
        return LLMQ_EXIT_USAGE;
    }
    if (llmq_priority_parse(o->prio, p) != 0) {
        llmq_cli_error(cli, "--priority: expected high, normal or low, got '%s'", o->prio);
        return LLMQ_EXIT_USAGE;
    }
    if (o->models[0] && !models_valid(o->models)) {
        llmq_cli_error(cli, "--models: expected model names separated by commas, got '%s'",
                       o->models);
        return LLMQ_EXIT_USAGE;
    }
    char buf[LLMQ_JOB_ENDPOINTS_MAX + 1];
    struct llmq_error err = {0};
    if (o->endpoints[0] && llmq_job_endpoints_check(o->endpoints, buf, sizeof(buf), &err)) {
        llmq_cli_error(cli, "--endpoints: %s", err.msg);
        return LLMQ_EXIT_USAGE;
    }
    return 0;
}

/* ud: the checked struct keys_opts */
static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct keys_opts *o = ud;
    if (strcmp(o->verb, "create") == 0)
        return create(cli, c, prefix, o->tenant, o->user, llmq_priority_name(o->p), o->models,
                      o->endpoints, o->role, o->cache_field);
    if (strcmp(o->verb, "list") == 0)
        return list(cli, c, prefix, o->json);
    return revoke(cli, c, prefix, o->n_ids, o->ids);
}

/* Runs the parsed command: pos[0] the action, then its key ids. */
static int run(const struct llmq_cli *cli, struct keys_opts *o, char **pos, int n_pos)
{
    if (n_pos == 0) {
        llmq_cli_error(cli, "expected create, list or revoke (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    const char *verb = pos[0];
    int rc = check_create_options(cli, o, &o->p);
    if (rc == 0)
        rc = check_cache_options(cli, o);
    if (rc != 0)
        return rc;
    int is_create = strcmp(verb, "create") == 0, is_list = strcmp(verb, "list") == 0;
    int is_revoke = strcmp(verb, "revoke") == 0;
    if (!is_create && !is_list && !is_revoke) {
        llmq_cli_error(cli, "unknown action '%s' (create, list, revoke)", verb);
        return LLMQ_EXIT_USAGE;
    }
    if ((is_create || is_list) && n_pos != 1) {
        llmq_cli_error(cli, "%s takes no arguments", verb);
        return LLMQ_EXIT_USAGE;
    }
    if (is_revoke && n_pos == 1) {
        llmq_cli_error(cli, "revoke: name at least one key id");
        return LLMQ_EXIT_USAGE;
    }
    o->verb = verb;
    o->ids = pos + 1;
    o->n_ids = n_pos - 1;
    return llmq_cli_on_account(cli, act, o);
}

int llmq_cmd_keys(struct llmq_cli *cli, int argc, char **argv)
{
    /* user, prio, models, endpoints and the cache options stay NULL unless given: a client
     * key's options, which --role refuses */
    struct keys_opts o = {.tenant = "", .role = "", .p = LLMQ_PRIORITY_HIGH};
    char **pos = calloc((size_t)argc + 1, sizeof(*pos));
    int n_pos = 0;
    if (pos == NULL)
        return LLMQ_EXIT_FAIL;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, argc, &n_pos);
    if (rc < 0) {
        o.client_option = o.user || o.prio || o.models || o.endpoints || o.cache || o.cache_ttl;
        o.user = o.user ? o.user : "";
        o.prio = o.prio ? o.prio : "high";
        o.models = o.models ? o.models : "";
        o.endpoints = o.endpoints ? o.endpoints : "";
        o.cache = o.cache ? o.cache : "";
        o.cache_ttl = o.cache_ttl ? o.cache_ttl : "";
        rc = run(cli, &o, pos, n_pos);
    }
    free(pos);
    return rc;
}
