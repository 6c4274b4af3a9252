/* llmq status: one account (or every account with --all-accounts) at a
 * glance: per priority queued / in flight / delayed / dead, results kept,
 * bucket use against limits right now, and the consumers with their idle time.
 *
 * Everything is gathered into one JSON object (lua/status.lua for the queues,
 * the limiter's lua/usage.lua for the buckets), then printed as text or, with
 * --json, as is. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/calibration.h"
#include "cli.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/script.h"
#include "llmq/priority.h"

/* Delayed and dead jobs are counted per priority up to this many. */
#define PER_PRIO_CAP "10000"
#define MAX_BUCKETS 1000

static void usage(FILE *out)
{
    fputs("usage: llmq status [--json] [--all-accounts]\n\n"
          "Per priority: queued (not yet delivered), in flight (delivered, not\n"
          "acknowledged), delayed (waiting for backoff or a tenant bucket), dead;\n"
          "results kept; each bucket's use against its limits right now; each consumer\n"
          "of the queues with its pending jobs and idle time; the settings.\n"
          "Delayed and dead are '-' per priority when there are over " PER_PRIO_CAP " of them.\n\n"
          "Options: --json (one JSON object per account), --all-accounts, --redis URL,\n"
          "--account NAME, --help\n"
          "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
          out);
}

static long long int_of(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    if (r->type == REDIS_REPLY_STRING)
        return strtoll(r->str, NULL, 10);
    return 0;
}

static const char *str_of(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING ? r->str : "";
}

static int shape_ok(const redisReply *r, size_t min_elements)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= min_elements;
}

/* Queues, totals, consumers and settings from lua/status.lua into o. */
static int add_queues(json_t *o, const redisReply *r)
{
    if (!shape_ok(r, 4) || !shape_ok(r->element[1], 6))
        return -1;
    json_t *queues = json_object(), *consumers = json_array(), *settings = json_object();
    for (size_t i = 0; i < r->element[0]->elements; i++) {
        const redisReply *q = r->element[0]->element[i];
        if (!shape_ok(q, 5))
            continue;
        json_object_set_new(queues, str_of(q->element[0]),
                            json_pack("{s:I, s:I, s:I, s:I}", "queued", int_of(q->element[1]),
                                      "in_flight", int_of(q->element[2]), "delayed",
                                      int_of(q->element[3]), "dead", int_of(q->element[4])));
    }
    const redisReply *t = r->element[1];
    json_object_set_new(o, "queues", queues);
    json_object_set_new(o, "totals",
                        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "delayed",
                                  int_of(t->element[0]), "dead", int_of(t->element[1]),
                                  "results_kept", int_of(t->element[2]), "done_ever",
                                  int_of(t->element[3]), "dead_ever", int_of(t->element[4]),
                                  "http_429", int_of(t->element[5])));
    for (size_t i = 0; i < r->element[2]->elements; i++) {
        const redisReply *c = r->element[2]->element[i];
        if (shape_ok(c, 4))
            json_array_append_new(
                consumers, json_pack("{s:s, s:s, s:I, s:I}", "priority", str_of(c->element[0]),
                                     "name", str_of(c->element[1]), "pending",
                                     int_of(c->element[2]), "idle_ms", int_of(c->element[3])));
    }
    const redisReply *s = r->element[3];
    for (size_t i = 0; s->type == REDIS_REPLY_ARRAY && i + 1 < s->elements; i += 2)
        json_object_set_new(settings, str_of(s->element[i]),
                            json_integer(int_of(s->element[i + 1])));
    json_object_set_new(o, "consumers", consumers);
    json_object_set_new(o, "settings", settings);
    return 0;
}

/* The id of lua/usage.lua (the limiter's), or -1 when it is not built in. */
static int usage_script(void)
{
    for (int i = 0; i < LLMQ_SCRIPT_COUNT; i++)
        if (strcmp(llmq_scripts[i].name, "usage") == 0)
            return i;
    return -1;
}

/* Bucket names with a limit: SCAN P limit:*. Fills names (new strings). */
static size_t scan_buckets(redisContext *c, const char *prefix, char **names, size_t max)
{
    char cursor[32] = "0";
    size_t n = 0, plen = strlen(prefix) + strlen("limit:");
    do {
        redisReply *r = redisCommand(c, "SCAN %s MATCH %slimit:* COUNT 500", cursor, prefix);
        if (!shape_ok(r, 2) || r->element[0]->type != REDIS_REPLY_STRING) {
            if (r != NULL)
                freeReplyObject(r);
            break;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements && n < max; i++) {
            const char *k = str_of(r->element[1]->element[i]);
            names[n] = strlen(k) > plen ? strdup(k + plen) : NULL;
            n += names[n] != NULL;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && n < max);
    return n;
}

/* Bucket use vs limits, from the limiter's usage script, into o["buckets"]. */
static void add_buckets(json_t *o, redisContext *c, const char *prefix)
{
    int script = usage_script();
    json_t *buckets = json_array();
    json_object_set_new(o, "buckets", buckets);
    char **names = calloc(MAX_BUCKETS, sizeof(*names));
    size_t n = names && script >= 0 ? scan_buckets(c, prefix, names, MAX_BUCKETS) : 0;
    const char **argv = calloc(n + 1, sizeof(*argv));
    if (n > 0 && argv != NULL) {
        argv[0] = prefix;
        for (size_t i = 0; i < n; i++)
            argv[i + 1] = names[i];
        redisReply *r =
            llmq_script_run(c, (enum llmq_script_id)script, 1, (int)n + 1, argv, NULL, NULL);
        for (size_t i = 0; shape_ok(r, 1) && i < r->elements; i++) {
            const redisReply *b = r->element[i];
            if (shape_ok(b, 7))
                json_array_append_new(
                    buckets,
                    json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "name", str_of(b->element[0]),
                              "requests_used", int_of(b->element[1]), "tokens_used",
                              int_of(b->element[2]), "requests_limit", int_of(b->element[3]),
                              "tokens_limit", int_of(b->element[4]), "period_ms",
                              int_of(b->element[5]), "paused_ms", int_of(b->element[6])));
        }
        if (r != NULL)
            freeReplyObject(r);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(argv);
}

/* Gathers the status of one account; NULL (error printed) on failure. */
/* 429s that were insufficient_quota (not rate limits: those jobs are dead),
 * and how far the workers' prompt-token estimates were from the real usage,
 * per model (calibration.h). */
static void add_quota_and_calibration(json_t *o, redisContext *c, const char *account,
                                      const char *prefix)
{
    redisReply *r = redisCommand(c, "HGET %sstats insufficient_quota", prefix);
    long long quota = r != NULL && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
    if (r != NULL)
        freeReplyObject(r);
    json_object_set_new(json_object_get(o, "totals"), "insufficient_quota", json_integer(quota));
    struct llmq_calib_stats *st = NULL;
    size_t n = 0;
    json_t *cal = json_array();
    if (llmq_calib_read(c, account, &st, &n, NULL) == LLMQ_OK) {
        for (size_t i = 0; i < n; i++)
            json_array_append_new(
                cal, json_pack("{s:s, s:I, s:f, s:f, s:f}", "model", st[i].model, "samples",
                               (json_int_t)st[i].samples, "bias_pct", st[i].bias_pct,
                               "mean_abs_pct", st[i].mean_abs_pct, "stddev_rel_pct",
                               st[i].stddev_rel_pct));
        free(st);
    }
    json_object_set_new(o, "calibration", cal);
}

static json_t *gather(const struct llmq_cli *cli, redisContext *c, const char *account)
{
    char prefix[LLMQ_KEY_PREFIX_MAX];
    struct llmq_error err = {0};
    if (llmq_account_prefix(account, prefix, sizeof(prefix), &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return NULL;
    }
    const char *argv[] = {prefix, PER_PRIO_CAP};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_STATUS, 1, 2, argv, NULL, &err);
    json_t *o = json_pack("{s:s}", "account", account);
    if (r == NULL || add_queues(o, r) != 0) {
        llmq_cli_error(cli, "status: %s",
                       r == NULL                      ? err.msg
                       : r->type == REDIS_REPLY_ERROR ? r->str
                                                      : "unexpected reply");
        json_decref(o);
        o = NULL;
    }
    if (r != NULL)
        freeReplyObject(r);
    if (o != NULL) {
        add_buckets(o, c, prefix);
        add_quota_and_calibration(o, c, account, prefix);
    }
    return o;
}

static void fmt_limit(char *buf, size_t n, long long used, long long limit)
{
    if (limit < 0)
        snprintf(buf, n, "%lld/-", used);
    else
        snprintf(buf, n, "%lld/%lld (%lld%%)", used, limit, limit ? used * 100 / limit : 0);
}

static void print_text(const json_t *o)
{
    json_t *t = json_object_get(o, "totals"), *v;
    size_t i;
    printf("account %s\n  %-8s %10s %10s %10s %10s\n",
           json_string_value(json_object_get(o, "account")), "priority", "queued", "in_flight",
           "delayed", "dead");
    for (i = 0; i < LLMQ_PRIORITY_COUNT; i++) {
        const char *prio = llmq_priority_name(llmq_priority_by_rank((int)i));
        json_t *q = json_object_get(json_object_get(o, "queues"), prio);
        char d[24], x[24];
        long long dl = json_integer_value(json_object_get(q, "delayed"));
        long long de = json_integer_value(json_object_get(q, "dead"));
        snprintf(d, sizeof(d), dl < 0 ? "-" : "%lld", dl);
        snprintf(x, sizeof(x), de < 0 ? "-" : "%lld", de);
        printf("  %-8s %10lld %10lld %10s %10s\n", prio,
               (long long)json_integer_value(json_object_get(q, "queued")),
               (long long)json_integer_value(json_object_get(q, "in_flight")), d, x);
    }
    printf("  delayed %lld, dead %lld, results kept %lld; ended ever: %lld done, %lld dead; "
           "429s seen %lld\n",
           (long long)json_integer_value(json_object_get(t, "delayed")),
           (long long)json_integer_value(json_object_get(t, "dead")),
           (long long)json_integer_value(json_object_get(t, "results_kept")),
           (long long)json_integer_value(json_object_get(t, "done_ever")),
           (long long)json_integer_value(json_object_get(t, "dead_ever")),
           (long long)json_integer_value(json_object_get(t, "http_429")));
    long long quota = json_integer_value(json_object_get(t, "insufficient_quota"));
    if (quota > 0)
        printf("  %lld of those 429s were insufficient_quota: the account is out of credit; "
               "those jobs were dead-lettered\n",
               quota);
    printf("  buckets (used/limit now):%s\n",
           json_array_size(json_object_get(o, "buckets")) ? "" : " none with limits");
    json_array_foreach(json_object_get(o, "buckets"), i, v)
    {
        char rq[64], tk[64];
        fmt_limit(rq, sizeof(rq), json_integer_value(json_object_get(v, "requests_used")),
                  json_integer_value(json_object_get(v, "requests_limit")));
        fmt_limit(tk, sizeof(tk), json_integer_value(json_object_get(v, "tokens_used")),
                  json_integer_value(json_object_get(v, "tokens_limit")));
        printf("    %-30s requests %-22s tokens %-28s per %lld ms%s\n",
               json_string_value(json_object_get(v, "name")), rq, tk,
               (long long)json_integer_value(json_object_get(v, "period_ms")),
               json_integer_value(json_object_get(v, "paused_ms")) > 0 ? ", paused" : "");
    }
    printf("  prompt-token estimates vs real usage (+: estimate low):%s\n",
           json_array_size(json_object_get(o, "calibration")) ? "" : " no samples yet");
    json_array_foreach(json_object_get(o, "calibration"), i, v)
        printf("    %-30s %6lld samples  bias %+.1f%%  mean |error| %.1f%%  sd %.1f%%\n",
               json_string_value(json_object_get(v, "model")),
               (long long)json_integer_value(json_object_get(v, "samples")),
               json_real_value(json_object_get(v, "bias_pct")),
               json_real_value(json_object_get(v, "mean_abs_pct")),
               json_real_value(json_object_get(v, "stddev_rel_pct")));
    printf("  consumers:%s\n", json_array_size(json_object_get(o, "consumers")) ? "" : " none");
    json_array_foreach(json_object_get(o, "consumers"), i, v)
        printf("    %-30s %-6s pending %-6lld idle %.1f s\n",
               json_string_value(json_object_get(v, "name")),
               json_string_value(json_object_get(v, "priority")),
               (long long)json_integer_value(json_object_get(v, "pending")),
               (double)json_integer_value(json_object_get(v, "idle_ms")) / 1000.0);
}

/* Every account that has a queue: SCAN llmq:{*}:q:normal. New strings. */
static size_t scan_accounts(redisContext *c, char **names, size_t max)
{
    char cursor[32] = "0";
    size_t n = 0;
    do {
        redisReply *r = redisCommand(c, "SCAN %s MATCH llmq:{*}:q:normal COUNT 1000", cursor);
        if (!shape_ok(r, 2) || r->element[0]->type != REDIS_REPLY_STRING) {
            if (r != NULL)
                freeReplyObject(r);
            break;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements && n < max; i++) {
            const char *k = str_of(r->element[1]->element[i]) + strlen("llmq:{");
            const char *end = strstr(k, "}:q:normal");
            names[n] = end != NULL ? strndup(k, (size_t)(end - k)) : NULL;
            n += names[n] != NULL;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && n < max);
    return n;
}

static int show(const struct llmq_cli *cli, redisContext *c, const char *account, int as_json)
{
    json_t *o = gather(cli, c, account);
    if (o == NULL)
        return LLMQ_EXIT_FAIL;
    if (as_json) {
        char *s = json_dumps(o, JSON_COMPACT);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
    } else {
        print_text(o);
    }
    json_decref(o);
    return LLMQ_EXIT_OK;
}

int llmq_cmd_status(struct llmq_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"all-accounts", no_argument, NULL, 'A'},
                                         LLMQ_CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    int opt, as_json = 0, all = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return LLMQ_EXIT_OK;
        }
        if (opt == 'j' || opt == 'A')
            *(opt == 'j' ? &as_json : &all) = 1;
        else if (!llmq_cli_common_option(cli, opt, optarg))
            return LLMQ_EXIT_USAGE;
    }
    if (optind != argc) {
        usage(stderr);
        return LLMQ_EXIT_USAGE;
    }
    redisContext *c = llmq_cli_connect(cli);
    if (c == NULL)
        return LLMQ_EXIT_FAIL;
    int code = LLMQ_EXIT_OK;
    if (!all) {
        code = show(cli, c, cli->account, as_json);
    } else {
        char *names[MAX_BUCKETS];
        size_t n = scan_accounts(c, names, MAX_BUCKETS);
        for (size_t i = 0; i < n; i++) {
            if (show(cli, c, names[i], as_json) != LLMQ_EXIT_OK)
                code = LLMQ_EXIT_FAIL;
            free(names[i]);
        }
    }
    redisFree(c);
    return code;
}
