/* llmq limits: show and change the limits of buckets and the account's
 * limiter policy, live (workers read them on every decision).
 *
 *   llmq limits set MODEL [--rpm N] [--tpm N] [--period-ms P] [--tenant T |
 * --user U]
 *                         [--mode window|gcra] [--burst-requests N]
 * [--burst-tokens N]
 *                         [--soft | --hard] [--weight W]
 *   llmq limits unset MODEL [--tenant T | --user U]
 *   llmq limits get [--json]
 *   llmq limits policy [--headroom-low PCT] [--headroom-normal PCT]
 * [--headroom-high PCT]
 *                      [--soft-threshold PCT]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "redis/keys.h"
#include "limiter/path.h"
#include "redis/redis.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: llmq limits set MODEL [--rpm N] [--tpm N] [--period-ms P]\n"
                 "                        [--tenant T | --user U] [--mode window|gcra]\n"
                 "                        [--burst-requests N] [--burst-tokens N] [--soft "
                 "| --hard]\n"
                 "                        [--weight W]\n"
                 "       llmq limits unset MODEL [--tenant T | --user U]\n"
                 "       llmq limits get [--json]\n"
                 "       llmq limits policy [--headroom-low PCT] [--headroom-normal PCT]\n"
                 "                          [--headroom-high PCT] [--soft-threshold "
                 "PCT]\n\n"
                 "--rpm/--tpm are requests and tokens per period (default 60000 ms, "
                 "OpenAI's\n"
                 "minute). --tenant/--user '*' sets the default for every tenant/user "
                 "without a\n"
                 "limit of its own. --soft lets a tenant/user bucket borrow idle capacity "
                 "while\n"
                 "the model bucket is below the soft threshold. --weight W (with --tenant or\n"
                 "--user, default 1) is the tenant's or user's fair share of the model among\n"
                 "those with work waiting. Options common to all commands:\n"
                 "--redis URL, --account NAME.\n");
}

/* HSET/HDEL of one bucket's fields in a MULTI, so a reader never sees half. */
struct limit_change {
    const char *fields[8];
    char values[8][24];
    int n;
    const char *mode;
    int soft; /* -1 unchanged */
};

static int cmd_set(struct llmq_cli *cli, redisContext *c, const char *key,
                   const struct limit_change *ch)
{
    const char *argv[2 + 2 * 10];
    int argc = 0;
    argv[argc++] = "HSET";
    argv[argc++] = key;
    for (int i = 0; i < ch->n; i++) {
        argv[argc++] = ch->fields[i];
        argv[argc++] = ch->values[i];
    }
    if (ch->mode != NULL) {
        argv[argc++] = "mode";
        argv[argc++] = ch->mode;
    }
    if (ch->soft >= 0) {
        argv[argc++] = "soft";
        argv[argc++] = ch->soft ? "1" : "0";
    }
    if (argc == 2) {
        llmq_cli_error(cli, "nothing to set: give --rpm, --tpm, --period-ms, --mode, "
                            "--burst-*, --soft or --hard");
        return LLMQ_EXIT_USAGE;
    }
    /* The bucket hash also holds live counters; a hash that held only
     * counters may carry a TTL, which configuration must not. */
    redisAppendCommandArgv(c, argc, argv, NULL);
    redisAppendCommand(c, "PERSIST %s", key);
    redisReply *r = NULL, *p = NULL;
    if (redisGetReply(c, (void **)&r) == REDIS_OK && redisGetReply(c, (void **)&p) == REDIS_OK &&
        p != NULL)
        freeReplyObject(p);
    struct llmq_error err = {0};
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        llmq_redis_error(c, r, "HSET", &err);
        llmq_cli_error(cli, "%s", err.msg);
        if (r != NULL)
            freeReplyObject(r);
        return LLMQ_EXIT_FAIL;
    }
    freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

/* Sets (w) or drops (w NULL) the fair-share weight of tenant/user bucket
 * name in P weights (common/keys.h). */
static int set_weight(struct llmq_cli *cli, redisContext *c, const char *prefix, const char *name,
                      const char *w)
{
    char key[LLMQ_KEY_PREFIX_MAX + 16];
    snprintf(key, sizeof(key), "%sweights", prefix);
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
static const char *const config_fields[] = {"requests",       "tokens",       "period_ms", "mode",
                                            "burst_requests", "burst_tokens", "soft",      NULL};

static int is_config_field(const char *f)
{
    for (int i = 0; config_fields[i] != NULL; i++)
        if (strcmp(f, config_fields[i]) == 0)
            return 1;
    return 0;
}

/* The hash at key as a JSON object of strings; only_config keeps the
 * configuration fields. */
static json_t *read_hash(redisContext *c, const char *key, int only_config)
{
    redisReply *r = redisCommand(c, "HGETALL %s", key);
    json_t *o = json_object();
    if (r != NULL && r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            const char *f = r->element[i]->str;
            if (!only_config || is_config_field(f))
                json_object_set_new(o, f, json_string(r->element[i + 1]->str));
        }
    }
    if (r != NULL)
        freeReplyObject(r);
    return o;
}

static const char *field(json_t *o, const char *name, const char *dflt)
{
    const char *v = json_string_value(json_object_get(o, name));
    return v != NULL ? v : dflt;
}

static int cmd_get(struct llmq_cli *cli, redisContext *c, const char *prefix, int as_json)
{
    json_t *all = json_object();
    char pattern[LLMQ_KEY_PREFIX_MAX + 16];
    snprintf(pattern, sizeof(pattern), "%slimit:*", prefix);
    size_t plen = strlen(prefix) + strlen("limit:");
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(c, "SCAN %s MATCH %s COUNT 500", cursor, pattern);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            llmq_cli_error(cli, "SCAN failed: %s", c->err ? c->errstr : "bad reply");
            if (r != NULL)
                freeReplyObject(r);
            json_decref(all);
            return LLMQ_EXIT_FAIL;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const char *key = r->element[1]->element[i]->str;
            json_t *h = read_hash(c, key, 1);
            if (json_object_get(h, "requests") || json_object_get(h, "tokens"))
                json_object_set_new(all, key + plen, h);
            else
                json_decref(h); /* counters of a tenant under a default limit */
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    char policy_key[LLMQ_KEY_PREFIX_MAX + 16];
    snprintf(policy_key, sizeof(policy_key), "%spolicy", prefix);
    json_t *policy = read_hash(c, policy_key, 0);
    char weights_key[LLMQ_KEY_PREFIX_MAX + 16];
    snprintf(weights_key, sizeof(weights_key), "%sweights", prefix);
    json_t *weights = read_hash(c, weights_key, 0);
    if (as_json) {
        json_t *doc = json_pack("{s:s, s:o, s:o, s:o}", "account", cli->account, "limits", all,
                                "policy", policy, "weights", weights);
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(doc);
        return LLMQ_EXIT_OK;
    }
    printf("%-40s %10s %12s %10s %-7s %s\n", "BUCKET", "REQUESTS", "TOKENS", "PERIOD_MS", "MODE",
           "SOFT");
    const char *name;
    json_t *h;
    void *tmp;
    json_object_foreach_safe(all, tmp, name, h)
    {
        printf("%-40s %10s %12s %10s %-7s %s\n", name, field(h, "requests", "-"),
               field(h, "tokens", "-"), field(h, "period_ms", "60000"), field(h, "mode", "window"),
               strcmp(field(h, "soft", "0"), "1") == 0 ? "yes" : "no");
    }
    printf("policy: headroom high %s%% normal %s%% low %s%%, soft threshold %s%%\n",
           field(policy, "headroom_high", "100"), field(policy, "headroom_normal", "100"),
           field(policy, "headroom_low", "80"), field(policy, "soft_threshold", "80"));
    json_object_foreach_safe(weights, tmp, name, h)
    {
        printf("weight %s %s\n", name, json_string_value(h));
    }
    json_decref(weights);
    json_decref(all);
    json_decref(policy);
    return LLMQ_EXIT_OK;
}

enum {
    OPT_RPM = 1,
    OPT_TPM,
    OPT_PERIOD,
    OPT_TENANT,
    OPT_USER,
    OPT_MODE,
    OPT_BURST_REQ,
    OPT_BURST_TOK,
    OPT_SOFT,
    OPT_HARD,
    OPT_JSON,
    OPT_HR_LOW,
    OPT_HR_NORMAL,
    OPT_HR_HIGH,
    OPT_SOFT_THRESHOLD,
    OPT_WEIGHT,
};

static const struct option long_options[] = {
    {"rpm", required_argument, NULL, OPT_RPM},
    {"tpm", required_argument, NULL, OPT_TPM},
    {"period-ms", required_argument, NULL, OPT_PERIOD},
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"user", required_argument, NULL, OPT_USER},
    {"mode", required_argument, NULL, OPT_MODE},
    {"burst-requests", required_argument, NULL, OPT_BURST_REQ},
    {"burst-tokens", required_argument, NULL, OPT_BURST_TOK},
    {"soft", no_argument, NULL, OPT_SOFT},
    {"hard", no_argument, NULL, OPT_HARD},
    {"json", no_argument, NULL, OPT_JSON},
    {"headroom-low", required_argument, NULL, OPT_HR_LOW},
    {"headroom-normal", required_argument, NULL, OPT_HR_NORMAL},
    {"headroom-high", required_argument, NULL, OPT_HR_HIGH},
    {"soft-threshold", required_argument, NULL, OPT_SOFT_THRESHOLD},
    {"weight", required_argument, NULL, OPT_WEIGHT},
    LLMQ_CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* Option -> stored field name and allowed range. */
struct numeric_option {
    int opt;
    const char *name;
    const char *field;
    long long min, max;
};

static const struct numeric_option numeric_options[] = {
    {OPT_RPM, "rpm", "requests", 0, 1000000000000LL},
    {OPT_TPM, "tpm", "tokens", 0, 1000000000000LL},
    {OPT_PERIOD, "period-ms", "period_ms", 1, 86400000LL * 31},
    {OPT_BURST_REQ, "burst-requests", "burst_requests", 1, 1000000000000LL},
    {OPT_BURST_TOK, "burst-tokens", "burst_tokens", 1, 1000000000000LL},
    {OPT_HR_LOW, "headroom-low", "headroom_low", 1, 100},
    {OPT_HR_NORMAL, "headroom-normal", "headroom_normal", 1, 100},
    {OPT_HR_HIGH, "headroom-high", "headroom_high", 1, 100},
    {OPT_SOFT_THRESHOLD, "soft-threshold", "soft_threshold", 0, 100},
};

int llmq_cmd_limits(struct llmq_cli *cli, int argc, char **argv)
{
    struct limit_change ch = {.soft = -1};
    const char *tenant = NULL, *user = NULL, *weight = NULL;
    int as_json = 0, opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        if (llmq_cli_common_option(cli, opt, optarg))
            continue;
        int handled = 0;
        for (size_t i = 0; i < sizeof(numeric_options) / sizeof(numeric_options[0]); i++) {
            const struct numeric_option *no = &numeric_options[i];
            long long v;
            if (no->opt != opt)
                continue;
            if (llmq_cli_parse_int64(cli, no->name, optarg, no->min, no->max, &v) != 0)
                return LLMQ_EXIT_USAGE;
            ch.fields[ch.n] = no->field;
            snprintf(ch.values[ch.n++], sizeof(ch.values[0]), "%lld", v);
            handled = 1;
        }
        if (handled)
            continue;
        switch (opt) {
        case 'h':
            usage(stdout);
            return LLMQ_EXIT_OK;
        case OPT_TENANT:
            tenant = optarg;
            break;
        case OPT_USER:
            user = optarg;
            break;
        case OPT_SOFT:
            ch.soft = 1;
            break;
        case OPT_HARD:
            ch.soft = 0;
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        case OPT_WEIGHT: {
            char *end = NULL;
            double v = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(v >= 0.001 && v <= 1000000)) {
                llmq_cli_error(cli, "--weight: expected a number from 0.001 to 1000000, got '%s'",
                               optarg);
                return LLMQ_EXIT_USAGE;
            }
            weight = optarg;
            break;
        }
        case OPT_MODE:
            if (strcmp(optarg, "window") != 0 && strcmp(optarg, "gcra") != 0) {
                llmq_cli_error(cli, "--mode: expected window or gcra, got '%s'", optarg);
                return LLMQ_EXIT_USAGE;
            }
            ch.mode = optarg;
            break;
        default:
            usage(stderr);
            return LLMQ_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return LLMQ_EXIT_USAGE;
    }
    const char *sub = argv[optind];
    const char *model = optind + 1 < argc ? argv[optind + 1] : NULL;
    if (tenant != NULL && user != NULL) {
        llmq_cli_error(cli, "give --tenant or --user, not both");
        return LLMQ_EXIT_USAGE;
    }
    struct llmq_error err = {0};
    char prefix[LLMQ_KEY_PREFIX_MAX];
    if (llmq_cli_prefix(cli, prefix, sizeof(prefix)) != 0)
        return LLMQ_EXIT_USAGE;
    int is_set = strcmp(sub, "set") == 0, is_unset = strcmp(sub, "unset") == 0;
    char bucket[LLMQ_BUCKET_NAME_MAX];
    if (is_set || is_unset) {
        if (model == NULL) {
            llmq_cli_error(cli, "%s: MODEL is required", sub);
            return LLMQ_EXIT_USAGE;
        }
        if (llmq_bucket_name(bucket, sizeof(bucket), model, tenant, user, &err) != LLMQ_OK) {
            llmq_cli_error(cli, "%s", err.msg);
            return LLMQ_EXIT_USAGE;
        }
        if (ch.soft == 1 && tenant == NULL && user == NULL) {
            llmq_cli_error(cli, "--soft applies to tenant or user buckets; the model bucket "
                                "mirrors OpenAI's limit and is always hard");
            return LLMQ_EXIT_USAGE;
        }
        if (weight != NULL && (tenant == NULL && user == NULL)) {
            llmq_cli_error(cli, "--weight applies to a tenant or user: give --tenant or --user");
            return LLMQ_EXIT_USAGE;
        }
        if (weight != NULL && is_unset) {
            llmq_cli_error(cli, "unset drops the weight too: --weight is for set");
            return LLMQ_EXIT_USAGE;
        }
        for (int i = 0; i < ch.n; i++) {
            if (strncmp(ch.fields[i], "headroom", 8) == 0 ||
                strcmp(ch.fields[i], "soft_threshold") == 0) {
                llmq_cli_error(cli, "--%s belongs to 'llmq limits policy'", ch.fields[i]);
                return LLMQ_EXIT_USAGE;
            }
        }
    } else if (strcmp(sub, "policy") == 0) {
        if (weight != NULL) {
            llmq_cli_error(cli, "--weight belongs to 'llmq limits set'");
            return LLMQ_EXIT_USAGE;
        }
        for (int i = 0; i < ch.n; i++) {
            if (!(strncmp(ch.fields[i], "headroom", 8) == 0 ||
                  strcmp(ch.fields[i], "soft_threshold") == 0)) {
                llmq_cli_error(cli, "policy takes --headroom-* and --soft-threshold only");
                return LLMQ_EXIT_USAGE;
            }
        }
    } else if (strcmp(sub, "get") != 0) {
        llmq_cli_error(cli, "unknown subcommand '%s' (set, unset, get, policy)", sub);
        return LLMQ_EXIT_USAGE;
    }
    redisContext *c = llmq_cli_connect(cli);
    if (c == NULL)
        return LLMQ_EXIT_FAIL;
    char key[LLMQ_KEY_PREFIX_MAX + LLMQ_BUCKET_NAME_MAX + 8];
    int rc;
    if (is_set) {
        snprintf(key, sizeof(key), "%slimit:%s", prefix, bucket);
        rc = weight != NULL && ch.n == 0 && ch.mode == NULL && ch.soft < 0
                 ? LLMQ_EXIT_OK
                 : cmd_set(cli, c, key, &ch);
        if (rc == LLMQ_EXIT_OK && weight != NULL)
            rc = set_weight(cli, c, prefix, bucket, weight);
    } else if (is_unset) {
        set_weight(cli, c, prefix, bucket, NULL);
        snprintf(key, sizeof(key), "%slimit:%s", prefix, bucket);
        /* Drop the limits; the counters stay until they no longer matter. */
        redisReply *r = redisCommand(c,
                                     "HDEL %s requests tokens period_ms mode burst_requests "
                                     "burst_tokens soft",
                                     key);
        rc = r != NULL && r->type == REDIS_REPLY_INTEGER ? LLMQ_EXIT_OK : LLMQ_EXIT_FAIL;
        if (r != NULL)
            freeReplyObject(r);
        r = redisCommand(c, "PEXPIRE %s %d", key, 2 * 86400000);
        if (r != NULL)
            freeReplyObject(r);
    } else if (strcmp(sub, "policy") == 0 && ch.n > 0) {
        snprintf(key, sizeof(key), "%spolicy", prefix);
        rc = cmd_set(cli, c, key, &ch);
    } else {
        rc = cmd_get(cli, c, prefix, as_json);
    }
    redisFree(c);
    return rc;
}
