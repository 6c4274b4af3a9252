/* The dashboard's snapshot as JSON (see snapshot.h). The reply's shape is
 * lua/top_snapshot.lua's header; a reply of another shape (an older
 * library) gives NULL rather than a guess. */
#include "dashboard/snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "redis/reply_read.h"

static int is_array(const redisReply *r, size_t min)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= min;
}

static long long at(const redisReply *a, size_t i)
{
    return i < a->elements ? llmq_reply_int_or(a->element[i], 0) : 0;
}

static const char *str_at(const redisReply *a, size_t i)
{
    return i < a->elements ? llmq_reply_str_or(a->element[i], "") : "";
}

/* Splits "<model>|<tenant>|<kind>" of P done_sec into the minute's rows. */
static void add_minute(json_t *rows, const char *field, long long n)
{
    const char *a = strchr(field, '|');
    const char *b = a ? strchr(a + 1, '|') : NULL;
    if (b == NULL)
        return;
    json_t *model = json_stringn(field, (size_t)(a - field));
    json_t *tenant = json_stringn(a + 1, (size_t)(b - a - 1));
    int tok = strcmp(b + 1, "tok") == 0;
    size_t i;
    json_t *row, *found = NULL;
    json_array_foreach(rows, i, row)
    {
        if (json_equal(json_object_get(row, "model"), model) &&
            json_equal(json_object_get(row, "tenant"), tenant))
            found = row;
    }
    if (found == NULL) {
        found = json_pack("{s:O, s:O, s:I, s:I}", "model", model, "tenant", tenant, "jobs",
                          (json_int_t)0, "tokens", (json_int_t)0);
        json_array_append_new(rows, found);
    }
    json_decref(model);
    json_decref(tenant);
    if (found != NULL)
        json_object_set_new(found, tok ? "tokens" : "jobs", json_integer(n));
}

/* views.users (borrowed: {"<tenant>|<user>": {queued, parked, jobs}}) as
 * new [{tenant, user, queued, parked, jobs}]. */
static json_t *users_of(const json_t *by)
{
    json_t *out = json_array();
    const char *tu;
    json_t *u;
    json_object_foreach((json_t *)by, tu, u)
    {
        const char *bar = strchr(tu, '|');
        if (bar == NULL)
            continue;
        json_array_append_new(
            out, json_pack("{s:s%, s:s, s:I, s:I, s:I}", "tenant", tu, (size_t)(bar - tu), "user",
                           bar + 1, "queued", json_integer_value(json_object_get(u, "queued")),
                           "parked", json_integer_value(json_object_get(u, "parked")), "jobs",
                           json_integer_value(json_object_get(u, "jobs"))));
    }
    return out;
}

json_t *gw_dash_snapshot_from_reply(const redisReply *r)
{
    if (!is_array(r, 7) || !is_array(r->element[1], 5) || !is_array(r->element[3], 0) ||
        !is_array(r->element[4], 0) || !is_array(r->element[5], 0) ||
        r->element[6]->type != REDIS_REPLY_STRING)
        return NULL;
    json_error_t je;
    json_t *views = json_loadb(r->element[6]->str, r->element[6]->len, 0, &je);
    if (!json_is_object(views))
        return json_decref(views), NULL;
    long long now = llmq_reply_int_or(r->element[0], 0);
    const redisReply *st = r->element[1], *q = r->element[3], *b = r->element[4],
                     *m = r->element[5];
    json_t *groups = json_object_get(views, "groups");
    json_t *rows = json_array(), *buckets = json_array(), *minute = json_array();
    for (size_t i = 0; i + 3 < q->elements; i += 4) {
        char g[1024];
        snprintf(g, sizeof(g), "%s|%s", str_at(q, i), str_at(q, i + 1));
        json_array_append_new(rows, json_pack("{s:s, s:s, s:I, s:b, s:I}", "model", str_at(q, i),
                                              "tenant", str_at(q, i + 1), "queued",
                                              (json_int_t)at(q, i + 2), "blocked",
                                              at(q, i + 3) != 0, "oldest_enq_ms",
                                              json_integer_value(json_object_get(groups, g))));
    }
    for (size_t i = 0; i + 5 < b->elements; i += 6)
        json_array_append_new(
            buckets,
            json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "name", str_at(b, i), "requests_used",
                      (json_int_t)at(b, i + 1), "tokens_used", (json_int_t)at(b, i + 2),
                      "requests_limit", (json_int_t)at(b, i + 3), "tokens_limit",
                      (json_int_t)at(b, i + 4), "period_ms", (json_int_t)at(b, i + 5)));
    for (size_t i = 0; i + 1 < m->elements; i += 2)
        add_minute(minute, str_at(m, i), at(m, i + 1));
    json_t *workers = json_array();
    const char *name;
    json_t *seen;
    json_t *info_of = json_object_get(views, "worker_info");
    json_t *jobs_of = json_object_get(views, "worker_jobs");
    json_object_foreach(json_object_get(views, "workers"), name, seen)
    {
        /* what the worker said it is (P winfo), when it did */
        json_t *info = json_object_get(info_of, name);
        json_t *eps = json_object_get(info, "endpoints");
        json_array_append_new(
            workers, json_pack("{s:s, s:I, s:I, s:s?, s:o}", "name", name, "seen_ms_ago",
                               (json_int_t)(now - json_integer_value(seen)), "in_flight",
                               json_integer_value(json_object_get(jobs_of, name)), "version",
                               json_string_value(json_object_get(info, "version")), "endpoints",
                               json_is_array(eps) ? json_incref(eps) : json_array()));
    }
    json_t *snap = json_pack(
        "{s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:I, s:o, s:o, s:o, s:O?, s:O?, s:O?, "
        "s:o, s:O?, s:o}",
        "now_ms", (json_int_t)now, "stats", "done", (json_int_t)at(st, 0), "dead",
        (json_int_t)at(st, 1), "cancelled", (json_int_t)at(st, 2), "http_429",
        (json_int_t)at(st, 3), "insufficient_quota", (json_int_t)at(st, 4), "http_429_spurious",
        (json_int_t)at(st, 5), "own_429_wait", (json_int_t)at(st, 6), "own_429_budget",
        (json_int_t)at(st, 7), "in_flight", (json_int_t)llmq_reply_int_or(r->element[2], 0), "rows",
        rows, "buckets", buckets, "minute", minute, "queues", json_object_get(views, "queues"),
        "delayed", json_object_get(views, "delayed"), "dead_letters",
        json_object_get(views, "dead_letters"), "workers", workers, "endpoints",
        json_object_get(views, "endpoints"), "users", users_of(json_object_get(views, "users")));
    json_decref(views);
    return snap;
}

/* 1 when bucket name is tenant's ("<model>/t/<tenant>"). */
static int bucket_of(const char *name, const char *tenant)
{
    const char *t = strstr(name, "/t/");
    return t != NULL && strcmp(t + 3, tenant) == 0;
}

/* The members of array a (borrowed) whose member key equals tenant, or (key
 * NULL) whose "name" is a bucket of tenant. */
static json_t *only_tenant(const json_t *a, const char *key, const char *tenant)
{
    json_t *out = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
    {
        const char *v = json_string_value(json_object_get(e, key ? key : "name"));
        if (v != NULL && (key ? strcmp(v, tenant) == 0 : bucket_of(v, tenant)))
            json_array_append(out, e);
    }
    return out;
}

json_t *gw_dash_snapshot_for_tenant(const json_t *snap, const char *tenant)
{
    return json_pack("{s:O, s:s, s:o, s:o, s:o, s:o}", "now_ms", json_object_get(snap, "now_ms"),
                     "tenant", tenant, "rows",
                     only_tenant(json_object_get(snap, "rows"), "tenant", tenant), "buckets",
                     only_tenant(json_object_get(snap, "buckets"), NULL, tenant), "minute",
                     only_tenant(json_object_get(snap, "minute"), "tenant", tenant), "users",
                     only_tenant(json_object_get(snap, "users"), "tenant", tenant));
}

/* A chart point's figures of bucket e (borrowed; a snapshot's bucket or an
 * endpoint's model, both with requests_used/_limit and tokens_used/_limit):
 * new [requests used, requests limit, tokens used, tokens limit]. */
static json_t *bucket_tuple(const json_t *e)
{
    return json_pack("[O, O, O, O]", json_object_get(e, "requests_used"),
                     json_object_get(e, "requests_limit"), json_object_get(e, "tokens_used"),
                     json_object_get(e, "tokens_limit"));
}

json_t *gw_dash_snapshot_point(const json_t *snap)
{
    const json_t *st = json_object_get(snap, "stats");
    json_t *queued = json_object(), *b = json_object();
    const char *prio;
    json_t *q;
    json_object_foreach((json_t *)json_object_get(snap, "queues"), prio, q)
    {
        json_object_set(queued, prio, json_object_get(q, "queued"));
    }
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(snap, "buckets"), i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name != NULL)
            json_object_set_new(b, name, bucket_tuple(e));
    }
    /* and every endpoint's bucket of each model it serves */
    json_t *ep;
    json_array_foreach(json_object_get(json_object_get(snap, "endpoints"), "endpoints"), i, ep)
    {
        size_t k;
        json_t *m;
        json_array_foreach(json_object_get(ep, "models"), k, m)
        {
            const char *name = json_string_value(json_object_get(m, "bucket"));
            if (name != NULL)
                json_object_set_new(b, name, bucket_tuple(m));
        }
    }
    return json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:o, s:o}", "t",
                     json_object_get(snap, "now_ms"), "done", json_object_get(st, "done"),
                     "http_429", json_object_get(st, "http_429"), "insufficient_quota",
                     json_object_get(st, "insufficient_quota"), "http_429_spurious",
                     json_object_get(st, "http_429_spurious"), "own_429_wait",
                     json_object_get(st, "own_429_wait"), "own_429_budget",
                     json_object_get(st, "own_429_budget"), "queued", queued, "b", b);
}

json_t *gw_dash_point_for_tenant(const json_t *point, const char *tenant)
{
    json_t *b = json_object();
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(point, "b"), name, v)
    {
        if (bucket_of(name, tenant))
            json_object_set(b, name, v);
    }
    return json_pack("{s:O, s:o}", "t", json_object_get(point, "t"), "b", b);
}
