/* llmq prices: what a model's tokens cost, for USD budgets, `llmq spend` and
 * `llmq estimate`: data/prices.json's table (dated; OpenAI's standard prices
 * when it was taken), overridden per account in P prices (keys.h). Prices
 * are USD per 1M tokens on the command line and nano-USD per token in Redis
 * (cost/money.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "cost/money.h"
#include "jobs/job.h"
#include "redis/redis.h"
#include "redis/script.h"

struct prices_opts {
    const char *input, *output, *cached;
    int json;
    const char *verb, *model;
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_STR("input-usd-per-1m", "X", struct prices_opts, input,
                     "set: USD per 1M prompt tokens"),
    LLMQ_CLI_OPT_STR("output-usd-per-1m", "Y", struct prices_opts, output,
                     "set: USD per 1M completion tokens"),
    LLMQ_CLI_OPT_STR("cached-input-usd-per-1m", "Z", struct prices_opts, cached,
                     "set: USD per 1M cached prompt tokens (default the input price)"),
    LLMQ_CLI_OPT_FLAG("json", struct prices_opts, json, "list as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq prices set MODEL --input-usd-per-1m X --output-usd-per-1m Y\n"
             "                         [--cached-input-usd-per-1m Z]\n"
             "       llmq prices rm MODEL\n"
             "       llmq prices list [--json]\n",
    .about = "Prices of models in USD per 1M tokens: the table shipped in data/prices.json\n"
             "(list says when it was taken from OpenAI's price page), and the account's own,\n"
             "which win (set; rm goes back to the table). Cached input defaults to the input\n"
             "price. A model with no price cannot run under a USD budget. MODEL@batch is the\n"
             "model's price in the provider's Batch API (llmq offload; default: the table's\n"
             "batch_discount, 50%, of its price).\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

/* Prints nano-USD per token as USD per 1M tokens into buf. */
static void per_1m(long long nano_per_token, char *buf, size_t n)
{
    llmq_usd_format(nano_per_token * 1000000, buf, n);
}

/* The prices (batch: the batch prices) of model (NULL: all) as
 * llmq_cli_prices_json gives them. */
static json_t *prices_json(redisContext *c, const char *prefix, const char *model, int batch,
                           struct llmq_error *err)
{
    const char *argv[] = {prefix, model ? model : "", batch ? "batch" : ""};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_PRICE_LIST, 1, 3, argv, NULL, err);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        if (r != NULL && r->type == REDIS_REPLY_ERROR)
            llmq_error_set(err, LLMQ_ESCRIPT, "%s", r->str);
        if (r != NULL)
            freeReplyObject(r);
        return NULL;
    }
    json_t *rows = json_array();
    for (size_t i = 2; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 5)
            continue;
        json_array_append_new(rows, json_pack("{s:s,s:I,s:I,s:I,s:s}", "model", e->element[0]->str,
                                              "input", (json_int_t)e->element[1]->integer,
                                              "cached_input", (json_int_t)e->element[2]->integer,
                                              "output", (json_int_t)e->element[3]->integer,
                                              "source", e->element[4]->str));
    }
    json_t *o = json_pack("{s:s,s:s,s:s,s:o}", "taken", r->element[0]->str, "from",
                          r->element[1]->str, "unit", "nano-USD per token", "prices", rows);
    freeReplyObject(r);
    return o;
}

json_t *llmq_cli_prices_json(redisContext *c, const char *prefix, const char *model,
                             struct llmq_error *err)
{
    return prices_json(c, prefix, model, 0, err);
}

json_t *llmq_cli_batch_prices_json(redisContext *c, const char *prefix, const char *model,
                                   struct llmq_error *err)
{
    return prices_json(c, prefix, model, 1, err);
}

static int list(const struct llmq_cli *cli, redisContext *c, const char *prefix, int as_json)
{
    struct llmq_error err = {0};
    json_t *o = llmq_cli_prices_json(c, prefix, NULL, &err);
    if (o == NULL) {
        llmq_cli_error(cli, "prices: %s", err.msg[0] ? err.msg : llmq_redis_context_error(c));
        return LLMQ_EXIT_FAIL;
    }
    if (as_json) {
        char *s = json_dumps(o, JSON_COMPACT);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
        json_decref(o);
        return LLMQ_EXIT_OK;
    }
    printf("USD per 1M tokens; table taken %s from %s\n",
           json_string_value(json_object_get(o, "taken")),
           json_string_value(json_object_get(o, "from")));
    printf("%-26s %12s %14s %12s  %s\n", "MODEL", "INPUT", "CACHED INPUT", "OUTPUT", "SOURCE");
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(o, "prices"), i, row)
    {
        char in[40], ca[40], out[40];
        per_1m(json_integer_value(json_object_get(row, "input")), in, sizeof(in));
        per_1m(json_integer_value(json_object_get(row, "cached_input")), ca, sizeof(ca));
        per_1m(json_integer_value(json_object_get(row, "output")), out, sizeof(out));
        printf("%-26s %12s %14s %12s  %s\n", json_string_value(json_object_get(row, "model")), in,
               ca, out, json_string_value(json_object_get(row, "source")));
    }
    json_decref(o);
    return LLMQ_EXIT_OK;
}

static int set_or_rm(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                     const struct prices_opts *o)
{
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_PRICES, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    redisReply *r;
    if (strcmp(o->verb, "rm") == 0) {
        r = redisCommand(c, "HDEL %s %s", key, o->model);
    } else {
        long long in = 0, out = 0, cached = 0;
        struct llmq_error err = {0};
        /* checked before connecting: these cannot fail here */
        llmq_price_parse(o->input, "--input-usd-per-1m", &in, &err);
        llmq_price_parse(o->output, "--output-usd-per-1m", &out, &err);
        cached = in;
        if (o->cached != NULL)
            llmq_price_parse(o->cached, "--cached-input-usd-per-1m", &cached, &err);
        r = redisCommand(c, "HSET %s %s %lld,%lld,%lld", key, o->model, in, cached, out);
    }
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
    long long n = ok ? r->integer : 0;
    if (!ok)
        llmq_cli_error(cli, "prices: %s",
                       r && r->type == REDIS_REPLY_ERROR ? r->str : llmq_redis_context_error(c));
    if (r != NULL)
        freeReplyObject(r);
    if (!ok)
        return LLMQ_EXIT_FAIL;
    if (strcmp(o->verb, "rm") == 0 && n == 0) {
        llmq_cli_error(cli, "%s has no price of the account's own", o->model);
        return LLMQ_EXIT_USAGE;
    }
    struct llmq_error err = {0};
    json_t *p = llmq_cli_prices_json(c, prefix, o->model, &err);
    json_t *row = p ? json_array_get(json_object_get(p, "prices"), 0) : NULL;
    if (row != NULL) {
        char in[40], ca[40], out[40];
        per_1m(json_integer_value(json_object_get(row, "input")), in, sizeof(in));
        per_1m(json_integer_value(json_object_get(row, "cached_input")), ca, sizeof(ca));
        per_1m(json_integer_value(json_object_get(row, "output")), out, sizeof(out));
        printf("%s: input $%s, cached input $%s, output $%s per 1M tokens (%s)\n", o->model, in, ca,
               out, json_string_value(json_object_get(row, "source")));
    } else {
        printf("%s: no price\n", o->model);
    }
    json_decref(p);
    return LLMQ_EXIT_OK;
}

static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct prices_opts *o = ud;
    if (strcmp(o->verb, "list") == 0)
        return list(cli, c, prefix, o->json);
    return set_or_rm(cli, c, prefix, o);
}

static int check(const struct llmq_cli *cli, const struct prices_opts *o)
{
    struct llmq_error err = {0};
    long long v;
    if (o->input == NULL || o->output == NULL) {
        llmq_cli_error(cli, "set needs --input-usd-per-1m X and --output-usd-per-1m Y");
        return LLMQ_EXIT_USAGE;
    }
    if (llmq_price_parse(o->input, "--input-usd-per-1m", &v, &err) != LLMQ_OK ||
        llmq_price_parse(o->output, "--output-usd-per-1m", &v, &err) != LLMQ_OK ||
        (o->cached != NULL &&
         llmq_price_parse(o->cached, "--cached-input-usd-per-1m", &v, &err) != LLMQ_OK)) {
        llmq_cli_error(cli, "%s", err.msg);
        return LLMQ_EXIT_USAGE;
    }
    return 0;
}

int llmq_cmd_prices(struct llmq_cli *cli, int argc, char **argv)
{
    struct prices_opts o = {0};
    char *pos[3];
    int n = 0;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, 3, &n);
    if (rc >= 0)
        return rc;
    if (n == 0) {
        llmq_cli_error(cli, "expected set, rm or list (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    o.verb = pos[0];
    int is_list = strcmp(o.verb, "list") == 0, is_set = strcmp(o.verb, "set") == 0;
    if (!is_list && !is_set && strcmp(o.verb, "rm") != 0) {
        llmq_cli_error(cli, "unknown action '%s' (set, rm, list)", o.verb);
        return LLMQ_EXIT_USAGE;
    }
    if (is_list ? n != 1 : n != 2) {
        llmq_cli_error(cli, is_list ? "list takes no arguments" : "%s takes MODEL", o.verb);
        return LLMQ_EXIT_USAGE;
    }
    o.model = is_list ? NULL : pos[1];
    if (o.model != NULL && !llmq_name_valid(o.model)) {
        llmq_cli_error(cli, "'%s' is not a valid model name", o.model);
        return LLMQ_EXIT_USAGE;
    }
    if (is_set && check(cli, &o) != 0)
        return LLMQ_EXIT_USAGE;
    return llmq_cli_on_account(cli, act, &o);
}
