/* The dashboard's reads and actions (see actions.h). Each runs the CLI's
 * script for the same operation; a retry or purge first lists the dead
 * letters the viewer may touch (lua/dead_list.lua, with its tenant), so a
 * tenant's admin never reaches another tenant's job even by naming it. */
#include "dashboard/actions.h"

#include <hiredis/async.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batches.h"
#include "http.h"
#include "jobs/attempts_log.h"
#include "jobs/job_id.h"
#include "jobs/job_pack.h"
#include "list.h"
#include "redis/reply_read.h"
#include "redis/script.h"
#include "request_step.h"

#define DEAD_SHOWN "200"
#define JOB_TEXT_MAX (1u << 20) /* the body shown: at most this much of it */

static const char *query(struct gw_request *r, const char *name)
{
    const char *v =
        r->conn ? MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name) : NULL;
    return v != NULL && strlen(v) <= 200 ? v : "";
}

/* Runs script id with argv (borrowed) for r: cb gets r, kept until it
 * returns (request_step.h). Answers 503 itself when Redis is away. */
static void run(struct gw_request *r, enum llmq_script_id id, int argc, const char **argv,
                llmq_script_cb *cb)
{
    redisAsyncContext *ac = gw_redis(r->gw);
    if (ac == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    if (gw_step_script(r, ac, id, 1, argc, argv, NULL, cb, r) != LLMQ_OK)
        gw_respond_no_redis(r);
}

/* Answers a script's failure: Redis away (503) or its error (500). */
static int script_failed(struct gw_request *r, const redisReply *x)
{
    if (x == NULL) {
        gw_respond_no_redis(r);
        return 1;
    }
    if (x->type == REDIS_REPLY_ERROR) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "%s", x->str);
        return 1;
    }
    return 0;
}

/* ---- dead letters ---- */

static void on_dead_list(redisAsyncContext *ac, redisReply *x, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    if (!script_failed(r, x)) {
        json_error_t je;
        json_t *list = x->type == REDIS_REPLY_STRING ? json_loadb(x->str, x->len, 0, &je) : NULL;
        if (json_is_object(list)) { /* cjson's empty table */
            json_decref(list);
            list = json_array();
        }
        gw_respond_json(r, 200, json_pack("{s:o?}", "dead", list));
    }
}

void gw_dash_dead_list(struct gw_request *r, const struct gw_dash_viewer *v)
{
    const char *argv[] = {r->gw->prefix, DEAD_SHOWN, v->tenant, query(r, "model"),
                          query(r, "reason")};
    run(r, LLMQ_SCRIPT_DEAD_LIST, 5, argv, on_dead_list);
}

/* What a retry or purge was asked (r->state between its two steps). */
struct dead_act {
    int retry;
    json_t *ids; /* the ids named (an object used as a set), NULL: all matching */
};

static void dead_act_free(void *p)
{
    struct dead_act *a = p;
    if (a != NULL)
        json_decref(a->ids);
    free(a);
}

static void on_dead_done(redisAsyncContext *ac, redisReply *x, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    if (!script_failed(r, x)) {
        json_t *out = json_array();
        for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
            const redisReply *e = x->element[i];
            if (e->type == REDIS_REPLY_ARRAY && e->elements >= 2)
                json_array_append_new(
                    out, json_pack("{s:s, s:s}", "id", llmq_reply_str_or(e->element[0], ""),
                                   "outcome", llmq_reply_str_or(e->element[1], "")));
        }
        gw_respond_json(r, 200, json_pack("{s:o}", "results", out));
    }
}

static void on_dead_listed(redisAsyncContext *ac, redisReply *x, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    struct dead_act *a = r->state;
    if (!script_failed(r, x)) {
        json_error_t je;
        json_t *list = x->type == REDIS_REPLY_STRING ? json_loadb(x->str, x->len, 0, &je) : NULL;
        const char **argv = calloc(GW_DASH_DEAD_MAX + 2, sizeof(*argv));
        int argc = 2;
        size_t i;
        json_t *e;
        json_array_foreach(json_is_array(list) ? list : NULL, i, e)
        {
            const char *id = json_string_value(json_object_get(e, "id"));
            if (argv != NULL && id != NULL && id[0] != '\0' && argc < GW_DASH_DEAD_MAX + 2 &&
                (a->ids == NULL || json_object_get(a->ids, id) != NULL))
                argv[argc++] = id;
        }
        if (argv == NULL) {
            gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        } else if (argc == 2) {
            /* nothing this viewer may touch: no call (with no ids, the
             * scripts would take the oldest entries of every tenant) */
            gw_respond_json(r, 200, json_pack("{s:[]}", "results"));
        } else {
            char n[16];
            snprintf(n, sizeof(n), "%d", argc - 2);
            argv[0] = r->gw->prefix;
            argv[1] = n;
            run(r, a->retry ? LLMQ_SCRIPT_DEAD_RETRY : LLMQ_SCRIPT_DEAD_PURGE, argc, argv,
                on_dead_done);
        }
        free(argv);
        json_decref(list);
    }
}

void gw_dash_dead_act(struct gw_request *r, const struct gw_dash_viewer *v, int retry)
{
    json_error_t je;
    json_t *body = r->body ? json_loadb(r->body, r->body_len, 0, &je) : NULL;
    json_t *ids = json_object_get(body, "ids");
    int all = json_is_true(json_object_get(body, "all"));
    const char *model = json_string_value(json_object_get(body, "model"));
    const char *reason = json_string_value(json_object_get(body, "reason"));
    if (!json_is_object(body) || (!all && !json_is_array(ids)) || (all && ids != NULL) ||
        (model && strlen(model) > 200) || (reason && strlen(reason) > 200)) {
        json_decref(body);
        gw_respond_errorf(r, 400, "invalid_request_error", NULL, NULL,
                          "The body must be {\"ids\": [job ids]} or {\"all\": true, \"model\": "
                          "M, \"reason\": R} (model and reason optional).");
        return;
    }
    struct dead_act *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        json_decref(body);
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    a->retry = retry;
    if (!all) {
        a->ids = json_object();
        size_t i;
        json_t *e;
        json_array_foreach(ids, i, e)
        {
            if (json_is_string(e))
                json_object_set(a->ids, json_string_value(e), json_true());
        }
    }
    r->state = a;
    r->state_free = dead_act_free;
    char max[16];
    snprintf(max, sizeof(max), "%d", GW_DASH_DEAD_MAX);
    const char *argv[] = {r->gw->prefix, max, v->tenant, all && model ? model : "",
                          all && reason ? reason : ""};
    run(r, LLMQ_SCRIPT_DEAD_LIST, 5, argv, on_dead_listed);
    json_decref(body);
}

/* ---- endpoints ---- */

static void on_endpoint(redisAsyncContext *ac, redisReply *x, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    if (x == NULL)
        gw_respond_no_redis(r);
    else if (x->type == REDIS_REPLY_ERROR)
        gw_respond_errorf(r, strstr(x->str, "ENOTFOUND") ? 404 : 400, "invalid_request_error",
                          "name", NULL, "%s", x->str);
    else
        gw_respond_json(r, 200, json_pack("{s:b}", "ok", 1));
}

void gw_dash_endpoint_act(struct gw_request *r, const struct gw_dash_viewer *v)
{
    if (v->tenant[0] != '\0') {
        gw_respond_errorf(r, 403, "invalid_request_error", NULL, "forbidden",
                          "Endpoints are the whole account's: a tenant's key cannot change them.");
        return;
    }
    json_error_t je;
    json_t *body = r->body ? json_loadb(r->body, r->body_len, 0, &je) : NULL;
    const char *name = json_string_value(json_object_get(body, "name"));
    const char *op = json_string_value(json_object_get(body, "op"));
    const char *why = json_string_value(json_object_get(body, "why"));
    if (name == NULL || !llmq_name_valid(name) || op == NULL ||
        (strcmp(op, "enable") != 0 && strcmp(op, "disable") != 0) ||
        (why != NULL && strlen(why) > 200)) {
        json_decref(body);
        gw_respond_errorf(r, 400, "invalid_request_error", NULL, NULL,
                          "The body must be {\"name\": ENDPOINT, \"op\": \"enable\" or "
                          "\"disable\", \"why\": TEXT (optional)}.");
        return;
    }
    const char *argv[] = {r->gw->prefix, op, name,
                          why != NULL && why[0] ? why : "disabled from the dashboard"};
    run(r, LLMQ_SCRIPT_ENDPOINT_ADMIN, strcmp(op, "enable") == 0 ? 3 : 4, argv, on_endpoint);
    json_decref(body);
}

/* ---- one job ---- */

static const char *const job_fields[] = {
    "state",  "prio",     "model",        "tenant",     "user", "url",         "enq_ms", "run_ms",
    "fin_ms", "attempts", "max_attempts", "last_error", "pin",  "deadline_ms", "body",   "att",
};

/* The calls of log (field att) as members of job (borrowed): "calls_total"
 * (every call recorded) and "calls" (the last 8, oldest first:
 * jobs/attempts_log.h). */
static void job_attempts(json_t *job, const char *log, size_t len)
{
    long long total = 0;
    json_t *list = llmq_attempts_log_json(log, len, &total);
    if (list == NULL)
        return;
    json_object_set_new(job, "calls_total", json_integer(total));
    json_object_set_new(job, "calls", list);
}
#define N_JOB_FIELDS (sizeof(job_fields) / sizeof(job_fields[0]))

/* How many of the newest gateway Batches a custom_id is looked for in, and
 * how many of their jobs are listed when more than one has it. */
#define JOB_FIND_BATCHES "1000"
#define JOB_FIND_MAX "20"

struct job_get {
    char tenant[LLMQ_JOB_ID_MAX + 1];
    char id[LLMQ_JOB_ID_MAX + 1];     /* the job read */
    char custom[LLMQ_JOB_ID_MAX + 1]; /* the id of the custom_id typed, "": none */
    int searched;                     /* job_find ran: a miss now is a 404 */
};

static void job_fields_run(struct gw_request *r, const char *id);
static void on_job_find(redisAsyncContext *ac, redisReply *x, void *privdata);

static void on_job(redisAsyncContext *ac, redisReply *x, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    struct job_get *g = r->state;
    if (!script_failed(r, x)) {
        json_t *job = json_object();
        int any = 0;
        for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i < x->elements && i < N_JOB_FIELDS;
             i++) {
            const redisReply *e = x->element[i];
            if (e->type != REDIS_REPLY_STRING)
                continue;
            any = 1;
            if (strcmp(job_fields[i], "att") == 0) {
                job_attempts(job, e->str, e->len);
            } else if (strcmp(job_fields[i], "body") == 0) {
                char *text = NULL;
                size_t len = 0;
                if (llmq_job_unpack(e->str, e->len, JOB_TEXT_MAX, &text, &len, NULL) == LLMQ_OK)
                    json_object_set_new(job, "body", json_stringn_nocheck(text, len));
                free(text);
            } else {
                json_object_set_new(job, job_fields[i], json_stringn_nocheck(e->str, e->len));
            }
        }
        const char *t = json_string_value(json_object_get(job, "tenant"));
        if (!any || (g->tenant[0] && (t == NULL || strcmp(t, g->tenant) != 0))) {
            json_decref(job); /* another tenant's job is as absent as no job */
            if (!g->searched && g->custom[0] != '\0') {
                /* not a job id: a custom_id of a gateway Batch's job? */
                g->searched = 1;
                const char *argv[] = {r->gw->prefix, g->custom, g->tenant, JOB_FIND_BATCHES,
                                      JOB_FIND_MAX};
                run(r, LLMQ_SCRIPT_JOB_FIND, 5, argv, on_job_find);
            } else {
                gw_respond_errorf(r, 404, "invalid_request_error", "id", NULL,
                                  "No such job: no job has this id, and no job of the newest "
                                  "%s batches has this custom_id.",
                                  JOB_FIND_BATCHES);
            }
        } else {
            json_object_set_new(job, "id", json_string(g->id));
            gw_respond_json(r, 200, job);
        }
    }
}

/* job_find's reply {batches looked at, job id, ...}: one job is shown, more
 * are listed for the page to choose ({"matches": [id, ...]}). */
static void on_job_find(redisAsyncContext *ac, redisReply *x, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    if (script_failed(r, x))
        return;
    size_t n = x->type == REDIS_REPLY_ARRAY && x->elements > 0 ? x->elements - 1 : 0;
    if (n == 0) {
        gw_respond_errorf(r, 404, "invalid_request_error", "id", NULL,
                          "No such job: no job has this id, and no job of the newest %s "
                          "batches has this custom_id.",
                          JOB_FIND_BATCHES);
    } else if (n == 1) {
        char id[LLMQ_JOB_ID_MAX + 1];
        snprintf(id, sizeof(id), "%s", llmq_reply_str_or(x->element[1], ""));
        job_fields_run(r, id);
    } else {
        json_t *ids = json_array();
        for (size_t i = 1; i < x->elements; i++)
            json_array_append_new(ids, json_string(llmq_reply_str_or(x->element[i], "")));
        gw_respond_json(r, 200, json_pack("{s:o}", "matches", ids));
    }
}

/* Reads job id's fields for r (its job_get in r->state); on_job answers. */
static void job_fields_run(struct gw_request *r, const char *id)
{
    struct job_get *g = r->state;
    snprintf(g->id, sizeof(g->id), "%s", id);
    const char *argv[2 + N_JOB_FIELDS] = {r->gw->prefix, id};
    for (size_t i = 0; i < N_JOB_FIELDS; i++)
        argv[2 + i] = job_fields[i];
    run(r, LLMQ_SCRIPT_JOB_FIELDS, (int)(2 + N_JOB_FIELDS), argv, on_job);
}

void gw_dash_job_get(struct gw_request *r, const struct gw_dash_viewer *v)
{
    const char *typed = query(r, "id");
    /* a job id, or a custom_id that is no name (spaces, '/', ...): the id
     * `llmq enqueue` made of it (jobs/job_id.h) */
    char id[LLMQ_JOB_ID_MAX + 1];
    if (llmq_name_valid(typed))
        snprintf(id, sizeof(id), "%s", typed);
    else if (typed[0] == '\0' ||
             llmq_job_id_from_custom(typed, strlen(typed), id, sizeof(id), NULL) != LLMQ_OK) {
        gw_respond_errorf(r, 400, "invalid_request_error", "id", NULL,
                          "id must be a job id or a custom_id (1..200 bytes).");
        return;
    }
    struct job_get *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    snprintf(g->tenant, sizeof(g->tenant), "%s", v->tenant);
    /* a Batch's job is "<batch id>.<id of its custom_id>" (batches.c): the
     * part after the batch's id must fit too */
    if (llmq_job_id_from_custom(typed, strlen(typed), g->custom, sizeof(g->custom), NULL) !=
        LLMQ_OK)
        g->custom[0] = '\0';
    r->state = g;
    r->state_free = free;
    job_fields_run(r, id);
}

/* ---- batches ---- */

static const char *const batch_fields[] = {"status", "endpoint", "total",      "completed",
                                           "failed", "tenant",   "created_at", NULL};

static long long field_ll(const redisReply *v, size_t i)
{
    const char *s = gw_list_val(v, i);
    return s != NULL ? strtoll(s, NULL, 10) : 0;
}

/* A gateway batch with its progress, when the viewer may see it (its
 * tenant in r->key.tenant: "" every batch). */
static json_t *batch_item(struct gw_request *r, const char *id, const redisReply *v)
{
    const char *status = gw_list_val(v, 0), *tenant = gw_list_val(v, 5);
    if (!gw_batch_visible(status) ||
        (r->key.tenant[0] != '\0' && strcmp(tenant ? tenant : "", r->key.tenant) != 0))
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:I}", "id", id, "status", status,
                     "endpoint", gw_list_val(v, 1) ? gw_list_val(v, 1) : "", "total",
                     (json_int_t)field_ll(v, 2), "completed", (json_int_t)field_ll(v, 3), "failed",
                     (json_int_t)field_ll(v, 4), "tenant", tenant ? tenant : "", "created_at",
                     (json_int_t)field_ll(v, 6));
}

static const struct gw_list_spec batch_list = {
    .index = LLMQ_KEY_GW_BATCHES,
    .object = LLMQ_KEY_GW_BATCH,
    .fields = batch_fields,
    .item = batch_item,
    .limit_default = 50,
    .limit_max = 100,
};

void gw_dash_batches(struct gw_request *r, const struct gw_dash_viewer *v)
{
    snprintf(r->key.tenant, sizeof(r->key.tenant), "%s", v->tenant);
    gw_list_respond(r, &batch_list);
}

static void on_pbatches(redisAsyncContext *ac, redisReply *x, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    if (!script_failed(r, x)) {
        json_t *list = json_array();
        /* {staging, {id, field, value, ...}, ...} (lua/pbatch_list.lua) */
        for (size_t i = 1; x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
            const redisReply *b = x->element[i];
            if (b->type != REDIS_REPLY_ARRAY || b->elements < 1)
                continue;
            json_t *o = json_pack("{s:s}", "id", llmq_reply_str_or(b->element[0], ""));
            for (size_t k = 1; o != NULL && k + 1 < b->elements; k += 2)
                json_object_set_new(o, llmq_reply_str_or(b->element[k], ""),
                                    json_string(llmq_reply_str_or(b->element[k + 1], "")));
            json_array_append_new(list, o);
        }
        gw_respond_json(r, 200, json_pack("{s:o}", "data", list));
    }
}

void gw_dash_pbatches(struct gw_request *r, const struct gw_dash_viewer *v)
{
    if (v->tenant[0] != '\0') { /* the account's: a tenant's viewer sees none */
        gw_respond_json(r, 200, json_pack("{s:[]}", "data"));
        return;
    }
    const char *argv[] = {r->gw->prefix, "", "50"};
    run(r, LLMQ_SCRIPT_PBATCH_LIST, 3, argv, on_pbatches);
}

/* ---- budgets ---- */

/* 1 when budget scope belongs to tenant ("t/<tenant>" or below it). */
static int scope_of(const char *scope, const char *tenant)
{
    size_t n = strlen(tenant);
    return strncmp(scope, "t/", 2) == 0 && strncmp(scope + 2, tenant, n) == 0 &&
           (scope[2 + n] == '\0' || scope[2 + n] == '/');
}

static void on_budgets(redisAsyncContext *ac, redisReply *x, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    if (!script_failed(r, x)) {
        json_t *list = json_array();
        /* one {id, scope, unit, limit, period, on_exhaust, spent,
         * period_start_ms, period_end_ms, parked_nodes, parked_jobs} per
         * budget (lua/budget_list.lua) */
        for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
            const redisReply *b = x->element[i];
            if (b->type != REDIS_REPLY_ARRAY || b->elements != 11)
                continue;
            const char *scope = llmq_reply_str_or(b->element[1], "");
            if (r->key.tenant[0] != '\0' && !scope_of(scope, r->key.tenant))
                continue;
            json_array_append_new(
                list, json_pack("{s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:I}", "id",
                                llmq_reply_str_or(b->element[0], ""), "scope", scope, "unit",
                                llmq_reply_str_or(b->element[2], ""), "limit",
                                (json_int_t)llmq_reply_int_or(b->element[3], 0), "period",
                                llmq_reply_str_or(b->element[4], ""), "spent",
                                (json_int_t)llmq_reply_int_or(b->element[6], 0), "period_end_ms",
                                (json_int_t)llmq_reply_int_or(b->element[8], 0), "waiting_jobs",
                                (json_int_t)llmq_reply_int_or(b->element[10], 0)));
        }
        gw_respond_json(r, 200, json_pack("{s:o}", "data", list));
    }
}

void gw_dash_budgets(struct gw_request *r, const struct gw_dash_viewer *v)
{
    snprintf(r->key.tenant, sizeof(r->key.tenant), "%s", v->tenant);
    const char *argv[] = {r->gw->prefix};
    run(r, LLMQ_SCRIPT_BUDGET_LIST, 1, argv, on_budgets);
}
