/* llmq estimate FILE: what a Batch file would cost and how long it would take,
 * before anything is written: its jobs checked and costed exactly as enqueue
 * does (the tokenizer's prompt count, the completion reservation, the margin),
 * priced by `llmq prices`, held against the account's limits (`llmq limits`)
 * and spend budgets (`llmq budgets`), and, for the lines that may wait the
 * provider's Batch window, what offload changes under each model's policy
 * (`llmq offload`, docs/DESIGN.md §3.10): the jobs offloaded cost the batch
 * price (price_list.lua's batch prices, lua/lib/pbatch.lua pbatch_price) and
 * take none of the live limits. Reads Redis, writes nothing. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "cli.h"
#include "cli_opts.h"
#include "cost/money.h"
#include "jobs/batch.h"
#include "jobs/job.h"
#include "redis/redis.h"

struct estimate_opts {
    const char *file, *tenant, *user;
    long long window_ms; /* --completion-window: 0 none */
    int json;
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_NAME("tenant", "T", struct estimate_opts, tenant,
                      "tenant for lines that set none (as for enqueue)"),
    LLMQ_CLI_OPT_NAME("user", "U", struct estimate_opts, user,
                      "user for lines that set none (as for enqueue)"),
    LLMQ_CLI_OPT_CALL("completion-window", "24h", struct estimate_opts, window_ms,
                      llmq_cli_take_completion_window,
                      "the lines that set none may be offloaded (as for enqueue)"),
    LLMQ_CLI_OPT_FLAG("json", struct estimate_opts, json, "as JSON"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage =
        "usage: llmq estimate FILE [--tenant T] [--user U] [--completion-window 24h] [--json]\n",
    .about = "Checks and costs a Batch file as `llmq enqueue` would, and writes nothing:\n"
             "its jobs, prompt tokens (counted as OpenAI counts them), reserved completion\n"
             "tokens, the cost range in USD (prompt only .. the full reservation: what the\n"
             "file costs lies between), and the time it takes to finish at the account's\n"
             "current limits, waiting for budget roll-overs when its worst case exceeds\n"
             "what a budget has left.\n"
             "Lines marked completion_window \"24h\" (or every line that sets none, with\n"
             "--completion-window 24h, as for enqueue) may be offloaded: per model, the\n"
             "jobs its offload policy (llmq offload) sends to the provider's Batch API,\n"
             "their cost at the batch price, and cost and time live vs under the policy\n"
             "(all: every marked job offloaded; auto: the marked jobs the live limits\n"
             "would not finish within the policy's horizon; off: none). Offloaded jobs finish\n"
             "within the provider's 24 h window.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error or invalid lines.\n",
};

/* One model of the file: its sums, price and limits. */
struct model_sum {
    const char *model; /* borrowed from the batch */
    long long jobs, prompt, completion, charged;
    int priced;
    long long in, cached, out;     /* nano-USD per token */
    long long low_nusd, high_nusd; /* prompt only; full reservation */
    long long rpm, tpm, period_ms; /* 0: no limit */
    double finish_ms;              /* at the limits' pace; -1 unlimited */
    /* offload (docs/DESIGN.md §3.10) */
    char mode[8];                 /* the model's policy: off, all, auto */
    long long horizon_s;          /* auto's horizon */
    int batch_priced;             /* bin, bcached, bout known */
    long long bin, bcached, bout; /* batch price, nano-USD per token */
    long long elig_jobs, elig_prompt, elig_completion, elig_charged; /* may wait 24 h */
    long long off_jobs, off_prompt, off_completion, off_charged;     /* offloaded */
    long long pol_low_nusd, pol_high_nusd;                           /* cost under the policy */
    double pol_finish_ms; /* the live part's time; -1 unlimited */
};

/* What a job's budget charge is (lua/lib/budget.lua budget_worst_nusd). */
static long long worst_nusd(const struct model_sum *m, const struct llmq_job *j)
{
    long long prompt = j->cost.prompt_tokens;
    if (prompt < 0 || prompt > j->cost.total_tokens)
        prompt = 0;
    long long hi = m->in > m->out ? m->in : m->out;
    return prompt * m->in + (j->cost.total_tokens - prompt) * hi;
}

/* Whether budget scope applies to job j (a file has no gateway key). */
static int scope_applies(const char *scope, const struct llmq_job *j)
{
    char buf[300];
    if (strcmp(scope, "account") == 0)
        return 1;
    if (j->tenant != NULL) {
        snprintf(buf, sizeof(buf), "t/%s", j->tenant);
        if (strcmp(scope, buf) == 0)
            return 1;
        if (j->user != NULL) {
            snprintf(buf, sizeof(buf), "t/%s/u/%s", j->tenant, j->user);
            return strcmp(scope, buf) == 0;
        }
        return 0;
    }
    if (j->user != NULL) {
        snprintf(buf, sizeof(buf), "u/%s", j->user);
        return strcmp(scope, buf) == 0;
    }
    return 0;
}

static long long reply_ll(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
}

/* Reads model m's offload policy (P offload: its mode and horizon, the
 * defaults of lua/lib/pbatch.lua when unset) and batch price. Returns 0, or
 * -1 on a Redis failure (printed). */
static int offload_read(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                        struct model_sum *m)
{
    snprintf(m->mode, sizeof(m->mode), "off");
    m->horizon_s = 1800;
    char key[LLMQ_KEY_PREFIX_MAX + 16];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_OFFLOAD, NULL) != 0)
        return -1;
    redisReply *r = redisCommand(c, "HGET %s %s", key, m->model);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        llmq_cli_error(cli, "offload: %s", r && r->str ? r->str : llmq_redis_context_error(c));
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    json_t *pol = r->type == REDIS_REPLY_STRING ? json_loads(r->str, 0, NULL) : NULL;
    freeReplyObject(r);
    const char *mode = json_string_value(json_object_get(pol, "mode"));
    if (mode != NULL && (strcmp(mode, "all") == 0 || strcmp(mode, "auto") == 0))
        snprintf(m->mode, sizeof(m->mode), "%s", mode);
    if (json_is_integer(json_object_get(pol, "horizon_s")))
        m->horizon_s = json_integer_value(json_object_get(pol, "horizon_s"));
    json_decref(pol);
    struct llmq_error err = {0};
    json_t *p = llmq_cli_batch_prices_json(c, prefix, m->model, &err);
    if (p == NULL) {
        llmq_cli_error(cli, "prices: %s", err.msg[0] ? err.msg : llmq_redis_context_error(c));
        return -1;
    }
    json_t *row = json_array_get(json_object_get(p, "prices"), 0);
    m->batch_priced = row != NULL;
    if (row != NULL) {
        m->bin = json_integer_value(json_object_get(row, "input"));
        m->bcached = json_integer_value(json_object_get(row, "cached_input"));
        m->bout = json_integer_value(json_object_get(row, "output"));
    }
    json_decref(p);
    return 0;
}

/* Reads model m's price and account+model limits. Returns 0, or -1 on a
 * Redis failure (printed). */
static int model_read(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                      struct model_sum *m)
{
    struct llmq_error err = {0};
    json_t *p = llmq_cli_prices_json(c, prefix, m->model, &err);
    if (p == NULL) {
        llmq_cli_error(cli, "prices: %s", err.msg[0] ? err.msg : llmq_redis_context_error(c));
        return -1;
    }
    json_t *row = json_array_get(json_object_get(p, "prices"), 0);
    m->priced = row != NULL;
    if (row != NULL) {
        m->in = json_integer_value(json_object_get(row, "input"));
        m->cached = json_integer_value(json_object_get(row, "cached_input"));
        m->out = json_integer_value(json_object_get(row, "output"));
    }
    json_decref(p);
    char key[LLMQ_KEY_PREFIX_MAX + 300];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_LIMIT, m->model) != 0)
        return -1;
    redisReply *r = redisCommand(c, "HMGET %s requests tokens period_ms", key);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
        llmq_cli_error(cli, "limits: %s", r && r->str ? r->str : llmq_redis_context_error(c));
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    m->rpm = reply_ll(r->element[0]);
    m->tpm = reply_ll(r->element[1]);
    m->period_ms = r->element[2]->type == REDIS_REPLY_STRING ? reply_ll(r->element[2]) : 60000;
    freeReplyObject(r);
    return offload_read(cli, c, prefix, m);
}

/* The windows of model m's limits that jobs requests and charged tokens
 * fill (0 when it has no limit). */
static double windows_of(const struct model_sum *m, long long jobs, long long charged)
{
    double windows = 0;
    if (m->rpm > 0)
        windows = (double)jobs / (double)m->rpm;
    if (m->tpm > 0 && (double)charged / (double)m->tpm > windows)
        windows = (double)charged / (double)m->tpm;
    return windows;
}

/* Time (ms) the sliding window of model m takes to admit jobs requests and
 * charged tokens: the first window's worth at once, then a window per
 * limit's worth; -1 when the model has no limit. */
static double pace_of(const struct model_sum *m, long long jobs, long long charged)
{
    if (m->rpm <= 0 && m->tpm <= 0)
        return -1;
    double windows = windows_of(m, jobs, charged);
    return windows <= 1 ? 0 : (windows - 1) * (double)m->period_ms;
}

/* Time (ms) the sliding window takes to admit the file's jobs of m. */
static double pace_ms(const struct model_sum *m)
{
    return pace_of(m, m->jobs, m->charged);
}

static void duration_text(double ms, char *buf, size_t n)
{
    long long s = (long long)ceil(ms / 1000);
    if (s < 60)
        snprintf(buf, n, "%llds", s);
    else if (s < 3600)
        snprintf(buf, n, "%lldm %02llds", s / 60, s % 60);
    else if (s < 86400 * 2)
        snprintf(buf, n, "%lldh %02lldm", s / 3600, (s % 3600) / 60);
    else
        snprintf(buf, n, "%lldd %02lldh", s / 86400, (s % 86400) / 3600);
}

static void usd_text(long long nusd, char *buf, size_t n)
{
    buf[0] = '$';
    llmq_usd_format(nusd, buf + 1, n - 1);
}

struct estimate {
    struct model_sum *models;
    size_t n_models;
    long long jobs, prompt, completion, charged, low, high;
    long long marked, offloaded, pol_low, pol_high; /* offload */
    int unpriced;
    double finish_ms; /* the slowest model; then budgets */
    json_t *budgets;  /* per budget that applies: {id, need, left, limit, ...} */
};

static struct model_sum *model_of(struct estimate *e, const char *model)
{
    for (size_t i = 0; i < e->n_models; i++)
        if (strcmp(e->models[i].model, model) == 0)
            return &e->models[i];
    return NULL;
}

/* Holds the file's worst case against each budget; sets e->budgets and
 * lengthens e->finish_ms by the roll-overs a budget must wait for. */
static void hold_budgets(struct estimate *e, const struct llmq_batch *b, json_t *budgets,
                         long long now_ms)
{
    e->budgets = json_array();
    size_t i;
    json_t *bj;
    json_array_foreach(budgets, i, bj)
    {
        const char *scope = json_string_value(json_object_get(bj, "scope"));
        int usd = strcmp(json_string_value(json_object_get(bj, "unit")), "usd") == 0;
        long long need = 0, jobs = 0, max_one = 0;
        int unpriced = 0;
        for (size_t k = 0; k < b->n_jobs; k++) {
            const struct llmq_job *j = &b->jobs[k];
            if (!scope_applies(scope, j))
                continue;
            jobs++;
            const struct model_sum *m = model_of(e, j->model);
            if (usd && !m->priced)
                unpriced = 1;
            long long one = usd ? (m->priced ? worst_nusd(m, j) : 0) : j->cost.total_tokens;
            need += one;
            if (one > max_one)
                max_one = one;
        }
        if (jobs == 0)
            continue;
        long long limit = json_integer_value(json_object_get(bj, "limit"));
        long long spent = json_integer_value(json_object_get(bj, "spent"));
        long long start = json_integer_value(json_object_get(bj, "period_start_ms"));
        long long end = json_integer_value(json_object_get(bj, "period_end_ms"));
        long long left = limit > spent ? limit - spent : 0;
        long long rollovers = 0;
        if (need > left) /* -1: a job needs more than the whole budget, it never fits */
            rollovers = max_one <= limit && limit > 0 ? (need - left + limit - 1) / limit : -1;
        json_t *o = json_pack(
            "{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:b}", "id", json_string_value(json_object_get(bj, "id")),
            "unit", usd ? "usd" : "tokens", "jobs", (json_int_t)jobs, "need_worst",
            (json_int_t)need, "left", (json_int_t)left, "limit", (json_int_t)limit, "rollovers",
            (json_int_t)rollovers, "unpriced", unpriced);
        if (rollovers > 0) {
            /* the last of the file waits for the rollovers-th period */
            double wait = (double)(end - now_ms) + (double)(rollovers - 1) * (double)(end - start);
            const char *period = json_string_value(json_object_get(bj, "period"));
            if (period != NULL && strcmp(period, "month") == 0) { /* months differ in length */
                time_t t = (time_t)(end / 1000);
                struct tm tm;
                gmtime_r(&t, &tm);
                tm.tm_mon += (int)(rollovers - 1);
                wait = (double)timegm(&tm) * 1000.0 - (double)now_ms;
            }
            json_object_set_new(o, "waits_until_ms",
                                json_integer((json_int_t)(now_ms + (long long)wait)));
            if (wait > e->finish_ms)
                e->finish_ms = wait;
        } else if (rollovers < 0) {
            e->finish_ms = INFINITY;
        }
        json_array_append_new(e->budgets, o);
    }
}

/* A cost range "$a .. $b", or "no price". */
static void range_text(int priced, long long low, long long high, char *buf, size_t n)
{
    char a[48], z[48];
    if (!priced) {
        snprintf(buf, n, "no price");
        return;
    }
    usd_text(low, a, sizeof(a));
    usd_text(high, z, sizeof(z));
    snprintf(buf, n, "%s .. %s", a, z);
}

/* The offload rows: per model with marked lines, live vs under its policy. */
static void print_offload(const struct estimate *e)
{
    if (e->marked == 0)
        return;
    printf("\noffload: %lld of %lld jobs may wait the provider's Batch window (completion_window "
           "24h);\nunder each model's policy (llmq offload) %lld of them go to provider batches "
           "at the batch price:\n",
           e->marked, e->jobs, e->offloaded);
    printf("%-24s %-5s %7s %9s %24s %24s %10s %10s\n", "MODEL", "MODE", "MARKED", "OFFLOADED",
           "COST ALL LIVE", "COST UNDER POLICY", "TIME LIVE", "TIME POLICY");
    for (size_t i = 0; i < e->n_models; i++) {
        const struct model_sum *m = &e->models[i];
        if (m->elig_jobs == 0)
            continue;
        char live[128], pol[128], tl[48], tp[48];
        range_text(m->priced, m->low_nusd, m->high_nusd, live, sizeof(live));
        range_text(m->priced, m->pol_low_nusd, m->pol_high_nusd, pol, sizeof(pol));
        if (m->finish_ms < 0)
            snprintf(tl, sizeof(tl), "no limit");
        else
            duration_text(m->finish_ms, tl, sizeof(tl));
        if (m->pol_finish_ms < 0)
            snprintf(tp, sizeof(tp), "no limit");
        else
            duration_text(m->pol_finish_ms, tp, sizeof(tp));
        printf("%-24s %-5s %7lld %9lld %24s %24s %10s %10s\n", m->model, m->mode, m->elig_jobs,
               m->off_jobs, live, pol, tl, tp);
    }
    char live[128], pol[128];
    range_text(1, e->low, e->high, live, sizeof(live));
    range_text(1, e->pol_low, e->pol_high, pol, sizeof(pol));
    printf("file: %s all live, %s under the policies%s; TIME POLICY is the live part's, the "
           "offloaded jobs end within the provider's 24 h window\n",
           live, pol, e->unpriced ? " (priced models only)" : "");
}

static void print_text(const struct estimate_opts *o, const struct estimate *e)
{
    char lo[48], hi[48], t[48];
    usd_text(e->low, lo, sizeof(lo));
    usd_text(e->high, hi, sizeof(hi));
    printf("estimate of %s (nothing written)\n", o->file);
    printf("  jobs                  %lld\n", e->jobs);
    printf("  prompt tokens         %lld\n", e->prompt);
    printf("  reserved completion   %lld tokens\n", e->completion);
    printf("  charged at admission  %lld tokens (prompt + reservation + margin)\n", e->charged);
    printf("  cost                  %s .. %s (prompt only .. full reservation)%s\n", lo, hi,
           e->unpriced ? "; some models have no price (llmq prices)" : "");
    printf("\n%-24s %7s %10s %11s %12s %12s %8s %10s %10s\n", "MODEL", "JOBS", "PROMPT",
           "COMPLETION", "COST FROM", "COST TO", "RPM", "TPM", "TIME");
    for (size_t i = 0; i < e->n_models; i++) {
        const struct model_sum *m = &e->models[i];
        char a[48], z[48], r[24], k[24];
        if (m->priced) {
            usd_text(m->low_nusd, a, sizeof(a));
            usd_text(m->high_nusd, z, sizeof(z));
        } else {
            snprintf(a, sizeof(a), "no price");
            snprintf(z, sizeof(z), "-");
        }
        snprintf(r, sizeof(r), m->rpm > 0 ? "%lld" : "-", m->rpm);
        snprintf(k, sizeof(k), m->tpm > 0 ? "%lld" : "-", m->tpm);
        if (m->finish_ms < 0)
            snprintf(t, sizeof(t), "no limit");
        else
            duration_text(m->finish_ms, t, sizeof(t));
        printf("%-24s %7lld %10lld %11lld %12s %12s %8s %10s %10s\n", m->model, m->jobs, m->prompt,
               m->completion, a, z, r, k, t);
    }
    size_t i;
    json_t *bj;
    if (json_array_size(e->budgets) > 0)
        printf("\nbudgets on the file's path (its worst case against what is left):\n");
    json_array_foreach(e->budgets, i, bj)
    {
        int usd = strcmp(json_string_value(json_object_get(bj, "unit")), "usd") == 0;
        char need[48], left[48];
        long long nv = json_integer_value(json_object_get(bj, "need_worst"));
        long long lv = json_integer_value(json_object_get(bj, "left"));
        if (usd) {
            usd_text(nv, need, sizeof(need));
            usd_text(lv, left, sizeof(left));
        } else {
            snprintf(need, sizeof(need), "%lld tokens", nv);
            snprintf(left, sizeof(left), "%lld tokens", lv);
        }
        long long ro = json_integer_value(json_object_get(bj, "rollovers"));
        printf("  %-32s needs up to %s, %s left", json_string_value(json_object_get(bj, "id")),
               need, left);
        if (ro > 0) {
            time_t w = (time_t)(json_integer_value(json_object_get(bj, "waits_until_ms")) / 1000);
            struct tm tm;
            char when[32];
            gmtime_r(&w, &tm);
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
            printf(": parks, waits %lld roll-over(s), until about %s UTC\n", ro, when);
        } else if (ro < 0) {
            printf(": a job needs more than the whole budget: parks until it is raised\n");
        } else {
            printf(": fits\n");
        }
    }
    print_offload(e);
    if (isinf(e->finish_ms))
        snprintf(t, sizeof(t), "never, until a budget is raised");
    else if (e->finish_ms < 0)
        snprintf(t, sizeof(t), "as fast as the API answers (no limit)");
    else
        duration_text(e->finish_ms, t, sizeof(t));
    printf("\ntime to finish: %s at the current limits and budgets (plus the API's own "
           "latency and any queue ahead)\n",
           t);
}

static json_t *as_json(const struct estimate *e)
{
    json_t *models = json_array();
    for (size_t i = 0; i < e->n_models; i++) {
        const struct model_sum *m = &e->models[i];
        json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:b,s:I,s:I}", "model", m->model, "jobs",
                              (json_int_t)m->jobs, "prompt_tokens", (json_int_t)m->prompt,
                              "completion_tokens", (json_int_t)m->completion, "charged_tokens",
                              (json_int_t)m->charged, "priced", m->priced, "rpm",
                              (json_int_t)m->rpm, "tpm", (json_int_t)m->tpm);
        if (m->priced) {
            json_object_set_new(o, "cost_low_nano_usd", json_integer(m->low_nusd));
            json_object_set_new(o, "cost_high_nano_usd", json_integer(m->high_nusd));
        }
        json_object_set_new(o, "finish_ms",
                            m->finish_ms < 0 ? json_null()
                                             : json_integer((json_int_t)m->finish_ms));
        json_t *off = json_pack(
            "{s:s,s:I,s:I,s:I,s:b,s:o}", "mode", m->mode, "horizon_s", (json_int_t)m->horizon_s,
            "marked_jobs", (json_int_t)m->elig_jobs, "offloaded_jobs", (json_int_t)m->off_jobs,
            "batch_priced", m->batch_priced, "finish_ms_live_part",
            m->pol_finish_ms < 0 ? json_null() : json_integer((json_int_t)m->pol_finish_ms));
        if (m->priced) {
            json_object_set_new(off, "cost_low_nano_usd", json_integer(m->pol_low_nusd));
            json_object_set_new(off, "cost_high_nano_usd", json_integer(m->pol_high_nusd));
        }
        if (m->batch_priced)
            json_object_set_new(off, "batch_price",
                                json_pack("{s:I,s:I,s:I}", "input", (json_int_t)m->bin,
                                          "cached_input", (json_int_t)m->bcached, "output",
                                          (json_int_t)m->bout));
        json_object_set_new(o, "offload", off);
        json_array_append_new(models, o);
    }
    json_t *doc = json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:b,s:o,s:O,s:o}", "jobs", (json_int_t)e->jobs,
        "prompt_tokens", (json_int_t)e->prompt, "completion_tokens", (json_int_t)e->completion,
        "charged_tokens", (json_int_t)e->charged, "cost_low_nano_usd", (json_int_t)e->low,
        "cost_high_nano_usd", (json_int_t)e->high, "cost_low_usd",
        (double)e->low / LLMQ_NANO_PER_USD, "cost_high_usd", (double)e->high / LLMQ_NANO_PER_USD,
        "unpriced", e->unpriced, "models", models, "budgets", e->budgets, "finish_ms",
        isinf(e->finish_ms) || e->finish_ms < 0 ? json_null()
                                                : json_integer((json_int_t)e->finish_ms));
    json_object_set_new(doc, "offload",
                        json_pack("{s:I,s:I,s:I,s:I,s:I}", "marked_jobs", (json_int_t)e->marked,
                                  "offloaded_jobs", (json_int_t)e->offloaded, "cost_low_nano_usd",
                                  (json_int_t)e->pol_low, "cost_high_nano_usd",
                                  (json_int_t)e->pol_high, "window_ms",
                                  (json_int_t)LLMQ_JOB_COMPLETION_WINDOW_MS));
    return doc;
}

/* The cost of prompt and completion tokens at a price (nano-USD per token):
 * prompt only (*low) .. the full reservation (*high), added. */
static void cost_add(long long in, long long out, long long prompt, long long completion,
                     long long *low, long long *high)
{
    *low += prompt * in;
    *high += prompt * in + completion * out;
}

/* Decides which of m's marked jobs its policy offloads (off: none; all:
 * every one; auto: those the live limits would not admit within the
 * horizon once the unmarked jobs, which only run live, had theirs: a share
 * of the marked ones, in proportion) and prices the file under the policy:
 * the live part at the list price, the offloaded part at the batch price
 * (the list price when the model has no batch price), and the live part's
 * time at the limits' pace. */
static void offload_plan(struct model_sum *m)
{
    double share = 0; /* of the marked jobs, offloaded */
    if (m->elig_jobs > 0 && strcmp(m->mode, "all") == 0) {
        share = 1;
    } else if (m->elig_jobs > 0 && strcmp(m->mode, "auto") == 0 && (m->rpm > 0 || m->tpm > 0)) {
        /* the first window's worth at once, then one per period (pace_of) */
        double room = (double)m->horizon_s * 1000.0 / (double)m->period_ms + 1;
        room -= windows_of(m, m->jobs - m->elig_jobs, m->charged - m->elig_charged);
        double need = windows_of(m, m->elig_jobs, m->elig_charged);
        share = room <= 0 ? 1 : room >= need ? 0 : 1 - room / need;
    }
    m->off_jobs = (long long)llround(share * (double)m->elig_jobs);
    double f = m->elig_jobs > 0 ? (double)m->off_jobs / (double)m->elig_jobs : 0;
    m->off_prompt = (long long)llround(f * (double)m->elig_prompt);
    m->off_completion = (long long)llround(f * (double)m->elig_completion);
    m->off_charged = (long long)llround(f * (double)m->elig_charged);
    if (m->priced) {
        cost_add(m->in, m->out, m->prompt - m->off_prompt, m->completion - m->off_completion,
                 &m->pol_low_nusd, &m->pol_high_nusd);
        cost_add(m->batch_priced ? m->bin : m->in, m->batch_priced ? m->bout : m->out,
                 m->off_prompt, m->off_completion, &m->pol_low_nusd, &m->pol_high_nusd);
    }
    m->pol_finish_ms = pace_of(m, m->jobs - m->off_jobs, m->charged - m->off_charged);
}

/* Sums b per model and reads each model's price and limits. */
static int sum_models(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                      const struct llmq_batch *b, struct estimate *e)
{
    e->models = calloc(b->n_jobs + 1, sizeof(*e->models));
    if (e->models == NULL)
        return -1;
    for (size_t i = 0; i < b->n_jobs; i++) {
        const struct llmq_job *j = &b->jobs[i];
        struct model_sum *m = model_of(e, j->model);
        if (m == NULL) {
            m = &e->models[e->n_models++];
            m->model = j->model;
            if (model_read(cli, c, prefix, m) != 0)
                return -1;
        }
        m->jobs++;
        m->prompt += j->cost.prompt_tokens;
        m->completion += j->cost.completion_tokens;
        m->charged += j->cost.total_tokens;
        if (m->priced) {
            m->low_nusd += j->cost.prompt_tokens * m->in;
            m->high_nusd += j->cost.prompt_tokens * m->in + j->cost.completion_tokens * m->out;
        }
        if (j->completion_window_ms > 0) {
            m->elig_jobs++;
            m->elig_prompt += j->cost.prompt_tokens;
            m->elig_completion += j->cost.completion_tokens;
            m->elig_charged += j->cost.total_tokens;
        }
    }
    e->finish_ms = -1;
    for (size_t i = 0; i < e->n_models; i++) {
        struct model_sum *m = &e->models[i];
        offload_plan(m);
        m->finish_ms = pace_ms(m);
        if (m->finish_ms > e->finish_ms)
            e->finish_ms = m->finish_ms;
        e->jobs += m->jobs;
        e->prompt += m->prompt;
        e->completion += m->completion;
        e->charged += m->charged;
        e->low += m->low_nusd;
        e->high += m->high_nusd;
        e->marked += m->elig_jobs;
        e->offloaded += m->off_jobs;
        e->pol_low += m->priced ? m->pol_low_nusd : 0;
        e->pol_high += m->priced ? m->pol_high_nusd : 0;
        e->unpriced |= !m->priced;
    }
    return 0;
}

struct estimate_run {
    const struct estimate_opts *o;
    const struct llmq_batch *b;
};

static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct estimate_run *run = ud;
    struct estimate e = {0};
    struct llmq_error err = {0};
    int code = LLMQ_EXIT_FAIL;
    if (sum_models(cli, c, prefix, run->b, &e) != 0)
        goto out;
    json_t *budgets = llmq_cli_budgets_json(c, prefix, &err);
    if (budgets == NULL) {
        llmq_cli_error(cli, "budgets: %s", err.msg[0] ? err.msg : llmq_redis_context_error(c));
        goto out;
    }
    hold_budgets(&e, run->b, budgets, llmq_wall_ms());
    json_decref(budgets);
    if (run->o->json) {
        json_t *doc = as_json(&e);
        char *s = json_dumps(doc, JSON_COMPACT);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
        json_decref(doc);
    } else {
        print_text(run->o, &e);
    }
    code = LLMQ_EXIT_OK;
out:
    json_decref(e.budgets);
    free(e.models);
    return code;
}

int llmq_cmd_estimate(struct llmq_cli *cli, int argc, char **argv)
{
    struct estimate_opts o = {0};
    char *pos[2];
    int n = 0;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, 2, &n);
    if (rc >= 0)
        return rc;
    if (n != 1) {
        llmq_cli_error(cli, "expected one FILE (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    o.file = pos[0];
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    d.tenant = o.tenant;
    d.user = o.user;
    d.completion_window_ms = o.window_ms;
    char *buf = NULL;
    size_t len = 0;
    struct llmq_error err = {0};
    if (llmq_batch_read_file(o.file, &buf, &len, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return LLMQ_EXIT_USAGE;
    }
    struct llmq_batch b = {0};
    rc = llmq_batch_parse(buf, len, &d, &b, &err);
    free(buf);
    if (rc != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return LLMQ_EXIT_FAIL;
    }
    for (size_t i = 0; i < b.n_errors && i < 1000; i++)
        llmq_cli_error(cli, "%s:%ld: %s", o.file, b.errors[i].line, b.errors[i].msg);
    if (b.n_errors > 0) {
        llmq_cli_error(cli, "%zu invalid line(s): fix them first (llmq enqueue --check)",
                       b.n_errors);
        llmq_batch_clear(&b);
        return LLMQ_EXIT_USAGE;
    }
    struct estimate_run run = {&o, &b};
    rc = llmq_cli_on_account(cli, act, &run);
    llmq_batch_clear(&b);
    return rc;
}
