/* llmq endpoints: the places a model can be called (docs/DESIGN.md §3.9):
 * add, change, remove, enable, disable and list an account's endpoints, and
 * set a model's routing strategy and fallback. Every change is one call of
 * lua/endpoint_admin.lua (atomic); list reads lua/endpoint_list.lua. No API
 * key is ever given here: workers hold them (llmq-worker --endpoint-key). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_opts.h"
#include "redis/script.h"

#define MAX_FIELDS 14

struct ep_opts {
    const struct llmq_cli *cli;
    const char *fields[MAX_FIELDS];
    char values[MAX_FIELDS][1100];
    int n;
    const char *reason;
    int as_json;
};

static void put(struct ep_opts *o, const char *field, const char *value)
{
    int k = 0; /* a repeated option: the last one wins */
    while (k < o->n && strcmp(o->fields[k], field) != 0)
        k++;
    o->fields[k] = field;
    snprintf(o->values[k], sizeof(o->values[k]), "%s", value);
    o->n += k == o->n;
}

/* The base URL as stored: http(s) only, no trailing '/' or "/v1" (the
 * worker adds the request's path). 0, or an exit code after a message. */
static int put_base_url(struct ep_opts *o, const char *url)
{
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        llmq_cli_error(o->cli, "--base-url: must start with http:// or https://, got '%s'", url);
        return LLMQ_EXIT_USAGE;
    }
    char buf[1100];
    size_t len = strlen(url);
    if (len >= sizeof(buf) - 1 || strpbrk(url, " \t\r\n?#") != NULL) {
        llmq_cli_error(o->cli, "--base-url: at most 1024 bytes, no spaces, query or fragment");
        return LLMQ_EXIT_USAGE;
    }
    memcpy(buf, url, len + 1);
    while (len > 0 && buf[len - 1] == '/')
        buf[--len] = '\0';
    if (len >= 3 && strcmp(buf + len - 3, "/v1") == 0)
        buf[len - 3] = '\0';
    put(o, "base_url", buf);
    return 0;
}

/* The options that set a numeric field of the endpoint, and their ranges. */
static const struct {
    const char *name, *field;
    long long min, max;
} numeric_fields[] = {
    {"--tier", "tier", 1, 1000},
    {"--fail-threshold", "fail_threshold", 1, 1000000},
    {"--fail-window-ms", "fail_window_ms", 1, 86400000},
    {"--cooldown-ms", "cooldown_ms", 1, 86400000},
    {"--cooldown-max-ms", "cooldown_max_ms", 1, 86400000},
    {"--probe-ms", "probe_ms", 100, 86400000},
    {"--batch-max-requests", "batch_max_requests", 1, 10000000},
    {"--batch-max-bytes", "batch_max_bytes", 1024, 100000000000LL},
};

static int take_number(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    struct ep_opts *o = target;
    for (size_t i = 0; i < sizeof(numeric_fields) / sizeof(numeric_fields[0]); i++) {
        long long v = 0;
        char num[32];
        if (strcmp(numeric_fields[i].name, name) != 0)
            continue;
        if (llmq_cli_parse_int64(cli, name, arg, numeric_fields[i].min, numeric_fields[i].max,
                                 &v) != 0)
            return LLMQ_EXIT_USAGE;
        snprintf(num, sizeof(num), "%lld", v);
        put(o, numeric_fields[i].field, num);
        return 0;
    }
    llmq_cli_error(cli, "%s: no field of an endpoint", name); /* a table out of step */
    return LLMQ_EXIT_FAIL;
}

static int take_base_url(const struct llmq_cli *cli, const char *name, const char *arg,
                         void *target)
{
    (void)cli, (void)name;
    return put_base_url(target, arg);
}

static int take_azure(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    if (arg[0] == '\0' || strlen(arg) > 40 || strpbrk(arg, " &?#/") != NULL) {
        llmq_cli_error(cli, "%s: expected a version such as 2024-10-21, got '%s'", name, arg);
        return LLMQ_EXIT_USAGE;
    }
    put(target, "api_version", arg);
    put(target, "kind", "azure");
    return 0;
}

static int take_kind(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    if (strcmp(arg, "openai") != 0 && strcmp(arg, "azure") != 0 && strcmp(arg, "compatible") != 0) {
        llmq_cli_error(cli, "%s: expected openai, azure or compatible, got '%s'", name, arg);
        return LLMQ_EXIT_USAGE;
    }
    put(target, "kind", arg);
    return 0;
}

static int take_weight(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    const char *weight = NULL;
    int code = llmq_cli_take_weight(cli, name, arg, &weight);
    if (code == 0)
        put(target, "weight", weight);
    return code;
}

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_CALL_ALL("base-url", "URL", take_base_url,
                          "add, set: the endpoint's base URL (http or https)"),
    LLMQ_CLI_OPT_CALL_ALL("tier", "K", take_number,
                          "add, set: spillover tier, 1..1000 (default 1; lowest first)"),
    LLMQ_CLI_OPT_CALL_ALL("weight", "W", take_weight,
                          "add, set: balanced routing weight, 0.001..1000000 (default 1)"),
    LLMQ_CLI_OPT_CALL_ALL("azure-api-version", "V", take_azure,
                          "add, set: an Azure OpenAI resource with this api-version"),
    LLMQ_CLI_OPT_CALL_ALL("kind", "openai|azure|compatible", take_kind,
                          "add, set: what the endpoint is (default openai)"),
    LLMQ_CLI_OPT_CALL_ALL("fail-threshold", "N", take_number,
                          "add, set: failures that cool the endpoint (default 5)"),
    LLMQ_CLI_OPT_CALL_ALL("fail-window-ms", "MS", take_number,
                          "add, set: the window they are counted in (default 10000)"),
    LLMQ_CLI_OPT_CALL_ALL("cooldown-ms", "MS", take_number,
                          "add, set: the first cool-down (default 1000)"),
    LLMQ_CLI_OPT_CALL_ALL("cooldown-max-ms", "MS", take_number,
                          "add, set: the longest cool-down (default 60000)"),
    LLMQ_CLI_OPT_CALL_ALL("probe-ms", "MS", take_number,
                          "add, set: how long a probe's answer is awaited (default 30000)"),
    LLMQ_CLI_OPT_CALL_ALL("batch-max-requests", "N", take_number,
                          "add, set: offload's lines per input file (default 50000)"),
    LLMQ_CLI_OPT_CALL_ALL("batch-max-bytes", "N", take_number,
                          "add, set: offload's bytes per input file (default 200000000)"),
    LLMQ_CLI_OPT_STR("reason", "TEXT", struct ep_opts, reason, "disable: why, shown by list"),
    LLMQ_CLI_OPT_FLAG("json", struct ep_opts, as_json, "list as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq endpoints add NAME --base-url URL [--tier K] [--weight W]\n"
             "                          [--azure-api-version V] [--kind openai|azure|compatible]\n"
             "                          [--fail-threshold N] [--fail-window-ms MS]\n"
             "                          [--cooldown-ms MS] [--cooldown-max-ms MS] [--probe-ms MS]\n"
             "                          [--batch-max-requests N] [--batch-max-bytes N]\n"
             "       llmq endpoints set NAME [the options of add]\n"
             "       llmq endpoints rm NAME\n"
             "       llmq endpoints enable NAME\n"
             "       llmq endpoints disable NAME [--reason TEXT]\n"
             "       llmq endpoints list [--json]\n"
             "       llmq endpoints routing MODEL spillover|balanced|fastest\n"
             "       llmq endpoints fallback MODEL FALLBACK_MODEL|none\n",
    .about = "An endpoint is one place a model can be called: an OpenAI org or project key,\n"
             "an Azure OpenAI resource (--azure-api-version: api-key auth, the deployment path\n"
             "/openai/deployments/DEP; --base-url may also be a deployment URL), any\n"
             "OpenAI-compatible server. It serves a model once it has limits for it:\n"
             "`llmq limits set MODEL --endpoint NAME --rpm N --tpm N [--deployment DEP]`.\n"
             "Workers call it with the key they are given for it\n"
             "(`llmq-worker --endpoint-key NAME=ENV_VAR`); Redis never holds a key.\n"
             "Dispatch picks among a model's endpoints with room by its routing:\n"
             "spillover (default: lowest --tier first, the next tier only when it would\n"
             "make the job wait), balanced (the most remaining budget,\n"
             "times --weight), fastest (lowest recent latency). --tier 1.. (default 1),\n"
             "--weight 0.001..1000000 (default 1).\n"
             "Health: --fail-threshold failures (5xx, timeouts, refused or reset; default 5)\n"
             "within --fail-window-ms (10000) cool the endpoint for --cooldown-ms (1000),\n"
             "doubling up to --cooldown-max-ms (60000) while it keeps failing; then one probe\n"
             "request (answer awaited up to --probe-ms, 30000) decides. 401/403 and\n"
             "insufficient_quota disable it until `llmq endpoints enable NAME`.\n"
             "Offload (`llmq offload`) submits a model's provider batches to its endpoints,\n"
             "each input file within --batch-max-requests lines (default 50000) and\n"
             "--batch-max-bytes (default 200000000), OpenAI's limits; set them for Azure and\n"
             "compatible servers that take less.\n"
             "A fallback model takes a model's jobs (body's model rewritten) when every\n"
             "endpoint of the model is out, or its wait would pass a job's deadline; a job\n"
             "runs there only within its spend budgets at the fallback's price, and is\n"
             "charged that price and its cost as the fallback.\n"
             "With no endpoint for a model, the workers' own --base-url and key serve it\n"
             "(the implicit endpoint), with the model's own limits.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error, an unknown endpoint, a bad value.\n",
};

/* Runs endpoint_admin with argv[1..argc) after the prefix; prints the
 * script's error. Returns an exit code. */
static int admin(const struct llmq_cli *cli, redisContext *c, const char *prefix, int argc,
                 const char **argv)
{
    struct llmq_error err = {0};
    argv[0] = prefix;
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_ENDPOINT_ADMIN, 1, argc, argv, NULL, &err);
    int code = LLMQ_EXIT_OK;
    if (r == NULL) {
        llmq_cli_error(cli, "%s", err.msg);
        code = LLMQ_EXIT_FAIL;
    } else if (r->type == REDIS_REPLY_ERROR) {
        const char *m = strstr(r->str, "LLMQ_");
        const char *text = m ? strchr(m, ' ') : NULL;
        llmq_cli_error(cli, "%s", text ? text + 1 : r->str);
        code = m ? LLMQ_EXIT_USAGE : LLMQ_EXIT_FAIL;
    }
    if (r != NULL)
        freeReplyObject(r);
    return code;
}

/* lua/endpoint_list.lua's JSON (new), or NULL after a message. */
json_t *llmq_cli_endpoints(redisContext *c, const char *prefix, struct llmq_error *err)
{
    const char *argv[1] = {prefix};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_ENDPOINT_LIST, 1, 1, argv, NULL, err);
    json_t *o = NULL;
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        o = json_loadb(r->str, r->len, 0, NULL);
    else if (r != NULL)
        llmq_error_set(err, LLMQ_ESCRIPT, "endpoint_list: %s",
                       r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    if (r != NULL)
        freeReplyObject(r);
    return o;
}

static long long int_of(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? (long long)json_number_value(v) : 0;
}

static const char *str_of(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

void llmq_cli_endpoint_state(const json_t *e, long long now_ms, char *buf, size_t n)
{
    const char *state = str_of(e, "state");
    if (strcmp(state, "cooling") == 0)
        snprintf(buf, n, "cooling for %lld ms (%s)", int_of(e, "cool_until_ms") - now_ms,
                 str_of(e, "why"));
    else if (strcmp(state, "probing") == 0)
        snprintf(buf, n, "probing (one request in flight)");
    else if (strcmp(state, "disabled") == 0)
        snprintf(buf, n, "disabled: %s", str_of(e, "why"));
    else if (json_is_true(json_object_get(e, "probe_next")))
        snprintf(buf, n, "ok (cooled down after %s; its next request is a probe)",
                 str_of(e, "why"));
    else
        snprintf(buf, n, "ok");
}

void llmq_cli_endpoints_print(FILE *out, const json_t *o)
{
    long long now = int_of(o, "now_ms");
    size_t i, j;
    json_t *e, *m;
    const json_t *eps = json_object_get(o, "endpoints");
    if (!json_is_array(eps) || json_array_size(eps) == 0) {
        fprintf(out, "  no endpoints: every model runs on the workers' own --base-url and key\n");
        return;
    }
    json_array_foreach(eps, i, e)
    {
        char state[400];
        llmq_cli_endpoint_state(e, now, state, sizeof(state));
        fprintf(out, "  %s  %s %s%s%s  tier %lld weight %g  %s", str_of(e, "name"),
                str_of(e, "kind"), str_of(e, "base_url"),
                str_of(e, "api_version")[0] ? " api-version " : "", str_of(e, "api_version"),
                int_of(e, "tier"), json_number_value(json_object_get(e, "weight")), state);
        if (int_of(e, "lat_ms") >= 0)
            fprintf(out, "  latency %lld ms", int_of(e, "lat_ms"));
        fprintf(out, "  ok %lld failed %lld 429s %lld\n", int_of(e, "n_ok"), int_of(e, "n_fail"),
                int_of(e, "n_429"));
        json_array_foreach(json_object_get(e, "models"), j, m)
        {
            fprintf(out, "      %-24s requests %lld/", str_of(m, "model"),
                    int_of(m, "requests_used"));
            if (int_of(m, "requests_limit") >= 0)
                fprintf(out, "%lld", int_of(m, "requests_limit"));
            else
                fprintf(out, "-");
            fprintf(out, "  tokens %lld/", int_of(m, "tokens_used"));
            if (int_of(m, "tokens_limit") >= 0)
                fprintf(out, "%lld", int_of(m, "tokens_limit"));
            else
                fprintf(out, "-");
            fprintf(out, " per %lld ms", int_of(m, "period_ms"));
            if (strcmp(str_of(m, "deployment"), str_of(m, "model")) != 0)
                fprintf(out, "  deployment %s", str_of(m, "deployment"));
            if (int_of(m, "paused_ms") > 0)
                fprintf(out, "  paused %lld ms", int_of(m, "paused_ms"));
            fprintf(out, "\n");
        }
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(o, "routing"), k, v)
        fprintf(out, "  routing %s: %s\n", k, json_string_value(v));
    json_object_foreach((json_t *)json_object_get(o, "fallbacks"), k, v)
        fprintf(out, "  fallback %s -> %s\n", k, json_string_value(v));
}

static int list(const struct llmq_cli *cli, redisContext *c, const char *prefix, int as_json)
{
    struct llmq_error err = {0};
    json_t *o = llmq_cli_endpoints(c, prefix, &err);
    if (o == NULL) {
        llmq_cli_error(cli, "%s", err.msg[0] ? err.msg : "endpoint_list: no JSON reply");
        return LLMQ_EXIT_FAIL;
    }
    if (as_json) {
        /* Lua's cjson writes an empty list as {}: a list is a list here. */
        size_t i;
        json_t *e;
        if (!json_is_array(json_object_get(o, "endpoints")))
            json_object_set_new(o, "endpoints", json_array());
        json_array_foreach(json_object_get(o, "endpoints"), i,
                           e) if (!json_is_array(json_object_get(e, "models")))
            json_object_set_new(e, "models", json_array());
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s ? s : "{}");
        free(s);
    } else {
        printf("endpoints of account %s:\n", cli->account);
        llmq_cli_endpoints_print(stdout, o);
    }
    json_decref(o);
    return LLMQ_EXIT_OK;
}

struct run {
    struct ep_opts *o;
    const char *sub;
    char **pos;
    int n_pos;
};

static int run(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    struct run *r = ud;
    struct ep_opts *o = r->o;
    const char *argv[4 + 2 * MAX_FIELDS] = {0};
    int argc = 1;
    if (strcmp(r->sub, "list") == 0)
        return list(cli, c, prefix, o->as_json);
    const char *op = r->sub;
    if (strcmp(op, "routing") == 0)
        op = "route";
    argv[argc++] = op;
    for (int i = 1; i < r->n_pos; i++)
        argv[argc++] = strcmp(op, "fallback") == 0 && i == 2 && strcmp(r->pos[i], "none") == 0
                           ? ""
                           : r->pos[i];
    if (strcmp(op, "disable") == 0)
        argv[argc++] = o->reason ? o->reason : "disabled by an operator";
    for (int i = 0; i < o->n; i++) {
        argv[argc++] = o->fields[i];
        argv[argc++] = o->values[i];
    }
    int code = admin(cli, c, prefix, argc, argv);
    if (code == LLMQ_EXIT_OK)
        printf("endpoints %s %s: ok\n", r->sub, r->pos[1]);
    return code;
}

int llmq_cmd_endpoints(struct llmq_cli *cli, int argc, char **argv)
{
    struct ep_opts o = {.cli = cli};
    char *pos[4];
    int n_pos = 0;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, 4, &n_pos);
    if (rc >= 0)
        return rc;
    if (n_pos == 0) {
        llmq_cli_error(cli, "expected add, set, rm, enable, disable, list, routing or fallback "
                            "(see --help)");
        return LLMQ_EXIT_USAGE;
    }
    const char *sub = pos[0];
    static const struct {
        const char *name;
        int n_args; /* positional arguments after the subcommand */
        int takes_fields;
    } subs[] = {
        {"add", 1, 1},     {"set", 1, 1},  {"rm", 1, 0},      {"enable", 1, 0},
        {"disable", 1, 0}, {"list", 0, 0}, {"routing", 2, 0}, {"fallback", 2, 0},
    };
    int k = -1;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (strcmp(sub, subs[i].name) == 0)
            k = (int)i;
    if (k < 0) {
        llmq_cli_error(cli,
                       "unknown subcommand '%s' (add, set, rm, enable, disable, list, "
                       "routing, fallback)",
                       sub);
        return LLMQ_EXIT_USAGE;
    }
    if (n_pos - 1 != subs[k].n_args) {
        llmq_cli_error(cli, "%s takes %s (see --help)", sub,
                       subs[k].n_args == 0           ? "no argument"
                       : subs[k].n_args == 1         ? "NAME"
                       : strcmp(sub, "routing") == 0 ? "MODEL and spillover, balanced or fastest"
                                                     : "MODEL and FALLBACK_MODEL (or none)");
        return LLMQ_EXIT_USAGE;
    }
    if (!subs[k].takes_fields && o.n > 0) {
        llmq_cli_error(cli, "%s takes no endpoint options (they belong to add and set)", sub);
        return LLMQ_EXIT_USAGE;
    }
    if (strcmp(sub, "add") == 0 && (o.n == 0 || strcmp(o.fields[0], "base_url") != 0)) {
        int has = 0;
        for (int i = 0; i < o.n; i++)
            has |= strcmp(o.fields[i], "base_url") == 0;
        if (!has) {
            llmq_cli_error(cli, "add: --base-url URL is required");
            return LLMQ_EXIT_USAGE;
        }
    }
    if (strcmp(sub, "set") == 0 && o.n == 0) {
        llmq_cli_error(cli, "set: nothing to set (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (o.as_json && strcmp(sub, "list") != 0) {
        llmq_cli_error(cli, "--json belongs to 'endpoints list'");
        return LLMQ_EXIT_USAGE;
    }
    if (o.reason != NULL && strcmp(sub, "disable") != 0) {
        llmq_cli_error(cli, "--reason belongs to 'endpoints disable'");
        return LLMQ_EXIT_USAGE;
    }
    struct run r = {&o, sub, pos, n_pos};
    return llmq_cli_on_account(cli, run, &r);
}
