/* llmq budgets: spend budgets in tokens or USD per account, tenant, user or
 * gateway key and period (lua/lib/budget.lua decides them in dispatch;
 * lua/budget_set.lua and lua/budget_list.lua change and read them; keys in
 * common/redis/keys.h). A change applies to the next dispatch: a raise or a
 * removal runs what was parked on the budget at once. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_opts.h"
#include "cost/money.h"
#include "jobs/job.h"
#include "redis/redis.h"
#include "redis/script.h"

struct budgets_opts {
    const char *tenant, *user, *key;
    const char *tokens, *usd;
    const char *unit;          /* rm's --unit */
    int unit_tokens, unit_usd; /* --tokens/--usd, or rm's --unit */
    const char *period, *period_s;
    const char *on_exhaust;
    int json;
    /* checked */
    const char *verb;
    char **ids;
    int n_ids;
    long long limit;
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_STR("tenant", "T", struct budgets_opts, tenant, "the scope: tenant T"),
    LLMQ_CLI_OPT_STR("user", "U", struct budgets_opts, user,
                     "the scope: user U (of tenant T with --tenant)"),
    LLMQ_CLI_OPT_STR("key", "ID", struct budgets_opts, key,
                     "the scope: a gateway key (its id as `llmq keys list` shows it)"),
    LLMQ_CLI_OPT_STR("tokens", "N", struct budgets_opts, tokens, "set: a budget of N tokens"),
    LLMQ_CLI_OPT_STR("usd", "X", struct budgets_opts, usd, "set: a budget of X USD"),
    LLMQ_CLI_OPT_WORD("unit", "tokens|usd", struct budgets_opts, unit,
                      "rm: only the scope's budgets of this unit"),
    LLMQ_CLI_OPT_STR("period", "day|month", struct budgets_opts, period,
                     "per UTC calendar day or month"),
    LLMQ_CLI_OPT_STR("period-s", "S", struct budgets_opts, period_s, "per S seconds"),
    LLMQ_CLI_OPT_STR("on-exhaust", "park|dead", struct budgets_opts, on_exhaust,
                     "set: what a job that does not fit does (default park)"),
    LLMQ_CLI_OPT_FLAG("json", struct budgets_opts, json, "list as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage =
        "usage: llmq budgets set [--tenant T] [--user U] [--key ID] (--tokens N | --usd X)\n"
        "                        (--period day|month | --period-s S) [--on-exhaust park|dead]\n"
        "       llmq budgets list [--json]\n"
        "       llmq budgets rm [--tenant T] [--user U] [--key ID] [--unit tokens|usd]\n"
        "                       [--period day|month | --period-s S]\n"
        "       llmq budgets rm BUDGET...\n",
    .about = "Spend budgets: the jobs of a scope spend at most N tokens or X USD per UTC\n"
             "calendar day or month, or per S seconds. Scope: the account (no flag), a\n"
             "tenant, a user of a tenant (--tenant T --user U), a user of jobs without a\n"
             "tenant (--user U), or a gateway key (--key ID, as `llmq keys list` shows it).\n"
             "Several budgets may apply to one job; it runs only when it fits them all. A job\n"
             "is charged its worst case when it is granted (USD: prompt at the input price,\n"
             "the completion reservation at the output price) and settled to its real usage,\n"
             "so spend never exceeds a budget. A job that does not fit parks: it stays queued\n"
             "('waiting for budget' in list) and runs when the period rolls over or the\n"
             "budget is raised or removed; --on-exhaust dead dead-letters it instead (reason\n"
             "budget_exhausted). A USD budget needs a price for each model (llmq prices).\n"
             "set on an existing budget (same scope, unit and period) changes it and keeps\n"
             "this period's spend. rm takes a scope (all its budgets, or those of one unit or\n"
             "period) or budget ids as list shows them.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

/* Writes the scope of o's flags into out (resolving a key id in Redis);
 * returns 0 or an exit code (printed). */
static int scope_of(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                    const struct budgets_opts *o, char *out, size_t n)
{
    if (o->key != NULL) {
        char hash[65];
        int f = llmq_cli_gw_key_resolve(cli, c, prefix, o->key, hash);
        if (f != 0)
            return f == -1 ? LLMQ_EXIT_USAGE : LLMQ_EXIT_FAIL;
        snprintf(out, n, "k/%.16s", hash);
    } else if (o->tenant != NULL && o->user != NULL) {
        snprintf(out, n, "t/%s/u/%s", o->tenant, o->user);
    } else if (o->tenant != NULL) {
        snprintf(out, n, "t/%s", o->tenant);
    } else if (o->user != NULL) {
        snprintf(out, n, "u/%s", o->user);
    } else {
        snprintf(out, n, "account");
    }
    return 0;
}

/* The period argument of budget_set (day, month or seconds) into out. */
static void period_of(const struct budgets_opts *o, char *out, size_t n)
{
    if (o->period != NULL)
        snprintf(out, n, "%s", o->period);
    else if (o->period_s != NULL)
        snprintf(out, n, "%s", o->period_s);
    else
        out[0] = '\0';
}

static redisReply *run_set(const struct llmq_cli *cli, redisContext *c, const char **argv, int argc)
{
    struct llmq_error err = {0};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_BUDGET_SET, 1, argc, argv, NULL, &err);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        llmq_cli_error(cli, "budgets: %s", r ? r->str : err.msg);
        if (r != NULL)
            freeReplyObject(r);
        return NULL;
    }
    return r;
}

static int set(const struct llmq_cli *cli, redisContext *c, const char *prefix,
               const struct budgets_opts *o)
{
    char scope[160], period[32], limit[32];
    int rc = scope_of(cli, c, prefix, o, scope, sizeof(scope));
    if (rc != 0)
        return rc;
    period_of(o, period, sizeof(period));
    snprintf(limit, sizeof(limit), "%lld", o->limit);
    const char *argv[] = {prefix,
                          "set",
                          scope,
                          o->usd ? "usd" : "tokens",
                          limit,
                          period,
                          o->on_exhaust ? o->on_exhaust : "park"};
    redisReply *r = run_set(cli, c, argv, 7);
    if (r == NULL)
        return LLMQ_EXIT_FAIL;
    printf("budget %s set\n", r->type == REDIS_REPLY_STRING ? r->str : "?");
    freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

static int rm(const struct llmq_cli *cli, redisContext *c, const char *prefix,
              const struct budgets_opts *o)
{
    const char **argv = calloc((size_t)o->n_ids + 5, sizeof(*argv));
    char scope[160], period[32];
    if (argv == NULL)
        return LLMQ_EXIT_FAIL;
    int argc = 0;
    argv[argc++] = prefix;
    argv[argc++] = "rm";
    if (o->n_ids > 0) {
        argv[argc++] = "";
        for (int i = 0; i < o->n_ids; i++)
            argv[argc++] = o->ids[i];
    } else {
        int rc = scope_of(cli, c, prefix, o, scope, sizeof(scope));
        if (rc != 0) {
            free(argv);
            return rc;
        }
        period_of(o, period, sizeof(period));
        argv[argc++] = scope;
        argv[argc++] = o->unit_usd ? "usd" : o->unit_tokens ? "tokens" : "";
        argv[argc++] = period;
    }
    redisReply *r = run_set(cli, c, argv, argc);
    free(argv);
    if (r == NULL)
        return LLMQ_EXIT_FAIL;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        printf("budget %s removed\n", r->element[i]->str);
    int none = r->type != REDIS_REPLY_ARRAY || r->elements == 0;
    freeReplyObject(r);
    if (none) {
        llmq_cli_error(cli, "no such budget");
        return LLMQ_EXIT_USAGE;
    }
    return LLMQ_EXIT_OK;
}

/* An amount of a budget (tokens, or nano-USD when usd) as text. */
static void amount_text(int usd, long long v, char *buf, size_t n)
{
    if (usd) {
        buf[0] = '$';
        llmq_usd_format(v, buf + 1, n - 1);
    } else {
        snprintf(buf, n, "%lld", v);
    }
}

static void time_text(long long ms, char *buf, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

static long long elem_int(const redisReply *e)
{
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    return e->type == REDIS_REPLY_STRING ? strtoll(e->str, NULL, 10) : 0;
}

json_t *llmq_cli_budgets_json(redisContext *c, const char *prefix, struct llmq_error *err)
{
    const char *argv[] = {prefix};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_BUDGET_LIST, 1, 1, argv, NULL, err);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r != NULL && r->type == REDIS_REPLY_ERROR)
            llmq_error_set(err, LLMQ_ESCRIPT, "%s", r->str);
        if (r != NULL)
            freeReplyObject(r);
        return NULL;
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < r->elements; i++) {
        const redisReply *b = r->element[i];
        if (b->type != REDIS_REPLY_ARRAY || b->elements != 11)
            continue;
        int usd = strcmp(b->element[2]->str, "usd") == 0;
        long long limit = elem_int(b->element[3]), spent = elem_int(b->element[6]);
        json_t *o = json_pack(
            "{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I}", "id", b->element[0]->str, "scope",
            b->element[1]->str, "unit", b->element[2]->str, "period", b->element[4]->str,
            "on_exhaust", b->element[5]->str, "limit", (json_int_t)limit, "spent",
            (json_int_t)spent, "period_start_ms", (json_int_t)elem_int(b->element[7]),
            "period_end_ms", (json_int_t)elem_int(b->element[8]), "parked_nodes",
            (json_int_t)elem_int(b->element[9]), "waiting_jobs",
            (json_int_t)elem_int(b->element[10]));
        if (o != NULL && usd) {
            json_object_set_new(o, "limit_usd", json_real((double)limit / LLMQ_NANO_PER_USD));
            json_object_set_new(o, "spent_usd", json_real((double)spent / LLMQ_NANO_PER_USD));
        }
        json_array_append_new(arr, o);
    }
    freeReplyObject(r);
    return arr;
}

static int list(const struct llmq_cli *cli, redisContext *c, const char *prefix, int as_json)
{
    struct llmq_error err = {0};
    json_t *arr = llmq_cli_budgets_json(c, prefix, &err);
    if (arr == NULL) {
        llmq_cli_error(cli, "budgets: %s", err.msg[0] ? err.msg : llmq_redis_context_error(c));
        return LLMQ_EXIT_FAIL;
    }
    if (as_json) {
        char *s = json_dumps(arr, JSON_COMPACT);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
        json_decref(arr);
        return LLMQ_EXIT_OK;
    }
    if (json_array_size(arr) == 0)
        printf("no budgets\n");
    else
        printf("%-34s %14s %14s %6s %14s  %-19s %-6s %s\n", "BUDGET", "LIMIT", "SPENT", "USED",
               "LEFT", "ROLLS OVER (UTC)", "EXHAUST", "WAITING");
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        int usd = strcmp(json_string_value(json_object_get(o, "unit")), "usd") == 0;
        long long limit = json_integer_value(json_object_get(o, "limit"));
        long long spent = json_integer_value(json_object_get(o, "spent"));
        char lt[40], st[40], left[40], when[32];
        amount_text(usd, limit, lt, sizeof(lt));
        amount_text(usd, spent, st, sizeof(st));
        amount_text(usd, limit > spent ? limit - spent : 0, left, sizeof(left));
        time_text(json_integer_value(json_object_get(o, "period_end_ms")), when, sizeof(when));
        long long waiting = json_integer_value(json_object_get(o, "waiting_jobs"));
        char wait[48];
        if (waiting > 0)
            snprintf(wait, sizeof(wait), "%lld jobs waiting for budget", waiting);
        else
            snprintf(wait, sizeof(wait), "-");
        printf("%-34s %14s %14s %5.1f%% %14s  %-19s %-6s %s\n",
               json_string_value(json_object_get(o, "id")), lt, st,
               limit > 0 ? 100.0 * (double)spent / (double)limit : 0.0, left, when,
               json_string_value(json_object_get(o, "on_exhaust")), wait);
    }
    json_decref(arr);
    return LLMQ_EXIT_OK;
}

static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct budgets_opts *o = ud;
    if (strcmp(o->verb, "set") == 0)
        return set(cli, c, prefix, o);
    if (strcmp(o->verb, "rm") == 0)
        return rm(cli, c, prefix, o);
    return list(cli, c, prefix, o->json);
}

/* Checks the flags of set or rm (names, amounts, period); returns 0 or an
 * exit code (printed). */
static int check(const struct llmq_cli *cli, struct budgets_opts *o, int is_set)
{
    if (o->tenant != NULL && !llmq_name_valid(o->tenant)) {
        llmq_cli_error(cli, "--tenant: '%s' is not a valid name", o->tenant);
        return LLMQ_EXIT_USAGE;
    }
    if (o->user != NULL && !llmq_name_valid(o->user)) {
        llmq_cli_error(cli, "--user: '%s' is not a valid name", o->user);
        return LLMQ_EXIT_USAGE;
    }
    if (o->key != NULL && (o->tenant != NULL || o->user != NULL)) {
        llmq_cli_error(cli, "--key names a scope of its own: not with --tenant or --user");
        return LLMQ_EXIT_USAGE;
    }
    if (o->unit_tokens && o->unit_usd) {
        llmq_cli_error(cli, "give --tokens or --usd, not both");
        return LLMQ_EXIT_USAGE;
    }
    if (o->period != NULL && o->period_s != NULL) {
        llmq_cli_error(cli, "give --period or --period-s, not both");
        return LLMQ_EXIT_USAGE;
    }
    if (o->period != NULL && strcmp(o->period, "day") != 0 && strcmp(o->period, "month") != 0) {
        llmq_cli_error(cli, "--period: expected day or month, got '%s' (--period-s S for seconds)",
                       o->period);
        return LLMQ_EXIT_USAGE;
    }
    long long s = 0;
    if (o->period_s != NULL &&
        llmq_cli_parse_int64(cli, "--period-s", o->period_s, 1, 366LL * 86400, &s) != 0)
        return LLMQ_EXIT_USAGE;
    if (!is_set)
        return 0;
    if (!o->unit_tokens && !o->unit_usd) {
        llmq_cli_error(cli, "set needs --tokens N or --usd X");
        return LLMQ_EXIT_USAGE;
    }
    if (o->period == NULL && o->period_s == NULL) {
        llmq_cli_error(cli, "set needs --period day|month or --period-s S");
        return LLMQ_EXIT_USAGE;
    }
    if (o->on_exhaust != NULL && strcmp(o->on_exhaust, "park") != 0 &&
        strcmp(o->on_exhaust, "dead") != 0) {
        llmq_cli_error(cli, "--on-exhaust: expected park or dead, got '%s'", o->on_exhaust);
        return LLMQ_EXIT_USAGE;
    }
    if (o->unit_tokens)
        return llmq_cli_parse_int64(cli, "--tokens", o->tokens, 0, 1LL << 50, &o->limit) == 0
                   ? 0
                   : LLMQ_EXIT_USAGE;
    struct llmq_error err = {0};
    if (llmq_usd_parse(o->usd, 9, LLMQ_USD_MAX_NANO, "--usd", &o->limit, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return LLMQ_EXIT_USAGE;
    }
    return 0;
}

int llmq_cmd_budgets(struct llmq_cli *cli, int argc, char **argv)
{
    struct budgets_opts o = {0};
    char **pos = calloc((size_t)argc + 1, sizeof(*pos));
    int n_pos = 0;
    if (pos == NULL)
        return LLMQ_EXIT_FAIL;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, argc, &n_pos);
    if (rc >= 0)
        goto out;
    o.unit_tokens = o.tokens != NULL || (o.unit && strcmp(o.unit, "tokens") == 0);
    o.unit_usd = o.usd != NULL || (o.unit && strcmp(o.unit, "usd") == 0);
    rc = LLMQ_EXIT_USAGE;
    if (n_pos == 0) {
        llmq_cli_error(cli, "expected set, list or rm (see --help)");
        goto out;
    }
    o.verb = pos[0];
    int is_set = strcmp(o.verb, "set") == 0, is_rm = strcmp(o.verb, "rm") == 0;
    if (!is_set && !is_rm && strcmp(o.verb, "list") != 0) {
        llmq_cli_error(cli, "unknown action '%s' (set, list, rm)", o.verb);
        goto out;
    }
    if ((is_set || !is_rm) && n_pos != 1) {
        llmq_cli_error(cli, "%s takes no arguments", o.verb);
        goto out;
    }
    if (is_set && o.tokens == NULL && o.usd == NULL && (o.unit_tokens || o.unit_usd)) {
        llmq_cli_error(cli, "set takes --tokens N or --usd X, not --unit");
        goto out;
    }
    if ((is_set || is_rm) && check(cli, &o, is_set) != 0)
        goto out;
    o.ids = pos + 1;
    o.n_ids = n_pos - 1;
    rc = llmq_cli_on_account(cli, act, &o);
out:
    free(pos);
    return rc;
}
