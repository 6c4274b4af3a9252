/* llmq status: one account (or every account with --all-accounts) at a
 * glance: per priority queued / in flight / delayed / dead, results kept,
 * bucket use against limits right now, and the consumers with their idle time.
 *
 * Everything is gathered into one JSON object (lua/status.lua for the queues,
 * the limiter's lua/bucket_usage.lua for the buckets), then printed as text or, with
 * --json, as is. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/calibration.h"
#include "jobs/job_store.h"
#include "cli.h"
#include "cli_opts.h"
#include "offload_table.h"
#include "jobs/offload_stats.h"
#include "limiter/path.h"
#include "redis/cluster.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/reply_read.h"
#include "redis/script.h"
#include "llmq/priority.h"

/* Delayed and dead jobs are counted per priority up to this many. */
#define PER_PRIO_CAP "10000"
/* Queued jobs and done results whose keys status measures (MEMORY USAGE). */
#define MEMORY_SAMPLE "32"
#define MAX_BUCKETS 1000

static int shape_ok(const redisReply *r, size_t min_elements)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= min_elements;
}

/* Bytes of Redis memory per job of n sampled (sum bytes), 0 without a sample. */
static long long per_job(long long bytes, long long n)
{
    return n > 0 ? (bytes + n / 2) / n : 0;
}

/* Sums the queued jobs of o["queues"]. */
static long long queued_total(const json_t *o)
{
    long long n = 0;
    const char *prio;
    json_t *q;
    json_object_foreach(json_object_get(o, "queues"), prio, q)
    {
        n += json_integer_value(json_object_get(q, "queued"));
    }
    return n;
}

/* The backlog's and the kept results' memory into o["memory"], from the
 * sample of lua/status.lua (m: {queued_sampled, queued_bytes, done_sampled,
 * done_bytes}; NULL from an older script) scaled by the counts: what an
 * operator sizes Redis by (docs/operations.md "Sizing Redis"). */
static void add_memory(json_t *o, const redisReply *m)
{
    if (!shape_ok(m, 4))
        return;
    long long qn = llmq_reply_int_or(m->element[0], 0), qb = llmq_reply_int_or(m->element[1], 0);
    long long dn = llmq_reply_int_or(m->element[2], 0), db = llmq_reply_int_or(m->element[3], 0);
    long long q_each = per_job(qb, qn), d_each = per_job(db, dn);
    long long kept =
        json_integer_value(json_object_get(json_object_get(o, "totals"), "results_kept"));
    json_object_set_new(o, "memory",
                        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "queued_sampled",
                                  (json_int_t)qn, "bytes_per_queued_job", (json_int_t)q_each,
                                  "queued_bytes", (json_int_t)(q_each * queued_total(o)),
                                  "results_sampled", (json_int_t)dn, "bytes_per_result",
                                  (json_int_t)d_each, "results_bytes",
                                  (json_int_t)(d_each * kept)));
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
        json_object_set_new(queues, llmq_reply_str_or(q->element[0], ""),
                            json_pack("{s:I, s:I, s:I, s:I}", "queued",
                                      llmq_reply_int_or(q->element[1], 0), "in_flight",
                                      llmq_reply_int_or(q->element[2], 0), "delayed",
                                      llmq_reply_int_or(q->element[3], 0), "dead",
                                      llmq_reply_int_or(q->element[4], 0)));
    }
    const redisReply *t = r->element[1];
    json_object_set_new(o, "queues", queues);
    json_object_set_new(o, "totals",
                        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "delayed",
                                  llmq_reply_int_or(t->element[0], 0), "dead",
                                  llmq_reply_int_or(t->element[1], 0), "results_kept",
                                  llmq_reply_int_or(t->element[2], 0), "done_ever",
                                  llmq_reply_int_or(t->element[3], 0), "dead_ever",
                                  llmq_reply_int_or(t->element[4], 0), "http_429",
                                  llmq_reply_int_or(t->element[5], 0)));
    /* a script before sync_dead_ever replies 6 totals */
    json_object_set_new(json_object_get(o, "totals"), "sync_dead_ever",
                        json_integer(t->elements > 6 ? llmq_reply_int_or(t->element[6], 0) : 0));
    for (size_t i = 0; i < r->element[2]->elements; i++) {
        const redisReply *c = r->element[2]->element[i];
        if (shape_ok(c, 4))
            json_array_append_new(consumers,
                                  json_pack("{s:s, s:s, s:I, s:I}", "priority",
                                            llmq_reply_str_or(c->element[0], ""), "name",
                                            llmq_reply_str_or(c->element[1], ""), "pending",
                                            llmq_reply_int_or(c->element[2], 0), "idle_ms",
                                            llmq_reply_int_or(c->element[3], 0)));
    }
    const redisReply *s = r->element[3];
    for (size_t i = 0; s->type == REDIS_REPLY_ARRAY && i + 1 < s->elements; i += 2)
        json_object_set_new(settings, llmq_reply_str_or(s->element[i], ""),
                            json_integer(llmq_reply_int_or(s->element[i + 1], 0)));
    json_object_set_new(o, "consumers", consumers);
    json_object_set_new(o, "settings", settings);
    json_t *unlimited = json_array();
    for (size_t i = 0; r->elements > 4 && i < r->element[4]->elements; i++)
        json_array_append_new(unlimited,
                              json_string(llmq_reply_str_or(r->element[4]->element[i], "")));
    json_object_set_new(o, "unlimited_models", unlimited);
    add_memory(o, r->elements > 5 ? r->element[5] : NULL);
    return 0;
}

/* Live workers and silent consumers into o["workers"]: every consumer of the
 * heartbeat hash P workers and of the queues' group, with when it was last
 * seen, its pending jobs, live (seen within LLMQ_WORKER_LIVE_MS), and the
 * version and endpoints it said it has (P winfo), when it did. now_ms
 * is Redis TIME. Seen is its heartbeat's age; a consumer without one (a
 * worker that exited cleanly took it away) was last seen when it last read
 * from the queues: its least idle time in the group (XINFO CONSUMERS). */
static void add_workers(json_t *o, redisContext *c, const char *prefix)
{
    json_t *workers = json_object();
    redisReply *t = redisCommand(c, "TIME");
    long long now = shape_ok(t, 2) ? llmq_reply_int_or(t->element[0], 0) * 1000 +
                                         llmq_reply_int_or(t->element[1], 0) / 1000
                                   : 0;
    if (t != NULL)
        freeReplyObject(t);
    char key[LLMQ_KEY_FIXED_MAX];
    redisReply *r = llmq_key(key, sizeof(key), prefix, LLMQ_KEY_WORKERS, NULL, NULL) == LLMQ_OK
                        ? redisCommand(c, "HGETALL %s", key)
                        : NULL;
    for (size_t i = 0; shape_ok(r, 0) && i + 1 < r->elements; i += 2) {
        long long seen = llmq_reply_int_or(r->element[i + 1], 0);
        json_object_set_new(workers, llmq_reply_str_or(r->element[i], ""),
                            json_pack("{s:I, s:I, s:b}", "seen_ms_ago", now - seen, "pending",
                                      (json_int_t)0, "live", now - seen <= LLMQ_WORKER_LIVE_MS));
    }
    if (r != NULL)
        freeReplyObject(r);
    /* what each worker with a heartbeat said it is (P winfo, lua/reclaim.lua):
     * its version and the endpoints it serves */
    r = llmq_key(key, sizeof(key), prefix, LLMQ_KEY_WORKER_INFO, NULL, NULL) == LLMQ_OK
            ? redisCommand(c, "HGETALL %s", key)
            : NULL;
    for (size_t i = 0; shape_ok(r, 0) && i + 1 < r->elements; i += 2) {
        json_t *w = json_object_get(workers, llmq_reply_str_or(r->element[i], ""));
        const redisReply *v = r->element[i + 1];
        json_t *info =
            w != NULL && v->type == REDIS_REPLY_STRING ? json_loadb(v->str, v->len, 0, NULL) : NULL;
        json_t *version = json_object_get(info, "version");
        json_t *eps = json_object_get(info, "endpoints");
        if (json_is_string(version))
            json_object_set(w, "version", version);
        if (json_is_array(eps) || json_is_object(eps)) /* (cjson's empty list is {}) */
            json_object_set_new(w, "endpoints",
                                json_is_array(eps) ? json_incref(eps) : json_array());
        json_decref(info);
    }
    if (r != NULL)
        freeReplyObject(r);
    size_t i;
    json_t *cons;
    json_t *silent = json_object(); /* consumers without a heartbeat */
    json_array_foreach(json_object_get(o, "consumers"), i, cons)
    {
        const char *name = json_string_value(json_object_get(cons, "name"));
        json_t *w = json_object_get(workers, name);
        if (w == NULL) {
            w = json_pack("{s:I, s:I, s:b}", "seen_ms_ago", (json_int_t)-1, "pending",
                          (json_int_t)0, "live", 0);
            json_object_set_new(workers, name, w);
            json_object_set_new(silent, name, json_true());
        }
        json_int_t idle = json_integer_value(json_object_get(cons, "idle_ms"));
        json_int_t seen = json_integer_value(json_object_get(w, "seen_ms_ago"));
        if (json_object_get(silent, name) != NULL && idle >= 0 && (seen < 0 || idle < seen))
            json_object_set_new(w, "seen_ms_ago", json_integer(idle));
        json_object_set_new(w, "pending",
                            json_integer(json_integer_value(json_object_get(w, "pending")) +
                                         json_integer_value(json_object_get(cons, "pending"))));
    }
    json_decref(silent);
    json_t *list = json_array();
    const char *name;
    json_t *w;
    json_object_foreach(workers, name, w)
    {
        json_object_set_new(w, "name", json_string(name));
        json_array_append(list, w);
    }
    json_decref(workers);
    json_object_set_new(o, "workers", list);
}

/* The account's endpoints (lua/endpoint_list.lua: state, bucket use,
 * latency, 429s per endpoint) into o["endpoints"]; an empty list when it
 * has none (or Redis failed: the rest of status still shows). */
static void add_endpoints(json_t *o, redisContext *c, const char *prefix)
{
    struct llmq_error err = {0};
    json_t *e = llmq_cli_endpoints(c, prefix, &err);
    json_t *list = e ? json_object_get(e, "endpoints") : NULL;
    json_object_set_new(o, "endpoints", json_is_array(list) ? json_incref(list) : json_array());
    if (e != NULL)
        json_object_set_new(o, "endpoints_now_ms", json_incref(json_object_get(e, "now_ms")));
    json_decref(e);
}

/* What offload holds and did per model (jobs/offload_stats.h) into
 * o["offload"]; an empty list when nothing is offloaded (or Redis failed:
 * the rest of status still shows). */
static void add_offload(json_t *o, redisContext *c, const char *prefix)
{
    struct llmq_error err = {0};
    json_t *list = llmq_offload_stats_read(c, prefix, &err);
    json_object_set_new(o, "offload", list ? list : json_array());
}

/* The endpoint rows of status, when the account has endpoints. */
static void print_endpoints(const json_t *o)
{
    const json_t *list = json_object_get(o, "endpoints");
    if (json_array_size(list) == 0)
        return;
    json_t *e = json_pack("{s:O, s:O?}", "endpoints", list, "now_ms",
                          json_object_get(o, "endpoints_now_ms"));
    printf("  endpoints (state; bucket use now per model):\n");
    llmq_cli_endpoints_print(stdout, e);
    json_decref(e);
}

/* The id of lua/bucket_usage.lua (the limiter's), or -1 when it is not built in. */
static int usage_script(void)
{
    for (int i = 0; i < LLMQ_SCRIPT_COUNT; i++)
        if (strcmp(llmq_scripts[i].name, "bucket_usage") == 0)
            return i;
    return -1;
}

/* Names read out of scanned keys: what follows the first skip bytes, up to
 * the end or to end_mark; names that cannot be a bucket's are left out. */
struct name_scan {
    char **names;
    size_t max, n, skip;
    const char *end_mark; /* NULL: to the end */
};

static int take_name(const char *key, void *ud)
{
    struct name_scan *s = ud;
    size_t len = strlen(key);
    if (len <= s->skip)
        return 0;
    const char *name = key + s->skip;
    const char *end = s->end_mark != NULL ? strstr(name, s->end_mark) : name + (len - s->skip);
    if (end != NULL && end > name && (size_t)(end - name) < LLMQ_BUCKET_NAME_MAX) {
        s->names[s->n] = strndup(name, (size_t)(end - name));
        s->n += s->names[s->n] != NULL;
    }
    return s->n >= s->max;
}

/* Bucket names with a limit: SCAN P limit:*. Fills names (new strings);
 * names longer than a bucket name can be are not the limiter's. */
static size_t scan_buckets(redisContext *c, const char *prefix, char **names, size_t max)
{
    char pattern[LLMQ_KEY_FIXED_MAX];
    struct name_scan s = {names, max, 0, strlen(prefix) + strlen(llmq_key_head(LLMQ_KEY_LIMIT)),
                          NULL};
    if (llmq_key(pattern, sizeof(pattern), prefix, LLMQ_KEY_LIMIT, "*", NULL) == LLMQ_OK)
        llmq_redis_scan(c, pattern, 500, take_name, &s, NULL); /* a failure: the names so far */
    return s.n;
}

/* Sets "soft" on each bucket (its limit hash says soft 1). */
static void add_soft_marks(json_t *buckets, redisContext *c, const char *prefix)
{
    size_t i;
    json_t *b;
    json_array_foreach(buckets, i, b)
    {
        char key[LLMQ_KEY_FIXED_MAX + LLMQ_BUCKET_NAME_MAX];
        if (llmq_key(key, sizeof(key), prefix, LLMQ_KEY_LIMIT,
                     json_string_value(json_object_get(b, "name")), NULL) == LLMQ_OK)
            redisAppendCommand(c, "HGET %s soft", key);
        else
            json_object_set_new(b, "soft", json_false()); /* no reply to read for it */
    }
    json_array_foreach(buckets, i, b)
    {
        if (json_object_get(b, "soft") != NULL)
            continue;
        redisReply *r = NULL;
        int soft = 0;
        if (redisGetReply(c, (void **)&r) == REDIS_OK && r != NULL) {
            soft = r->type == REDIS_REPLY_STRING && strcmp(r->str, "1") == 0;
            freeReplyObject(r);
        }
        json_object_set_new(b, "soft", json_boolean(soft));
    }
}

/* Order along the paths: a model's bucket, then its tenants' each followed
 * by its users' ("<model>", "<model>/t/<tenant>",
 * "<model>/t/<tenant>/u/<user>"), then the users without a tenant (and the
 * limits of a user in every tenant, "<model>/u/<user>"), by name within each. */
static int bucket_cmp(const void *pa, const void *pb)
{
    const char *a = json_string_value(json_object_get(*(json_t *const *)pa, "name"));
    const char *b = json_string_value(json_object_get(*(json_t *const *)pb, "name"));
    size_t ma = strcspn(a, "/"), mb = strcspn(b, "/");
    int c = strncmp(a, b, ma < mb ? ma : mb);
    if (c != 0 || ma != mb)
        return c != 0 ? c : (ma < mb ? -1 : 1);
    int ka = a[ma] == '\0' ? 0 : a[ma + 1] == 't' ? 1 : 2;
    int kb = b[mb] == '\0' ? 0 : b[mb + 1] == 't' ? 1 : 2;
    return ka != kb ? ka - kb : strcmp(a, b);
}

static void sort_buckets(json_t *buckets)
{
    size_t n = json_array_size(buckets);
    json_t **v = calloc(n + 1, sizeof(*v));
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(buckets, i));
    qsort(v, n, sizeof(*v), bucket_cmp);
    json_array_clear(buckets);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(buckets, v[i]);
    free(v);
}

/* Bucket use vs limits, from the limiter's bucket_usage script, into o["buckets"]. */
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
                    buckets, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "name",
                                       llmq_reply_str_or(b->element[0], ""), "requests_used",
                                       llmq_reply_int_or(b->element[1], 0), "tokens_used",
                                       llmq_reply_int_or(b->element[2], 0), "requests_limit",
                                       llmq_reply_int_or(b->element[3], 0), "tokens_limit",
                                       llmq_reply_int_or(b->element[4], 0), "period_ms",
                                       llmq_reply_int_or(b->element[5], 0), "paused_ms",
                                       llmq_reply_int_or(b->element[6], 0)));
        }
        if (r != NULL)
            freeReplyObject(r);
    }
    add_soft_marks(buckets, c, prefix);
    sort_buckets(buckets);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(argv);
}

/* 429s that were insufficient_quota (not rate limits: those jobs are dead),
 * and how far the workers' prompt-token estimates were from the real usage,
 * per model (calibration.h). */
static void add_quota_and_calibration(json_t *o, redisContext *c, const char *account,
                                      const char *prefix)
{
    long long quota = llmq_job_store_stat(c, prefix, "insufficient_quota");
    json_object_set_new(json_object_get(o, "totals"), "insufficient_quota", json_integer(quota));
    /* rate-limit 429s whose headers said the API had room (job_settle.lua) */
    long long spurious = llmq_job_store_stat(c, prefix, "http_429_spurious");
    json_object_set_new(json_object_get(o, "totals"), "http_429_spurious", json_integer(spurious));
    /* 429s llmq-gateway answered itself, not the API (gateway/call_job.c) */
    json_object_set_new(json_object_get(o, "totals"), "own_429_wait",
                        json_integer(llmq_job_store_stat(c, prefix, "own_429_wait")));
    json_object_set_new(json_object_get(o, "totals"), "own_429_budget",
                        json_integer(llmq_job_store_stat(c, prefix, "own_429_budget")));
    struct llmq_calib_stats *st = NULL;
    size_t n = 0;
    json_t *cal = json_array();
    if (llmq_calib_read(c, account, &st, &n, NULL) == LLMQ_OK) {
        for (size_t i = 0; i < n; i++)
            json_array_append_new(cal, json_pack("{s:s, s:I, s:f, s:f, s:f}", "model", st[i].model,
                                                 "samples", (json_int_t)st[i].samples, "bias_pct",
                                                 st[i].bias_pct, "mean_abs_pct", st[i].mean_abs_pct,
                                                 "stddev_rel_pct", st[i].stddev_rel_pct));
        free(st);
    }
    json_object_set_new(o, "calibration", cal);
}

/* The policy's headroom of low-priority jobs (percent of a bucket they may
 * fill; lua/lib/limiter.lua, default 80) into o["headroom_low"]. */
static void add_headroom(json_t *o, redisContext *c, const char *prefix)
{
    char key[LLMQ_KEY_FIXED_MAX];
    long long pct = 80;
    if (llmq_key(key, sizeof(key), prefix, LLMQ_KEY_POLICY, NULL, NULL) == LLMQ_OK) {
        redisReply *r = redisCommand(c, "HGET %s headroom_low", key);
        pct = llmq_reply_int_or(r, 80);
        if (r != NULL)
            freeReplyObject(r);
    }
    json_object_set_new(o, "headroom_low", json_integer(pct));
}

/* Gathers the status of one account; NULL (error printed) on failure. */
static json_t *gather(const struct llmq_cli *cli, redisContext *c, const char *account)
{
    char prefix[LLMQ_KEY_PREFIX_MAX];
    struct llmq_error err = {0};
    if (llmq_account_prefix(account, prefix, sizeof(prefix), &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return NULL;
    }
    const char *argv[] = {prefix, PER_PRIO_CAP, MEMORY_SAMPLE};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_STATUS, 1, 3, argv, NULL, &err);
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
    if (o != NULL && llmq_cluster_of_context(c) != NULL && c->tcp.host != NULL)
        /* the node that answered (after any MOVED the script followed) */
        json_object_set_new(o, "redis_node",
                            json_pack("{s:s,s:i,s:i}", "host", c->tcp.host, "port", c->tcp.port,
                                      "slot", llmq_cluster_account_slot(account)));
    if (o != NULL) {
        add_buckets(o, c, prefix);
        add_headroom(o, c, prefix);
        add_quota_and_calibration(o, c, account, prefix);
        add_workers(o, c, prefix);
        json_t *pause = llmq_cli_auth_pause(c, prefix); /* NULL: not paused */
        json_object_set_new(o, "auth_pause", pause ? pause : json_null());
        add_endpoints(o, c, prefix);
        add_offload(o, c, prefix);
    }
    return o;
}

/* Text output fits LINE_MAX_COLS columns however busy the queue: names are
 * cut (with "..."), counts shortened (12.3k, 4.5M). */
#define LINE_MAX_COLS 100

/* n shortened to at most 6 characters: 999999, 1.2M, 12.3G. */
static void fmt_count(char *buf, size_t n, long long v)
{
    static const char *const units[] = {"", "k", "M", "G", "T", "P"};
    double x = (double)v;
    int u = 0;
    if (v < 1000000) {
        snprintf(buf, n, "%lld", v);
        return;
    }
    while (x >= 999.95 && u < 5) {
        x /= 1000.0;
        u++;
    }
    snprintf(buf, n, x < 9.995 ? "%.2f%s" : x < 99.95 ? "%.1f%s" : "%.0f%s", x, units[u]);
}

/* "used/limit pct%" of one dimension, or "-" without a limit. */
static void fmt_limit(char *buf, size_t n, long long used, long long limit)
{
    char u[24], l[24];
    fmt_count(u, sizeof(u), used);
    fmt_count(l, sizeof(l), limit);
    if (limit <= 0)
        snprintf(buf, n, "%s/-", u);
    else
        snprintf(buf, n, used / limit >= 10 ? "%s/%s >999%%" : "%s/%s %lld%%", u, l,
                 used * 100 / limit);
}

/* name cut to width columns (ASCII names: bytes are columns). */
static void fit(char *buf, size_t n, const char *name, int width)
{
    if ((int)strlen(name) <= width)
        snprintf(buf, n, "%s", name);
    else
        snprintf(buf, n, "%.*s...", width - 3, name);
}

static long long jint(const json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* bytes in B, KiB, MiB, GiB (one decimal above B). */
static void fmt_bytes(char *buf, size_t n, long long bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)bytes;
    int u = 0;
    while (x >= 1024.0 && u < 4) {
        x /= 1024.0;
        u++;
    }
    snprintf(buf, n, u == 0 ? "%.0f %s" : "%.1f %s", x, units[u]);
}

/* The memory line: the backlog's and the results' estimated Redis memory. */
static void print_memory(const json_t *m)
{
    if (m == NULL)
        return;
    char q[32], d[32];
    fmt_bytes(q, sizeof(q), jint(m, "queued_bytes"));
    fmt_bytes(d, sizeof(d), jint(m, "results_bytes"));
    printf("  memory: backlog ~%s (%lld B per queued job, %lld sampled), results ~%s (%lld B "
           "each, %lld sampled)\n",
           q, jint(m, "bytes_per_queued_job"), jint(m, "queued_sampled"), d,
           jint(m, "bytes_per_result"), jint(m, "results_sampled"));
}

static void print_queues(const json_t *o)
{
    json_t *t = json_object_get(o, "totals");
    char acct[96];
    fit(acct, sizeof(acct), json_string_value(json_object_get(o, "account")), 90);
    printf("account %s\n", acct);
    json_t *node = json_object_get(o, "redis_node");
    if (json_is_object(node)) {
        const char *host = json_string_value(json_object_get(node, "host"));
        char addr[300];
        llmq_redis_addr_format(host ? host : "?", (int)jint(node, "port"), addr, sizeof(addr));
        printf("  redis node: %s (slot %lld)\n", addr, jint(node, "slot"));
    }
    if (json_is_object(json_object_get(o, "auth_pause"))) {
        printf("  ");
        llmq_cli_auth_pause_line(stdout, json_object_get(o, "auth_pause"));
    }
    printf("  %-8s %12s %12s %12s %12s\n", "priority", "queued", "in_flight", "delayed", "dead");
    for (int i = 0; i < LLMQ_PRIORITY_COUNT; i++) {
        const char *prio = llmq_priority_name(llmq_priority_by_rank(i));
        json_t *q = json_object_get(json_object_get(o, "queues"), prio);
        char d[24], x[24];
        snprintf(d, sizeof(d), jint(q, "delayed") < 0 ? "-" : "%lld", jint(q, "delayed"));
        snprintf(x, sizeof(x), jint(q, "dead") < 0 ? "-" : "%lld", jint(q, "dead"));
        printf("  %-8s %12lld %12lld %12s %12s\n", prio, jint(q, "queued"), jint(q, "in_flight"), d,
               x);
    }
    printf("  delayed %lld, dead %lld, results kept %lld\n", jint(t, "delayed"), jint(t, "dead"),
           jint(t, "results_kept"));
    printf("  ended ever: %lld done, %lld dead; 429s seen %lld\n", jint(t, "done_ever"),
           jint(t, "dead_ever"), jint(t, "http_429"));
    if (jint(t, "sync_dead_ever") > 0)
        printf("  gateway calls that ended without the API's answer (answered by the gateway, "
               "not dead-lettered): %lld\n",
               jint(t, "sync_dead_ever"));
    print_memory(json_object_get(o, "memory"));
    if (jint(t, "insufficient_quota") > 0)
        printf("  %lld of those 429s were insufficient_quota: the account is out of credit;\n"
               "  those jobs were dead-lettered\n",
               jint(t, "insufficient_quota"));
    if (jint(t, "http_429_spurious") > 0)
        printf("  %lld of those 429s were spurious: the API's own headers said it had room\n",
               jint(t, "http_429_spurious"));
    if (jint(t, "own_429_wait") + jint(t, "own_429_budget") > 0)
        printf("  llmq's own 429s (the gateway's answers, not the API's): %lld waited "
               "--max-wait-ms for room, %lld over a spend budget\n",
               jint(t, "own_429_wait"), jint(t, "own_429_budget"));
}

/* 1 when used is at or above pct percent of limit (> 0). */
static int at_headroom(long long used, long long limit, long long pct)
{
    return limit > 0 && used * 100 >= limit * pct;
}

/* Says what holds low-priority jobs back: a bucket at or above the policy's
 * low headroom takes no low job (high and normal ones still run), which the
 * counts alone do not show. */
static void print_headroom(const json_t *o)
{
    long long pct = jint(o, "headroom_low");
    json_t *low = json_object_get(json_object_get(o, "queues"), "low");
    if (pct >= 100 || jint(low, "queued") <= 0)
        return;
    size_t i, held = 0;
    json_t *v;
    json_array_foreach(json_object_get(o, "buckets"), i, v)
    {
        if (!at_headroom(jint(v, "requests_used"), jint(v, "requests_limit"), pct) &&
            !at_headroom(jint(v, "tokens_used"), jint(v, "tokens_limit"), pct))
            continue;
        char name[64];
        fit(name, sizeof(name), json_string_value(json_object_get(v, "name")), 40);
        printf("  low jobs held: %s is at or above %lld%% of its limit (low headroom)\n", name,
               pct);
        held++;
    }
    printf("  low-priority jobs run only while their buckets are below %lld%% (headroom_low;\n"
           "  llmq limits policy --headroom-low PCT)%s\n",
           pct, held ? "" : ": none is that full now");
}

static void print_buckets(const json_t *o)
{
    size_t i;
    json_t *v;
    printf("  buckets (used/limit now; soft: borrows idle capacity):%s\n",
           json_array_size(json_object_get(o, "buckets")) ? "" : " none with limits");
    json_array_foreach(json_object_get(o, "buckets"), i, v)
    {
        char name[64], rq[64], tk[64], pause[40] = "";
        const char *full = json_string_value(json_object_get(v, "name"));
        /* indented by level: a tenant (or a user of every tenant) under its
         * model, a tenant's user under its tenant */
        int indent = 0;
        for (const char *p = full; *p != '\0'; p++)
            indent += *p == '/';
        indent = indent >= 4 ? 4 : indent >= 2 ? 2 : 0;
        fit(name, sizeof(name), full, 28 - indent);
        fmt_limit(rq, sizeof(rq), jint(v, "requests_used"), jint(v, "requests_limit"));
        fmt_limit(tk, sizeof(tk), jint(v, "tokens_used"), jint(v, "tokens_limit"));
        if (jint(v, "paused_ms") > 0)
            snprintf(pause, sizeof(pause),
                     jint(v, "paused_ms") < 100000000 ? " PAUSED %.1fs" : " PAUSED >1d",
                     (double)jint(v, "paused_ms") / 1000);
        printf("    %*s%-*s %-4s req %-18s tok %-*s%s\n", indent, "", 28 - indent, name,
               json_is_true(json_object_get(v, "soft")) ? "soft" : "", rq, pause[0] ? 18 : 0, tk,
               pause);
    }
    print_headroom(o);
    json_t *unlimited = json_object_get(o, "unlimited_models");
    json_array_foreach(unlimited, i, v)
    {
        char name[64];
        fit(name, sizeof(name), json_string_value(v), 40);
        printf("  WARNING: model %s has no limit: its jobs run unlimited\n", name);
    }
}

static void print_calibration(const json_t *o)
{
    size_t i;
    json_t *v;
    printf("  prompt-token estimates vs real usage (+: estimate low):%s\n",
           json_array_size(json_object_get(o, "calibration")) ? "" : " no samples yet");
    json_array_foreach(json_object_get(o, "calibration"), i, v)
    {
        char name[64];
        fit(name, sizeof(name), json_string_value(json_object_get(v, "model")), 26);
        printf("    %-26s %8lld samples  bias %+.1f%%  mean |error| %.1f%%  sd %.1f%%\n", name,
               jint(v, "samples"), json_real_value(json_object_get(v, "bias_pct")),
               json_real_value(json_object_get(v, "mean_abs_pct")),
               json_real_value(json_object_get(v, "stddev_rel_pct")));
    }
}

/* "3.2 s", "4m05s", "2h10m", or "never" (no heartbeat). */
static void fmt_ago(char *buf, size_t n, long long ms)
{
    long long s = ms / 1000;
    if (ms < 0)
        snprintf(buf, n, "never");
    else if (s < 60)
        snprintf(buf, n, "%.1f s ago", (double)ms / 1000);
    else if (s < 3600)
        snprintf(buf, n, "%lldm%02llds ago", s / 60, s % 60);
    else
        snprintf(buf, n, "%lldh%02lldm ago", s / 3600, s / 60 % 60);
}

/* The three kinds of workers print_workers lists, in its order. */
enum worker_kind { WORKER_LIVE, WORKER_GONE, WORKER_STOPPED };

static enum worker_kind worker_kind_of(const json_t *v)
{
    if (json_is_true(json_object_get(v, "live")))
        return WORKER_LIVE;
    /* silent with jobs pending: those are reclaimed; silent with none: it
     * stopped (a clean exit takes its heartbeat away, its consumer stays) */
    return jint(v, "pending") > 0 ? WORKER_GONE : WORKER_STOPPED;
}

static void print_workers(const json_t *o)
{
    size_t i, count[3] = {0, 0, 0};
    json_t *v;
    json_t *ws = json_object_get(o, "workers");
    json_array_foreach(ws, i, v)
    {
        count[worker_kind_of(v)]++;
    }
    printf("  workers live (seen within %d s): %zu%s\n", LLMQ_WORKER_LIVE_MS / 1000,
           count[WORKER_LIVE],
           count[WORKER_LIVE] ? "" : " - nothing takes jobs from this account's queues");
    const char *headings[3] = {
        NULL, "gone (silent; their jobs are reclaimed after the visibility timeout)",
        "stopped (silent, nothing pending)"};
    for (int kind = WORKER_LIVE; kind <= WORKER_STOPPED; kind++) {
        if (headings[kind] != NULL && count[kind] > 0)
            printf("  %s: %zu\n", headings[kind], count[kind]);
        json_array_foreach(ws, i, v)
        {
            if ((int)worker_kind_of(v) != kind)
                continue;
            char name[64], ago[32];
            fit(name, sizeof(name), json_string_value(json_object_get(v, "name")), 50);
            fmt_ago(ago, sizeof(ago), jint(v, "seen_ms_ago"));
            printf("    %-50s seen %-12s pending %lld", name, ago, jint(v, "pending"));
            const char *version = json_string_value(json_object_get(v, "version"));
            if (version != NULL)
                printf("  v%s", version);
            size_t k;
            json_t *ep;
            json_array_foreach(json_object_get(v, "endpoints"), k, ep)
            {
                const char *e = json_string_value(ep);
                printf("%s%s", k == 0 ? "  serves " : ",", e && e[0] ? e : "(account key)");
            }
            printf("\n");
        }
    }
}

/* The offload rows (docs/DESIGN.md §3.10), when a model has offload. */
static void print_offload(const json_t *o)
{
    const json_t *list = json_object_get(o, "offload");
    if (json_array_size(list) == 0)
        return;
    printf("  offload (provider batches; llmq offload list):\n");
    llmq_cli_offload_table(stdout, list, "    ", "", "", "\n");
}

static void print_text(const json_t *o)
{
    print_queues(o);
    print_buckets(o);
    print_endpoints(o);
    print_offload(o);
    print_calibration(o);
    print_workers(o);
}

/* Every account that has a queue: SCAN llmq:{*}:q:normal (the prefix of
 * account "*" is the pattern of every prefix). New strings. */
static size_t scan_accounts(redisContext *c, char **names, size_t max)
{
    char any[LLMQ_KEY_PREFIX_MAX], pattern[LLMQ_KEY_FIXED_MAX];
    if (llmq_account_prefix("*", any, sizeof(any), NULL) != LLMQ_OK ||
        llmq_key(pattern, sizeof(pattern), any, LLMQ_KEY_QUEUE,
                 llmq_priority_name(LLMQ_PRIORITY_NORMAL), NULL) != LLMQ_OK)
        return 0;
    /* in a key the account stands where the pattern has its '*' */
    const char *star = strchr(pattern, '*');
    struct name_scan s = {names, max, 0, (size_t)(star - pattern), star + 1};
    llmq_redis_scan(c, pattern, 1000, take_name, &s, NULL);
    return s.n;
}

static int show(const struct llmq_cli *cli, redisContext *c, const char *account, int as_json);

/* --all-accounts on a cluster: the accounts of every primary, each shown
 * on a connection to its own node. */
static int show_all_cluster(const struct llmq_cli *cli, redisContext *c, int as_json)
{
    struct llmq_cluster_node nodes[LLMQ_CLUSTER_NODES_MAX];
    int n_nodes = llmq_cluster_primaries(llmq_cluster_of_context(c), nodes, LLMQ_CLUSTER_NODES_MAX);
    int code = LLMQ_EXIT_OK;
    for (int i = 0; i < n_nodes; i++) {
        struct llmq_error err = {0};
        redisContext *nc = llmq_cluster_connect_node(llmq_cluster_of_context(c), nodes[i].host,
                                                     nodes[i].port, 5000, &err);
        if (nc == NULL) {
            llmq_cli_error(cli, "%s", err.msg);
            code = LLMQ_EXIT_FAIL;
            continue;
        }
        char *names[MAX_BUCKETS];
        size_t n = scan_accounts(nc, names, MAX_BUCKETS);
        for (size_t k = 0; k < n; k++) {
            if (show(cli, nc, names[k], as_json) != LLMQ_EXIT_OK)
                code = LLMQ_EXIT_FAIL;
            free(names[k]);
        }
        redisFree(nc);
    }
    return code;
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

struct status_opts {
    int as_json, all;
};

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_FLAG("json", struct status_opts, as_json, "one JSON object per account"),
    LLMQ_CLI_OPT_FLAG("all-accounts", struct status_opts, all, "every account, not only --account"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq status [--json] [--all-accounts]\n",
    .about =
        "Per priority: queued (not yet delivered), in flight (delivered, not\n"
        "acknowledged), delayed (waiting for backoff or a tenant bucket), dead;\n"
        "results kept; the Redis memory of the backlog and of the results kept\n"
        "(MEMORY USAGE of a sample of their keys, times the counts); each bucket's\n"
        "use against its limits right now; each consumer\n"
        "of the queues with its pending jobs and idle time; the settings.\n"
        "Delayed and dead are '-' per priority when there are over " PER_PRIO_CAP " of them.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

int llmq_cmd_status(struct llmq_cli *cli, int argc, char **argv)
{
    struct status_opts o = {0};
    int n_pos = 0;
    int code = llmq_cli_parse(cli, &spec, argc, argv, &o, NULL, 0, &n_pos);
    if (code >= 0)
        return code;
    char prefix[LLMQ_KEY_PREFIX_MAX];
    code = LLMQ_EXIT_OK;
    redisContext *c = llmq_cli_open(cli, o.all ? NULL : prefix, sizeof(prefix), &code);
    if (c == NULL)
        return code;
    if (!o.all) {
        code = show(cli, c, cli->account, o.as_json);
    } else if (llmq_cluster_of_context(c) != NULL) {
        code = show_all_cluster(cli, c, o.as_json);
    } else {
        char *names[MAX_BUCKETS];
        size_t n = scan_accounts(c, names, MAX_BUCKETS);
        for (size_t i = 0; i < n; i++) {
            if (show(cli, c, names[i], o.as_json) != LLMQ_EXIT_OK)
                code = LLMQ_EXIT_FAIL;
            free(names[i]);
        }
    }
    redisFree(c);
    return code;
}
