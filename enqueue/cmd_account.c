/* llmq account: the account pause a worker sets when the API refuses the
 * account's key (401/403; worker/auth_pause.c, key P auth_pause in keys.h).
 *   status   says whether the account is paused, since when and why;
 *   resume   lifts the pause (lua/account_resume.lua), e.g. after the key
 *            was re-enabled upstream; workers notice within seconds.
 * A worker that starts with a key other than the refused one lifts the pause
 * itself. Only the refused key's fingerprint (16 hex digits of its SHA-256)
 * is ever stored or shown. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_opts.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/script.h"

struct account_opts {
    int json;
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_FLAG("json", struct account_opts, json, "status as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq account status [--json]\n"
             "       llmq account resume\n",
    .about = "When the API refuses an account's key (401/403), the workers pause the account:\n"
             "its jobs stay queued and none is dead-lettered. status shows the pause; resume\n"
             "lifts it (workers take jobs again within seconds). A worker started with another\n"
             "key lifts it by itself.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

json_t *llmq_cli_auth_pause(redisContext *c, const char *prefix)
{
    char key[LLMQ_KEY_FIXED_MAX];
    redisReply *r = llmq_key(key, sizeof(key), prefix, LLMQ_KEY_AUTH_PAUSE, NULL, NULL) == LLMQ_OK
                        ? redisCommand(c, "HGETALL %s", key)
                        : NULL;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        if (r != NULL)
            freeReplyObject(r);
        return NULL;
    }
    json_t *o = json_object();
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const char *k = r->element[i]->str, *v = r->element[i + 1]->str;
        if (k == NULL || v == NULL)
            continue;
        if (strcmp(k, "since_ms") == 0)
            json_object_set_new(o, k, json_integer(strtoll(v, NULL, 10)));
        else if (strcmp(k, "key_id") == 0 || strcmp(k, "status") == 0 || strcmp(k, "job") == 0)
            json_object_set_new(o, k, json_string(v));
    }
    freeReplyObject(r);
    return o;
}

void llmq_cli_auth_pause_line(FILE *out, const json_t *p)
{
    char when[32] = "?";
    time_t t = (time_t)(json_integer_value(json_object_get(p, "since_ms")) / 1000);
    struct tm tm;
    if (t > 0 && gmtime_r(&t, &tm) != NULL)
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *key = json_string_value(json_object_get(p, "key_id"));
    const char *st = json_string_value(json_object_get(p, "status"));
    fprintf(out,
            "PAUSED since %s: the API refused key %s (%s); jobs stay queued. Fix the key and "
            "restart the workers, or run `llmq account resume`\n",
            when, key ? key : "?", st ? st : "?");
}

/* ud: int *, 1 for --json */
static int status(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    int as_json = *(const int *)ud;
    json_t *p = llmq_cli_auth_pause(c, prefix);
    if (c->err) {
        llmq_cli_error(cli, "redis: %s", llmq_redis_context_error(c));
        json_decref(p);
        return LLMQ_EXIT_FAIL;
    }
    if (as_json) {
        json_t *o = json_pack("{s:s, s:b, s:O?}", "account", cli->account, "paused", p != NULL,
                              "auth_pause", p);
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(o);
    } else if (p != NULL) {
        printf("account %s: ", cli->account);
        llmq_cli_auth_pause_line(stdout, p);
    } else {
        printf("account %s: active (not paused)\n", cli->account);
    }
    json_decref(p);
    return LLMQ_EXIT_OK;
}

static int resume(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    (void)ud;
    struct llmq_error err = {0};
    const char *argv[2] = {prefix, ""};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_ACCOUNT_RESUME, 1, 2, argv, NULL, &err);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        return llmq_cli_reply_failed(cli, "account resume", r, &err);
    }
    if (r->element[0]->integer == 1)
        printf("account %s: resumed (it was paused after the API refused key %s)\n", cli->account,
               r->element[1]->str ? r->element[1]->str : "?");
    else
        printf("account %s: not paused; nothing to do\n", cli->account);
    freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

int llmq_cmd_account(struct llmq_cli *cli, int argc, char **argv)
{
    struct account_opts o = {0};
    int n = 0;
    char *pos[1];
    int code = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, 1, &n);
    if (code >= 0)
        return code;
    const char *verb = n > 0 ? pos[0] : "";
    int is_status = strcmp(verb, "status") == 0, is_resume = strcmp(verb, "resume") == 0;
    if (n == 0) {
        llmq_cli_error(cli, "expected status or resume (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (!is_status && !is_resume) {
        llmq_cli_error(cli, "unknown subcommand '%s' (status or resume; see --help)", verb);
        return LLMQ_EXIT_USAGE;
    }
    if (is_resume && o.json) {
        llmq_cli_error(cli, "--json belongs to 'account status' (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    return llmq_cli_on_account(cli, is_status ? status : resume, &o.json);
}
