/* llmq limits: show and change the limits of buckets and the account's
 * limiter policy, live (workers read them on every decision). Usage in
 * usage() below; bucket fields in common/redis/keys.h. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "redis/keys.h"
#include "limiter/path.h"
#include "redis/redis.h"
#include "redis/reply_read.h"
#include "redis/script.h"

/* --window-guard-ms learn: no pinned guard (each model's is learned). */
#define GUARD_LEARN "learn"

/* The fields one `set` or `policy` writes. */
struct limit_change {
    const char *fields[10];
    char values[10][24];
    int n;
    const char *mode;
    const char *settle; /* "admission" | "usage" | NULL unchanged */
    int soft;           /* -1 unchanged */
};

/* A "set" that changes nothing is a usage error; --rpm 0 / --tpm 0 mean no
 * limit on that dimension (as openai-sim's --rpm 0 / --tpm 0), so they remove
 * the field; a bucket must keep a request or a token limit. */
static int plan_set(const struct llmq_cli *cli, redisContext *c, const char *key,
                    const char *bucket, const struct limit_change *ch, int *n_zeroed)
{
    *n_zeroed = 0;
    int sets_limit[2] = {-1, -1}; /* requests, tokens: -1 untouched, 0 removed, 1 set */
    for (int i = 0; i < ch->n; i++) {
        int k = strcmp(ch->fields[i], "requests") == 0 ? 0
                : strcmp(ch->fields[i], "tokens") == 0 ? 1
                                                       : -1;
        if (k >= 0) {
            sets_limit[k] = strcmp(ch->values[i], "0") != 0;
            *n_zeroed += sets_limit[k] == 0;
        }
    }
    if (ch->n == 0 && ch->mode == NULL && ch->soft < 0 && ch->settle == NULL) {
        llmq_cli_error(cli, "nothing to set: give --rpm, --tpm, --period-ms, --mode, "
                            "--burst-*, --soft, --hard or --settle");
        return LLMQ_EXIT_USAGE;
    }
    if (bucket == NULL || sets_limit[0] == 1 || sets_limit[1] == 1)
        return 0;
    redisReply *r = redisCommand(c, "HMGET %s requests tokens", key);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        struct llmq_error err = {0};
        llmq_redis_error(c, r, "HMGET", &err);
        llmq_cli_error(cli, "%s", err.msg);
        if (r != NULL)
            freeReplyObject(r);
        return LLMQ_EXIT_FAIL;
    }
    int keeps = (sets_limit[0] < 0 && r->element[0]->type == REDIS_REPLY_STRING) ||
                (sets_limit[1] < 0 && r->element[1]->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    if (keeps)
        return 0;
    llmq_cli_error(cli,
                   "bucket '%s' would have no limit: give --rpm N or --tpm N above 0 "
                   "(0 means no limit on that dimension; 'llmq limits unset' removes a bucket)",
                   bucket);
    return LLMQ_EXIT_USAGE;
}

/* Writes ch to the hash at key (a bucket when bucket is set, else the policy)
 * in one MULTI, so a reader never sees half a change. */
static int cmd_set(struct llmq_cli *cli, redisContext *c, const char *key, const char *bucket,
                   const struct limit_change *ch)
{
    int n_zeroed = 0;
    int code = plan_set(cli, c, key, bucket, ch, &n_zeroed);
    if (code != 0)
        return code;
    const char *hset[2 + 2 * 13], *hdel[2 + 2];
    int n_set = 2, n_del = 2;
    hset[0] = "HSET", hset[1] = key, hdel[0] = "HDEL", hdel[1] = key;
    for (int i = 0; i < ch->n; i++) {
        int zero_limit =
            strcmp(ch->values[i], "0") == 0 &&
            (strcmp(ch->fields[i], "requests") == 0 || strcmp(ch->fields[i], "tokens") == 0);
        int unpin = strcmp(ch->values[i], GUARD_LEARN) == 0; /* the guard is learned again */
        if (zero_limit || unpin) {
            hdel[n_del++] = ch->fields[i];
        } else {
            hset[n_set++] = ch->fields[i];
            hset[n_set++] = ch->values[i];
        }
    }
    if (ch->mode != NULL) {
        hset[n_set++] = "mode";
        hset[n_set++] = ch->mode;
    }
    if (ch->soft >= 0) {
        hset[n_set++] = "soft";
        hset[n_set++] = ch->soft ? "1" : "0";
    }
    if (ch->settle != NULL) {
        hset[n_set++] = "settle";
        hset[n_set++] = ch->settle;
    }
    /* The bucket hash also holds live counters; a hash that held only
     * counters may carry a TTL, which configuration must not. */
    int sent = 2;
    redisAppendCommand(c, "MULTI");
    if (n_set > 2)
        redisAppendCommandArgv(c, n_set, hset, NULL), sent++;
    if (n_del > 2)
        redisAppendCommandArgv(c, n_del, hdel, NULL), sent++;
    redisAppendCommand(c, "PERSIST %s", key);
    redisAppendCommand(c, "EXEC");
    sent++;
    redisReply *r = NULL;
    int ok = 1;
    for (int i = 0; i < sent; i++) {
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            ok = 0;
            r = NULL;
            break;
        }
        if (i < sent - 1 && r != NULL && r->type == REDIS_REPLY_ERROR)
            ok = 0;
        if (i < sent - 1 || !ok) {
            freeReplyObject(r);
            r = NULL;
        }
    }
    for (size_t i = 0; ok && r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        ok = r->element[i]->type != REDIS_REPLY_ERROR;
    if (!ok || r == NULL || r->type != REDIS_REPLY_ARRAY) {
        struct llmq_error err = {0};
        llmq_redis_error(c, r, "HSET", &err);
        llmq_cli_error(cli, "%s", err.msg);
        if (r != NULL)
            freeReplyObject(r);
        return LLMQ_EXIT_FAIL;
    }
    freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

/* Drops a bucket's limits (its counters stay until they no longer matter);
 * a bucket without a limit of its own is an error naming it. */
static int cmd_unset(struct llmq_cli *cli, redisContext *c, const char *key, const char *bucket)
{
    redisReply *r = redisCommand(c,
                                 "HDEL %s requests tokens period_ms mode burst_requests "
                                 "burst_tokens soft settle",
                                 key);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER) {
        struct llmq_error err = {0};
        llmq_redis_error(c, r, "HDEL", &err);
        llmq_cli_error(cli, "%s", err.msg);
        if (r != NULL)
            freeReplyObject(r);
        return LLMQ_EXIT_FAIL;
    }
    long long removed = r->integer;
    freeReplyObject(r);
    if (removed == 0) {
        llmq_cli_error(cli, "no limit is set for bucket '%s' (see llmq limits get)", bucket);
        return LLMQ_EXIT_USAGE;
    }
    r = redisCommand(c, "PEXPIRE %s %d", key, 2 * 86400000);
    if (r != NULL)
        freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

/* Sets (w) or drops (w NULL) the fair-share weight of tenant/user bucket
 * name in P weights (common/redis/keys.h). */
static int set_weight(struct llmq_cli *cli, redisContext *c, const char *prefix, const char *name,
                      const char *w)
{
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_WEIGHTS, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    redisReply *r = w != NULL ? redisCommand(c, "HSET %s %s %s", key, name, w)
                              : redisCommand(c, "HDEL %s %s", key, name);
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
    if (!ok) {
        struct llmq_error err = {0};
        llmq_redis_error(c, r, w != NULL ? "HSET" : "HDEL", &err);
        llmq_cli_error(cli, "%s", err.msg);
    }
    if (r != NULL)
        freeReplyObject(r);
    return ok ? LLMQ_EXIT_OK : LLMQ_EXIT_FAIL;
}

/* Configuration fields of a bucket hash (the rest are live counters). */
static const char *const config_fields[] = {"requests", "tokens",         "period_ms",
                                            "mode",     "burst_requests", "burst_tokens",
                                            "soft",     "settle",         NULL};

static int is_config_field(const char *f)
{
    for (int i = 0; config_fields[i] != NULL; i++)
        if (strcmp(f, config_fields[i]) == 0)
            return 1;
    return 0;
}

/* A stored value as JSON: integers as numbers, soft as a boolean, the rest
 * (mode, settle) as strings. */
static json_t *value_json(const char *field, const char *v)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (strcmp(field, "soft") == 0)
        return json_boolean(strcmp(v, "1") == 0);
    if (errno == 0 && end != v && *end == '\0')
        return json_integer(n);
    return json_string(v);
}

/* The hash at key as a JSON object; only_config keeps the configuration
 * fields. */
static json_t *read_hash(redisContext *c, const char *key, int only_config)
{
    redisReply *r = redisCommand(c, "HGETALL %s", key);
    json_t *o = json_object();
    if (r != NULL && r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            const char *f = r->element[i]->str;
            if (!only_config || is_config_field(f))
                json_object_set_new(o, f, value_json(f, r->element[i + 1]->str));
        }
    }
    if (r != NULL)
        freeReplyObject(r);
    return o;
}

/* A field for the text table: as stored, or dflt when absent. */
static const char *field(json_t *o, const char *name, const char *dflt, char *buf, size_t n)
{
    json_t *v = json_object_get(o, name);
    if (json_is_integer(v)) {
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    if (json_is_boolean(v))
        return json_is_true(v) ? "yes" : "no";
    return json_is_string(v) ? json_string_value(v) : dflt;
}

/* The limits found by SCAN P limit:*, by bucket name (key after skip). */
struct limit_scan {
    redisContext *c;
    json_t *all;
    size_t skip;
};

static int take_limit(const char *key, void *ud)
{
    struct limit_scan *s = ud;
    json_t *h = read_hash(s->c, key, 1);
    if (strlen(key) > s->skip && (json_object_get(h, "requests") || json_object_get(h, "tokens")))
        json_object_set_new(s->all, key + s->skip, h);
    else
        json_decref(h); /* counters of a tenant under a default limit */
    return 0;
}

static void print_limits_header(void)
{
    printf("%-40s %10s %12s %10s %-7s %-5s %s\n", "BUCKET", "REQUESTS", "TOKENS", "PERIOD_MS",
           "MODE", "SOFT", "SETTLE");
}

/* One bucket's row of the text table (h: its configuration fields). */
static void print_limits_row(const char *name, json_t *h)
{
    char b[5][24];
    printf("%-40s %10s %12s %10s %-7s %-5s %s\n", name, field(h, "requests", "-", b[0], 24),
           field(h, "tokens", "-", b[1], 24), field(h, "period_ms", "60000", b[2], 24),
           field(h, "mode", "window", b[3], 24), field(h, "soft", "no", b[4], 24),
           field(h, "settle", "admission", b[3], 24));
}

static void print_policy(json_t *policy)
{
    char b[5][24], pinned[40] = "learned per model";
    if (json_object_get(policy, "window_guard_ms") != NULL)
        snprintf(pinned, sizeof(pinned), "%s ms",
                 field(policy, "window_guard_ms", "", b[4], sizeof(b[4])));
    printf("policy: headroom high %s%% normal %s%% low %s%%, soft threshold %s%%, window guard "
           "%s\n",
           field(policy, "headroom_high", "100", b[0], 24),
           field(policy, "headroom_normal", "100", b[1], 24),
           field(policy, "headroom_low", "80", b[2], 24),
           field(policy, "soft_threshold", "80", b[3], 24), pinned);
}

/* After a set: what is now in force, read back from Redis (the bucket's row
 * and its weight, or the policy), so a change is seen, not assumed. */
static void print_in_force(redisContext *c, const char *key, const char *bucket, const char *prefix,
                           int weight_set)
{
    json_t *h = read_hash(c, key, bucket != NULL);
    if (bucket == NULL) {
        print_policy(h);
        json_decref(h);
        return;
    }
    printf("now in force:\n");
    print_limits_header();
    print_limits_row(bucket, h);
    json_decref(h);
    char wkey[LLMQ_KEY_FIXED_MAX];
    if (weight_set &&
        llmq_key(wkey, sizeof(wkey), prefix, LLMQ_KEY_WEIGHTS, NULL, NULL) == LLMQ_OK) {
        json_t *w = read_hash(c, wkey, 0);
        char b[24];
        printf("weight %s %s\n", bucket, field(w, bucket, "1", b, sizeof(b)));
        json_decref(w);
    }
}

/* Adds each window model bucket's arrival guard in force (guard_ms), the
 * bounds it is learned within (guard_floor_ms, guard_ceiling_ms) and its
 * grants' lifetime (grant_lifetime_ms) to its
 * object in all, from the limiter's bucket_usage script (which applies the
 * decay: the stored fields are only what the guard last grew to). */
static void add_guards(redisContext *c, const char *prefix, json_t *all)
{
    size_t n = 0, max = json_object_size(all);
    const char **argv = calloc(max + 1, sizeof(*argv));
    const char *name;
    json_t *h;
    if (argv == NULL)
        return;
    argv[0] = prefix;
    json_object_foreach(all, name, h)
    {
        if (strchr(name, '/') == NULL)
            argv[1 + n++] = name;
    }
    redisReply *r =
        n > 0 ? llmq_script_run(c, LLMQ_SCRIPT_BUCKET_USAGE, 1, (int)n + 1, argv, NULL, NULL)
              : NULL;
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *b = r->element[i];
        if (b->type != REDIS_REPLY_ARRAY || b->elements < 12 ||
            llmq_reply_int_or(b->element[8], -1) < 0)
            continue; /* no window: no guard */
        h = json_object_get(all, llmq_reply_str_or(b->element[0], ""));
        json_object_set_new(h, "guard_ms", json_integer(llmq_reply_int_or(b->element[8], 0)));
        json_object_set_new(h, "guard_floor_ms", json_integer(llmq_reply_int_or(b->element[9], 0)));
        json_object_set_new(h, "guard_ceiling_ms",
                            json_integer(llmq_reply_int_or(b->element[10], 0)));
        json_object_set_new(h, "grant_lifetime_ms",
                            json_integer(llmq_reply_int_or(b->element[11], 0)));
    }
    if (r != NULL)
        freeReplyObject(r);
    free(argv);
}

static int cmd_get(struct llmq_cli *cli, redisContext *c, const char *prefix, int as_json)
{
    json_t *all = json_object();
    char pattern[LLMQ_KEY_FIXED_MAX], policy_key[LLMQ_KEY_FIXED_MAX],
        weights_key[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, pattern, sizeof(pattern), prefix, LLMQ_KEY_LIMIT, "*") != 0 ||
        llmq_cli_key(cli, policy_key, sizeof(policy_key), prefix, LLMQ_KEY_POLICY, NULL) != 0 ||
        llmq_cli_key(cli, weights_key, sizeof(weights_key), prefix, LLMQ_KEY_WEIGHTS, NULL) != 0) {
        json_decref(all);
        return LLMQ_EXIT_USAGE;
    }
    struct limit_scan s = {c, all, strlen(prefix) + strlen(llmq_key_head(LLMQ_KEY_LIMIT))};
    struct llmq_error err = {0};
    if (llmq_redis_scan(c, pattern, 500, take_limit, &s, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        json_decref(all);
        return LLMQ_EXIT_FAIL;
    }
    json_t *policy = read_hash(c, policy_key, 0);
    json_t *weights = read_hash(c, weights_key, 0);
    add_guards(c, prefix, all);
    if (as_json) {
        json_t *doc = json_pack("{s:s, s:o, s:o, s:o}", "account", cli->account, "limits", all,
                                "policy", policy, "weights", weights);
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(doc);
        return LLMQ_EXIT_OK;
    }
    print_limits_header();
    const char *name;
    json_t *h;
    void *tmp;
    char b[5][24];
    json_object_foreach_safe(all, tmp, name, h)
    {
        print_limits_row(name, h);
    }
    json_object_foreach_safe(all, tmp, name, h)
    {
        if (json_object_get(h, "guard_ms") != NULL)
            printf("arrival guard %s: %s ms (%s %s..%s ms), grant lifetime %s ms\n", name,
                   field(h, "guard_ms", "-", b[0], 24),
                   json_object_get(policy, "window_guard_ms") ? "pinned by the policy"
                                                              : "learned within",
                   field(h, "guard_floor_ms", "-", b[1], 24),
                   field(h, "guard_ceiling_ms", "-", b[2], 24),
                   field(h, "grant_lifetime_ms", "-", b[3], 24));
    }
    print_policy(policy);
    json_object_foreach_safe(weights, tmp, name, h)
    {
        printf("weight %s %s\n", name, field(weights, name, "1", b[0], 24));
    }
    json_decref(weights);
    json_decref(all);
    json_decref(policy);
    return LLMQ_EXIT_OK;
}

/* The options that change a numeric field of a bucket or of the policy: the
 * field stored and its range. */
static const struct {
    const char *name, *field;
    long long min, max;
} numeric_fields[] = {
    {"--rpm", "requests", 0, 1000000000000LL},
    {"--tpm", "tokens", 0, 1000000000000LL},
    {"--period-ms", "period_ms", 1, 86400000LL * 31},
    {"--burst-requests", "burst_requests", 1, 1000000000000LL},
    {"--burst-tokens", "burst_tokens", 1, 1000000000000LL},
    {"--headroom-low", "headroom_low", 1, 100},
    {"--headroom-normal", "headroom_normal", 1, 100},
    {"--headroom-high", "headroom_high", 1, 100},
    {"--soft-threshold", "soft_threshold", 0, 100},
    {"--window-guard-ms", "window_guard_ms", 0, 3600000},
};

struct limits_opts {
    struct limit_change ch;
    const char *tenant, *user;
    const char *endpoint, *deployment; /* --endpoint, --deployment; NULL: none */
    const char *weight;                /* --weight: the fair-share weight text, NULL unchanged */
    long long batch_queue_tokens;      /* --batch-queue-tokens; -1 unchanged */
    int as_json;
};

/* A numeric field (numeric_fields); --window-guard-ms also takes "learn". */
static int take_number(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    struct limits_opts *o = target;
    for (size_t i = 0; i < sizeof(numeric_fields) / sizeof(numeric_fields[0]); i++) {
        long long v = 0;
        if (strcmp(numeric_fields[i].name, name) != 0)
            continue;
        int unpin = strcmp(name, "--window-guard-ms") == 0 && strcmp(arg, GUARD_LEARN) == 0;
        if (!unpin && llmq_cli_parse_int64(cli, name, arg, numeric_fields[i].min,
                                           numeric_fields[i].max, &v) != 0)
            return LLMQ_EXIT_USAGE;
        int k = 0; /* a repeated option: the last one wins */
        while (k < o->ch.n && strcmp(o->ch.fields[k], numeric_fields[i].field) != 0)
            k++;
        o->ch.fields[k] = numeric_fields[i].field;
        if (unpin)
            snprintf(o->ch.values[k], sizeof(o->ch.values[0]), "%s", GUARD_LEARN);
        else
            snprintf(o->ch.values[k], sizeof(o->ch.values[0]), "%lld", v);
        o->ch.n += k == o->ch.n;
        return 0;
    }
    llmq_cli_error(cli, "%s: no field of a limit", name); /* a table out of step */
    return LLMQ_EXIT_FAIL;
}

/* --endpoint, --deployment: 1..64 letters, digits, '.', '_' or '-'. */
static int take_ident(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    if (arg[0] == '\0' || strlen(arg) > 64 ||
        strspn(arg, "abcdefghijklmnopqrstuvwxyz"
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789._-") != strlen(arg)) {
        llmq_cli_error(cli, "%s: 1..64 letters, digits, '.', '_' or '-', got '%s'", name, arg);
        return LLMQ_EXIT_USAGE;
    }
    *(const char **)target = arg;
    return 0;
}

static int take_soft(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    (void)cli, (void)arg;
    *(int *)target = strcmp(name, "--soft") == 0;
    return 0;
}

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_CALL_ALL("rpm", "N", take_number, "set: requests per period (0: no limit)"),
    LLMQ_CLI_OPT_CALL_ALL("tpm", "N", take_number, "set: tokens per period (0: no limit)"),
    LLMQ_CLI_OPT_CALL_ALL("period-ms", "P", take_number, "set: the period (default 60000)"),
    LLMQ_CLI_OPT_STR("tenant", "T", struct limits_opts, tenant, "set, unset: tenant T's bucket"),
    LLMQ_CLI_OPT_STR("user", "U", struct limits_opts, user, "set, unset: user U's bucket"),
    LLMQ_CLI_OPT_WORD("mode", "window|gcra", struct limits_opts, ch.mode,
                      "set: the limiter (default window)"),
    LLMQ_CLI_OPT_CALL_ALL("burst-requests", "N", take_number, "set: gcra's request burst"),
    LLMQ_CLI_OPT_CALL_ALL("burst-tokens", "N", take_number, "set: gcra's token burst"),
    LLMQ_CLI_OPT_CALL("soft", NULL, struct limits_opts, ch.soft, take_soft,
                      "set: a tenant/user bucket may borrow idle capacity"),
    LLMQ_CLI_OPT_CALL("hard", NULL, struct limits_opts, ch.soft, take_soft,
                      "set: it may not (default)"),
    LLMQ_CLI_OPT_FLAG("json", struct limits_opts, as_json, "get: as JSON, numbers as numbers"),
    LLMQ_CLI_OPT_CALL_ALL("headroom-low", "PCT", take_number,
                          "policy: the share of a bucket low jobs may use"),
    LLMQ_CLI_OPT_CALL_ALL("headroom-normal", "PCT", take_number,
                          "policy: the share of a bucket normal jobs may use"),
    LLMQ_CLI_OPT_CALL_ALL("headroom-high", "PCT", take_number,
                          "policy: the share of a bucket high jobs may use"),
    LLMQ_CLI_OPT_CALL_ALL("soft-threshold", "PCT", take_number,
                          "policy: model use below which soft buckets borrow"),
    LLMQ_CLI_OPT_CALL("weight", "W", struct limits_opts, weight, llmq_cli_take_weight,
                      "set: the tenant's or user's fair share, 0.001..1000000 (default 1)"),
    LLMQ_CLI_OPT_WORD("settle", "admission|usage", struct limits_opts, ch.settle,
                      "set: when the unused reservation comes back (default admission)"),
    LLMQ_CLI_OPT_CALL_ALL("window-guard-ms", "MS|learn", take_number,
                          "policy: pin the arrival guard ('learn' unpins it)"),
    LLMQ_CLI_OPT_CALL("endpoint", "NAME", struct limits_opts, endpoint, take_ident,
                      "set, unset: the model's bucket on endpoint NAME"),
    LLMQ_CLI_OPT_CALL("deployment", "DEP", struct limits_opts, deployment, take_ident,
                      "set: the endpoint's Azure deployment of the model"),
    LLMQ_CLI_OPT_INT("batch-queue-tokens", "N", struct limits_opts, batch_queue_tokens, 0,
                     1000000000000LL, "set: the provider's Batch queue limit (0: none)"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq limits set MODEL [--rpm N] [--tpm N] [--period-ms P]\n"
             "                        [--endpoint NAME [--deployment DEP]]\n"
             "                        [--tenant T] [--user U] [--mode window|gcra]\n"
             "                        [--burst-requests N] [--burst-tokens N] [--soft | --hard]\n"
             "                        [--weight W]\n"
             "                        [--settle admission|usage]\n"
             "       llmq limits set MODEL [--endpoint NAME] --batch-queue-tokens N\n"
             "       llmq limits unset MODEL [--endpoint NAME | --tenant T] [--user U]\n"
             "       llmq limits get [--json]\n"
             "       llmq limits policy [--headroom-low PCT] [--headroom-normal PCT]\n"
             "                          [--headroom-high PCT] [--soft-threshold PCT]\n"
             "                          [--window-guard-ms MS|learn]\n",
    .about = "--rpm/--tpm are requests and tokens per period (default 60000 ms, OpenAI's\n"
             "minute); 0 means no limit on that dimension (as in openai-sim), and a bucket\n"
             "keeps at least one of the two. --tenant T: tenant T's bucket; --tenant T --user U:\n"
             "user U of tenant T; --user U alone: user U of every tenant (and without one),\n"
             "each tenant's U still a bucket of its own. '*' as T or U is the default for every\n"
             "tenant or user without a limit of its own (--tenant T --user '*': T's users).\n"
             "A user takes the first limit set of: its own, its tenant's '*', --user U alone,\n"
             "--user '*' alone (weights alike). --soft lets a tenant/user bucket borrow\n"
             "idle capacity while the model bucket is below the soft threshold. A model with\n"
             "no limit runs unlimited (enqueue and status warn about it). --weight W (with\n"
             "--tenant or --user, 0.001..1000000, default 1) is the tenant's or user's fair\n"
             "share of the model among those with work waiting; unset drops it too.\n"
             "--endpoint NAME: the model's bucket on endpoint NAME (`llmq endpoints`), which\n"
             "then serves the model (bucket \"MODEL@NAME\"); --deployment DEP: its Azure\n"
             "deployment of the model (default the model's name). Unset stops it serving.\n"
             "--settle usage gives a request's unused reservation back when it is settled\n"
             "(default admission: the charge at admission stays for the window, as OpenAI\n"
             "counts it).\n"
             "--window-guard-ms pins the arrival guard: each window admission counts that\n"
             "much longer than its period, for requests that reach the API late (default:\n"
             "learned per model from the calls' lateness and the API's 429s, shown by get;\n"
             "'learn' unpins it).\n"
             "--batch-queue-tokens N: the provider's enqueued-token limit of the model's\n"
             "Batch queue (prompt tokens of unfinished provider batches, per model at\n"
             "OpenAI; 0 none): offload submits no batch past it (a token_limit_exceeded\n"
             "teaches a lower one, forgotten when this is set again); with --endpoint NAME\n"
             "that endpoint's queue of the model.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error, a value out of range, or unset of a\n"
            "bucket that has no limit.\n",
};

/* Makes endpoint serve model (serve: 1) with deployment dep (NULL: the
 * model's name), or stop serving it (0): lua/endpoint_admin.lua. Returns an
 * exit code after a message. */
static int endpoint_serve(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                          const char *endpoint, const char *model, const char *dep, int serve)
{
    struct llmq_error err = {0};
    const char *argv[5] = {prefix, serve ? "serve" : "unserve", endpoint, model, dep ? dep : ""};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_ENDPOINT_ADMIN, 1, 5, argv, NULL, &err);
    int code = LLMQ_EXIT_OK;
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        const char *m = r ? strstr(r->str, "LLMQ_") : NULL;
        const char *text = m ? strchr(m, ' ') : NULL;
        llmq_cli_error(cli, "--endpoint %s: %s", endpoint,
                       text ? text + 1 : (r ? r->str : err.msg));
        code = m ? LLMQ_EXIT_USAGE : LLMQ_EXIT_FAIL;
    }
    if (r != NULL)
        freeReplyObject(r);
    return code;
}

static int is_policy_field(const char *f)
{
    return strncmp(f, "headroom", 8) == 0 || strcmp(f, "soft_threshold") == 0 ||
           strcmp(f, "window_guard_ms") == 0;
}

/* `limits set MODEL [--endpoint NAME] --batch-queue-tokens N`: the
 * provider's enqueued-token limit of the bucket's batch queue (P pbq:<bucket>,
 * lua/lib/pbatch.lua); 0 removes it. A limit learned from a
 * token_limit_exceeded is forgotten (the new value is the one to trust). */
static int batch_queue_set(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                           const char *bucket, long long tokens)
{
    char key[LLMQ_KEY_FIXED_MAX + LLMQ_BUCKET_NAME_MAX];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_PB_QUEUE, bucket) != 0)
        return LLMQ_EXIT_USAGE;
    redisReply *r = tokens > 0 ? redisCommand(c, "HSET %s limit %lld", key, tokens)
                               : redisCommand(c, "HDEL %s limit", key);
    int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    if (r != NULL)
        freeReplyObject(r);
    r = ok ? redisCommand(c, "HDEL %s learned learned_until hold_until refusals", key) : NULL;
    ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    if (!ok) {
        struct llmq_error err = {0};
        llmq_redis_error(c, r, "HSET", &err);
        llmq_cli_error(cli, "%s", err.msg);
    }
    if (r != NULL)
        freeReplyObject(r);
    if (!ok)
        return LLMQ_EXIT_FAIL;
    if (tokens > 0)
        printf("%s batch_queue_tokens=%lld\n", bucket, tokens);
    else
        printf("%s batch_queue_tokens=none\n", bucket);
    return LLMQ_EXIT_OK;
}

/* Checks the options against the subcommand. Returns 0 or an exit code. */
static int check_sub(const struct llmq_cli *cli, const struct limits_opts *o, const char *sub,
                     int n_pos)
{
    int is_set = strcmp(sub, "set") == 0, is_unset = strcmp(sub, "unset") == 0;
    int is_policy = strcmp(sub, "policy") == 0, is_get = strcmp(sub, "get") == 0;
    if (!is_set && !is_unset && !is_policy && !is_get) {
        llmq_cli_error(cli, "unknown subcommand '%s' (set, unset, get, policy)", sub);
        return LLMQ_EXIT_USAGE;
    }
    if ((is_set || is_unset) && n_pos < 2) {
        llmq_cli_error(cli, "%s: MODEL is required", sub);
        return LLMQ_EXIT_USAGE;
    }
    if (n_pos > ((is_set || is_unset) ? 2 : 1)) {
        llmq_cli_error(cli, "%s: too many arguments (see --help)", sub);
        return LLMQ_EXIT_USAGE;
    }
    if ((o->endpoint || o->deployment) && (!(is_set || is_unset) || o->tenant || o->user ||
                                           o->weight || (o->deployment && !o->endpoint))) {
        llmq_cli_error(cli, "--endpoint belongs to 'limits set|unset MODEL' without --tenant, "
                            "--user or --weight; --deployment needs --endpoint");
        return LLMQ_EXIT_USAGE;
    }
    if (!is_set && !is_unset && (o->tenant || o->user)) {
        llmq_cli_error(cli, "%s takes no --tenant or --user", sub);
        return LLMQ_EXIT_USAGE;
    }
    if (!is_set && (o->ch.mode || o->ch.settle || o->ch.soft >= 0)) {
        llmq_cli_error(cli, "--mode, --settle, --soft and --hard belong to 'llmq limits set'");
        return LLMQ_EXIT_USAGE;
    }
    if (o->weight != NULL && (!is_set || (o->tenant == NULL && o->user == NULL))) {
        llmq_cli_error(cli, "--weight belongs to 'llmq limits set' with --tenant or --user");
        return LLMQ_EXIT_USAGE;
    }
    if (is_set && o->ch.soft == 1 && o->tenant == NULL && o->user == NULL) {
        llmq_cli_error(cli, "--soft applies to tenant or user buckets; the model bucket "
                            "mirrors OpenAI's limit and is always hard");
        return LLMQ_EXIT_USAGE;
    }
    for (int i = 0; i < o->ch.n; i++) {
        if (is_policy != is_policy_field(o->ch.fields[i]) || is_get || is_unset) {
            llmq_cli_error(cli, "%s takes %s", sub,
                           is_policy ? "--headroom-*, --soft-threshold and --window-guard-ms only"
                           : is_set  ? "no --headroom-*, --soft-threshold or --window-guard-ms "
                                       "(see 'limits policy')"
                                     : "no limit values");
            return LLMQ_EXIT_USAGE;
        }
    }
    if (o->batch_queue_tokens >= 0 &&
        (!is_set || o->tenant || o->user || o->weight || o->deployment || o->ch.n > 0 ||
         o->ch.mode || o->ch.settle || o->ch.soft >= 0)) {
        llmq_cli_error(cli, "--batch-queue-tokens goes alone: 'llmq limits set MODEL "
                            "[--endpoint NAME] --batch-queue-tokens N' (no other limit, "
                            "--tenant or --user)");
        return LLMQ_EXIT_USAGE;
    }
    if (o->as_json && !is_get) {
        llmq_cli_error(cli, "--json belongs to 'llmq limits get'");
        return LLMQ_EXIT_USAGE;
    }
    return 0;
}

int llmq_cmd_limits(struct llmq_cli *cli, int argc, char **argv)
{
    struct limits_opts o = {.ch = {.soft = -1}, .batch_queue_tokens = -1};
    char *pos[3];
    int n_pos = 0;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, 3, &n_pos);
    if (rc >= 0)
        return rc;
    if (n_pos == 0) {
        llmq_cli_error(cli, "expected set, unset, get or policy (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    const char *sub = pos[0];
    const char *model = n_pos > 1 ? pos[1] : NULL;
    rc = check_sub(cli, &o, sub, n_pos);
    if (rc != 0)
        return rc;
    struct llmq_error err = {0};
    char prefix[LLMQ_KEY_PREFIX_MAX];
    if (llmq_cli_prefix(cli, prefix, sizeof(prefix)) != 0)
        return LLMQ_EXIT_USAGE;
    int is_set = strcmp(sub, "set") == 0, is_unset = strcmp(sub, "unset") == 0;
    char bucket[LLMQ_BUCKET_NAME_MAX];
    if ((is_set || is_unset) &&
        llmq_bucket_name(bucket, sizeof(bucket), model, o.tenant, o.user, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return LLMQ_EXIT_USAGE;
    }
    if (o.endpoint != NULL) { /* the endpoint's bucket of the model (lua/lib/endpoints.lua) */
        size_t len = strlen(bucket);
        if (len + 1 + strlen(o.endpoint) >= sizeof(bucket)) {
            llmq_cli_error(cli, "bucket %s@%s is too long", bucket, o.endpoint);
            return LLMQ_EXIT_USAGE;
        }
        snprintf(bucket + len, sizeof(bucket) - len, "@%s", o.endpoint);
    }
    int set_policy = strcmp(sub, "policy") == 0 && o.ch.n > 0;
    char key[LLMQ_KEY_FIXED_MAX + LLMQ_BUCKET_NAME_MAX] = ""; /* what set/unset/policy change */
    if ((is_set || is_unset || set_policy) &&
        llmq_cli_key(cli, key, sizeof(key), prefix, set_policy ? LLMQ_KEY_POLICY : LLMQ_KEY_LIMIT,
                     set_policy ? NULL : bucket) != 0)
        return LLMQ_EXIT_USAGE;
    rc = LLMQ_EXIT_OK;
    redisContext *c = llmq_cli_connect(cli, &rc);
    if (c == NULL)
        return rc;
    if (o.batch_queue_tokens >= 0) {
        rc = batch_queue_set(cli, c, prefix, bucket, o.batch_queue_tokens);
        redisFree(c);
        return rc;
    }
    if ((is_set || is_unset) && o.endpoint != NULL) {
        /* first: an unknown endpoint changes nothing */
        rc = endpoint_serve(cli, c, prefix, o.endpoint, model, o.deployment, is_set);
        if (rc != LLMQ_EXIT_OK) {
            redisFree(c);
            return rc;
        }
    }
    if (is_set) {
        int weight_only = o.weight != NULL && o.ch.n == 0 && o.ch.mode == NULL && o.ch.soft < 0;
        rc = weight_only ? LLMQ_EXIT_OK : cmd_set(cli, c, key, bucket, &o.ch);
        if (rc == LLMQ_EXIT_OK && o.weight != NULL)
            rc = set_weight(cli, c, prefix, bucket, o.weight);
        if (rc == LLMQ_EXIT_OK)
            print_in_force(c, key, bucket, prefix, o.weight != NULL);
    } else if (is_unset) {
        if (o.tenant != NULL || o.user != NULL)
            set_weight(cli, c, prefix, bucket, NULL);
        rc = cmd_unset(cli, c, key, bucket);
    } else if (set_policy) {
        rc = cmd_set(cli, c, key, NULL, &o.ch);
        if (rc == LLMQ_EXIT_OK)
            print_in_force(c, key, NULL, prefix, 0);
    } else {
        rc = cmd_get(cli, c, prefix, o.as_json);
    }
    redisFree(c);
    return rc;
}
