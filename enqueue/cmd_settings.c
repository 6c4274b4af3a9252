/* llmq settings: the retention and enqueue settings of an account, kept in
 * the HASH P settings (fields in common/redis/keys.h). Scripts read them on every
 * use, so a change applies at once; an unset field falls back to its default. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "jobs/job.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/script.h"

#define LLMQ_SETTING_MAX (1LL << 50)

struct setting {
    const char *name;
    long long def;
    long long min, max;
    const char *what;
};

/* Defaults must match JOBS_DEFAULTS in lua/lib/jobs.lua (which applies
 * them) and LLMQ_JOB_MAX_BODY_BYTES_DEFAULT (enqueue's check). */
static const struct setting settings[] = {
    {"result_ttl_ms", 7LL * 24 * 3600 * 1000, 1000, LLMQ_SETTING_MAX,
     "keep done results this long (ms)"},
    {"result_max", 1000000, 1, LLMQ_SETTING_MAX, "keep at most this many done results"},
    {"events_max", 100000, 1000, LLMQ_SETTING_MAX, "approximate length of the events stream"},
    {"events_ttl_ms", 24LL * 3600 * 1000, 1000, LLMQ_SETTING_MAX,
     "keep events (for waiters) this long (ms)"},
    {"max_body_bytes", LLMQ_JOB_MAX_BODY_BYTES_DEFAULT, 1, LLMQ_JOB_MAX_BODY_BYTES_LIMIT,
     "enqueue: request body size limit"},
};
#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

/* The fields, for --help. */
static void print_fields(FILE *out)
{
    fputs("Fields:\n", out);
    for (size_t i = 0; i < N_SETTINGS; i++)
        fprintf(out, "  %-16s %s (default %lld)\n", settings[i].name, settings[i].what,
                settings[i].def);
}

static const struct llmq_cli_opt options[] = {LLMQ_CLI_OPT_END};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq settings [get [FIELD]]\n"
             "       llmq settings set FIELD VALUE\n"
             "       llmq settings unset FIELD\n",
    .about = "Shows or changes an account's settings (integers); unset restores the default.\n",
    .more = print_fields,
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

static const struct setting *find(const char *name)
{
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (strcmp(settings[i].name, name) == 0)
            return &settings[i];
    return NULL;
}

static int show(const struct llmq_cli *cli, redisContext *c, const char *prefix, const char *only)
{
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_SETTINGS, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    for (size_t i = 0; i < N_SETTINGS; i++) {
        if (only != NULL && strcmp(only, settings[i].name) != 0)
            continue;
        redisReply *r = redisCommand(c, "HGET %s %s", key, settings[i].name);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            llmq_cli_error(cli, "HGET settings: %s", r ? r->str : llmq_redis_context_error(c));
            if (r != NULL)
                freeReplyObject(r);
            return LLMQ_EXIT_FAIL;
        }
        if (r->type == REDIS_REPLY_STRING)
            printf("%s %s\n", settings[i].name, r->str);
        else
            printf("%s %lld (default)\n", settings[i].name, settings[i].def);
        freeReplyObject(r);
    }
    return LLMQ_EXIT_OK;
}

static int change(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                  const struct setting *s, const char *value)
{
    long long v = 0;
    redisReply *r;
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_SETTINGS, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    if (value != NULL) {
        if (llmq_cli_parse_int64(cli, s->name, value, s->min, s->max, &v) != 0)
            return LLMQ_EXIT_USAGE;
        r = redisCommand(c, "HSET %s %s %lld", key, s->name, v);
    } else {
        r = redisCommand(c, "HDEL %s %s", key, s->name);
    }
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
    if (!ok)
        llmq_cli_error(cli, "settings: %s",
                       r && r->type == REDIS_REPLY_ERROR ? r->str
                       : c->err                          ? llmq_redis_context_error(c)
                                                         : "bad reply");
    if (r != NULL)
        freeReplyObject(r);
    return ok ? show(cli, c, prefix, s->name) : LLMQ_EXIT_FAIL;
}

/* What settings does once checked: get (value NULL, unset 0), set or unset
 * of setting s (NULL: get all). */
struct settings_cmd {
    const struct setting *s;
    const char *value;
    int change;
};

static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct settings_cmd *k = ud;
    return k->change ? change(cli, c, prefix, k->s, k->value)
                     : show(cli, c, prefix, k->s ? k->s->name : NULL);
}

int llmq_cmd_settings(struct llmq_cli *cli, int argc, char **argv)
{
    char *pos[3];
    int n = 0;
    int code = llmq_cli_parse(cli, &spec, argc, argv, NULL, pos, 3, &n);
    if (code >= 0)
        return code;
    const char *verb = n > 0 ? pos[0] : "get";
    const char *field = n > 1 ? pos[1] : NULL;
    int set = strcmp(verb, "set") == 0, unset = strcmp(verb, "unset") == 0;
    if (!set && !unset && strcmp(verb, "get") != 0) {
        llmq_cli_error(cli, "unknown subcommand '%s' (get, set or unset; see --help)", verb);
        return LLMQ_EXIT_USAGE;
    }
    if ((set && n != 3) || (unset && n != 2) || (!set && n == 3)) {
        llmq_cli_error(cli, "%s",
                       set     ? "set takes FIELD VALUE"
                       : unset ? "unset takes FIELD"
                               : "get takes at most FIELD");
        return LLMQ_EXIT_USAGE;
    }
    const struct setting *s = field ? find(field) : NULL;
    if (field != NULL && s == NULL) {
        llmq_cli_error(cli, "unknown setting '%s' (see --help)", field);
        return LLMQ_EXIT_USAGE;
    }
    if (set) {
        long long v = 0; /* checked before connecting: a bad value is a usage error */
        if (llmq_cli_parse_int64(cli, s->name, pos[2], s->min, s->max, &v) != 0)
            return LLMQ_EXIT_USAGE;
    }
    struct settings_cmd k = {s, set ? pos[2] : NULL, set || unset};
    return llmq_cli_on_account(cli, act, &k);
}
