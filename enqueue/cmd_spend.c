/* llmq spend: what done jobs used and cost, from the counters job_settle
 * keeps per UTC day (P spend:<day>, keys.h: jobs, prompt, cached prompt and
 * output tokens, nano-USD at the price in force when each job settled),
 * summed over days and grouped by model, tenant, user or day. */
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

struct spend_opts {
    const char *tenant, *user, *by, *from, *to;
    int json;
    long long from_day, to_day; /* days since 1970-01-01 */
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_NAME("tenant", "T", struct spend_opts, tenant, "only tenant T's jobs"),
    LLMQ_CLI_OPT_NAME("user", "U", struct spend_opts, user, "only user U's jobs"),
    LLMQ_CLI_OPT_WORD("by", "model|tenant|user|day", struct spend_opts, by,
                      "one row per group (default model)"),
    LLMQ_CLI_OPT_STR("from", "YYYY-MM-DD", struct spend_opts, from,
                     "the first UTC day (default: the 1st of this month)"),
    LLMQ_CLI_OPT_STR("to", "YYYY-MM-DD", struct spend_opts, to, "the last UTC day (default today)"),
    LLMQ_CLI_OPT_FLAG("json", struct spend_opts, json, "as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq spend [--tenant T] [--user U] [--by model|tenant|user|day]\n"
             "                  [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--json]\n",
    .about = "What done jobs used and cost (USD at the price of their model when they\n"
             "settled: llmq prices), summed over the UTC days --from..--to (default: this\n"
             "month so far), for one tenant and/or user (default: all), one row per group\n"
             "(--by, default model) and a total. Counters are kept 400 days.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

/* Days since the epoch of "YYYY-MM-DD", or -1 when it is not such a date. */
static long long day_parse(const char *s)
{
    int y, m, d;
    char tail;
    if (s == NULL || strlen(s) != 10 || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3 ||
        m < 1 || m > 12 || d < 1 || d > 31)
        return -1;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = d};
    time_t t = timegm(&tm);
    struct tm back;
    gmtime_r(&t, &back);
    if (back.tm_mday != d) /* 2026-02-30 */
        return -1;
    return (long long)(t / 86400);
}

static void day_text(long long day, char buf[16])
{
    time_t t = (time_t)(day * 86400);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 16, "%Y-%m-%d", &tm);
}

/* The sums of one group. */
struct spend_row {
    char name[512];
    long long n, in, cached, out, tok, nusd;
    long long hits, saved; /* response cache hits and the nano-USD they saved */
};

struct spend_table {
    struct spend_row *rows;
    size_t n, cap;
};

static struct spend_row *row_get(struct spend_table *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].name, name) == 0)
            return &t->rows[i];
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct spend_row *r = realloc(t->rows, cap * sizeof(*r));
        if (r == NULL)
            return NULL;
        t->rows = r;
        t->cap = cap;
    }
    struct spend_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    return r;
}

/* Adds one counter field "<model>|<tenant>|<user>|<kind>" of day to t when
 * it passes o's filters. */
static void add_field(struct spend_table *t, const struct spend_opts *o, const char *day,
                      const char *field, long long v)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", field);
    char *parts[4];
    char *p = buf;
    for (int i = 0; i < 4; i++) {
        parts[i] = p;
        char *bar = i < 3 ? strchr(p, '|') : NULL;
        if (i < 3 && bar == NULL)
            return;
        if (bar != NULL) {
            *bar = '\0';
            p = bar + 1;
        }
    }
    if ((o->tenant && strcmp(parts[1], o->tenant) != 0) || (o->user && strcmp(parts[2], o->user)))
        return;
    const char *group = strcmp(o->by, "day") == 0      ? day
                        : strcmp(o->by, "tenant") == 0 ? (parts[1][0] ? parts[1] : "(none)")
                        : strcmp(o->by, "user") == 0   ? NULL
                                                       : parts[0];
    char ub[300];
    if (group == NULL) {
        snprintf(ub, sizeof(ub), "%s%s%s", parts[1], parts[1][0] ? "/" : "",
                 parts[2][0] ? parts[2] : "(none)");
        group = ub;
    }
    struct spend_row *r = row_get(t, group);
    if (r == NULL)
        return;
    const char *k = parts[3];
    if (strcmp(k, "n") == 0)
        r->n += v;
    else if (strcmp(k, "in") == 0)
        r->in += v;
    else if (strcmp(k, "cached") == 0)
        r->cached += v;
    else if (strcmp(k, "out") == 0)
        r->out += v;
    else if (strcmp(k, "tok") == 0)
        r->tok += v;
    else if (strcmp(k, "nusd") == 0)
        r->nusd += v;
    else if (strcmp(k, "hits") == 0)
        r->hits += v;
    else if (strcmp(k, "saved") == 0)
        r->saved += v;
}

static int row_cmp(const void *a, const void *b)
{
    return strcmp(((const struct spend_row *)a)->name, ((const struct spend_row *)b)->name);
}

static json_t *row_json(const struct spend_row *r)
{
    return json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I,s:I,s:f}", "group", r->name, "jobs",
                     (json_int_t)r->n, "prompt_tokens", (json_int_t)r->in, "cached_tokens",
                     (json_int_t)r->cached, "completion_tokens", (json_int_t)r->out, "total_tokens",
                     (json_int_t)r->tok, "nano_usd", (json_int_t)r->nusd, "usd",
                     (double)r->nusd / LLMQ_NANO_PER_USD, "cache_hits", (json_int_t)r->hits,
                     "saved_nano_usd", (json_int_t)r->saved, "saved_usd",
                     (double)r->saved / LLMQ_NANO_PER_USD);
}

static void row_print(const struct spend_row *r)
{
    char usd[40], saved[40];
    llmq_usd_format(r->nusd, usd, sizeof(usd));
    llmq_usd_format(r->saved, saved, sizeof(saved));
    printf("%-30s %8lld %12lld %10lld %12lld %12lld %14s %8lld %14s\n", r->name, r->n, r->in,
           r->cached, r->out, r->tok, usd, r->hits, saved);
}

static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct spend_opts *o = ud;
    struct spend_table t = {0};
    struct spend_row total = {.name = "total"};
    for (long long day = o->from_day; day <= o->to_day; day++) {
        char dt[16], key[LLMQ_KEY_FIXED_MAX + 16];
        day_text(day, dt);
        if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_SPEND, dt) != 0)
            return LLMQ_EXIT_USAGE;
        redisReply *r = redisCommand(c, "HGETALL %s", key);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            llmq_cli_error(cli, "HGETALL spend: %s",
                           r && r->str ? r->str : llmq_redis_context_error(c));
            if (r != NULL)
                freeReplyObject(r);
            free(t.rows);
            return LLMQ_EXIT_FAIL;
        }
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            add_field(&t, o, dt, r->element[i]->str, strtoll(r->element[i + 1]->str, NULL, 10));
        freeReplyObject(r);
    }
    if (t.n > 0)
        qsort(t.rows, t.n, sizeof(*t.rows), row_cmp);
    for (size_t i = 0; i < t.n; i++) {
        total.n += t.rows[i].n;
        total.in += t.rows[i].in;
        total.cached += t.rows[i].cached;
        total.out += t.rows[i].out;
        total.tok += t.rows[i].tok;
        total.nusd += t.rows[i].nusd;
        total.hits += t.rows[i].hits;
        total.saved += t.rows[i].saved;
    }
    char from[16], to[16];
    day_text(o->from_day, from);
    day_text(o->to_day, to);
    if (o->json) {
        json_t *rows = json_array();
        for (size_t i = 0; i < t.n; i++)
            json_array_append_new(rows, row_json(&t.rows[i]));
        json_t *doc = json_pack("{s:s,s:s,s:s,s:o,s:o}", "from", from, "to", to, "by", o->by,
                                "rows", rows, "total", row_json(&total));
        char *s = json_dumps(doc, JSON_COMPACT);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
        json_decref(doc);
    } else {
        printf("spend %s..%s (UTC)%s%s%s%s, by %s\n", from, to, o->tenant ? ", tenant " : "",
               o->tenant ? o->tenant : "", o->user ? ", user " : "", o->user ? o->user : "", o->by);
        printf("%-30s %8s %12s %10s %12s %12s %14s %8s %14s\n", "GROUP", "JOBS", "PROMPT", "CACHED",
               "OUTPUT", "TOKENS", "USD", "HITS", "SAVED_USD");
        for (size_t i = 0; i < t.n; i++)
            row_print(&t.rows[i]);
        row_print(&total);
    }
    free(t.rows);
    return LLMQ_EXIT_OK;
}

int llmq_cmd_spend(struct llmq_cli *cli, int argc, char **argv)
{
    struct spend_opts o = {.by = "model"};
    char *pos[1];
    int n = 0;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, 0, &n);
    if (rc >= 0)
        return rc;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    long long today = (long long)(now / 86400);
    o.to_day = o.to ? day_parse(o.to) : today;
    o.from_day = o.from ? day_parse(o.from) : today - (tm.tm_mday - 1);
    if (o.from_day < 0 || o.to_day < 0) {
        llmq_cli_error(cli, "--%s: expected a date YYYY-MM-DD, got '%s'",
                       o.from_day < 0 ? "from" : "to", o.from_day < 0 ? o.from : o.to);
        return LLMQ_EXIT_USAGE;
    }
    if (o.to_day < o.from_day || o.to_day - o.from_day > 400) {
        llmq_cli_error(cli, "--from..--to must be in order and span at most 400 days");
        return LLMQ_EXIT_USAGE;
    }
    return llmq_cli_on_account(cli, act, &o);
}
