/* The worker's metrics and admin endpoint; see metrics_worker.h.
 *
 * Counters and histograms are fed by hooks from the flows as events happen.
 * Gauges of the process (requests in flight, readiness) are read when a
 * scrape renders. Queue depths live in Redis: every DEPTH_EVERY_S seconds
 * each account's command connection is sent one pipelined batch of cheap reads
 * (LLEN of the backlog and XPENDING summary of the stream per priority,
 * ZCARD of delayed, XLEN of dead), whose replies set the gauges; a batch
 * still unanswered is not sent again, and nothing waits for it, so a slow Redis only makes them
 * stale. */
#include "admin/metrics_worker.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/script.h"

#include "admin/admin_http.h"
#include "http/http.h"
#include "base/log.h"
#include "admin/metrics.h"
#include "admin/metrics_spend.h"
#include "admin/metrics_offload.h"
#include "admin/metrics_stream.h"
#include "auth_pause.h"
#include "classify.h"
#include "worker.h"
#include "llmq/priority.h"

#define DEPTH_EVERY_S 5.0
#define DEPTH_PROBES 8

/* One queue-depth read in flight: which gauge its reply sets. */
struct depth_probe {
    struct llmq_worker_metrics *wm;
    int account;
    int kind; /* 0-2: LLEN backlog:<prio>; 3-5: XPENDING q:<prio>; 6: ZCARD delayed; 7: XLEN dead */
};

struct llmq_worker_metrics {
    struct llmq_worker *w;
    struct llmq_metrics *reg;
    struct llmq_metric *dispatched, *succeeded, *retried, *dead, *handed_back, *http_429;
    struct llmq_metric *in_flight, *in_hand, *queue, *pending, *delayed, *dead_jobs;
    struct llmq_metric *wait_s, *latency_s, *tok_reserved, *tok_used, *prompt_est, *prompt_act;
    struct llmq_metric *redis_up, *ready, *draining, *auth_paused, *invalid_resp;
    struct llmq_metric *stale, *stale_pool, *guard;
    /* per endpoint (`llmq endpoints`): this worker's calls, and the shared
     * state polled from Redis with the depths (lua/endpoint_list.lua) */
    struct llmq_metric *ep_requests, *ep_latency, *ep_up, *ep_used, *ep_limit, *ep_lat_shared;
    int ep_pending[LLMQ_WORKER_MAX_ACCOUNTS];
    struct llmq_admin_http *admin;
    struct worker_spend_metrics *spend;     /* budgets and today's spend, polled with the depths */
    struct worker_offload_metrics *offload; /* offload per model, polled with the depths */
    struct worker_stream_metrics *streams;  /* streamed calls (metrics_stream.h) */
    ev_timer depth_timer;
    struct depth_probe probes[LLMQ_WORKER_MAX_ACCOUNTS][DEPTH_PROBES];
    int depth_pending[LLMQ_WORKER_MAX_ACCOUNTS]; /* probes unanswered */
};

static const double wait_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60};
static const double latency_bounds[] = {0.025, 0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                        5,     10,   30,  60,   120, 300};

static const char *const by_model[] = {"account", "model", NULL};
static const char *const by_status[] = {"account", "model", "status", NULL};
static const char *const by_cause[] = {"account", "model", "cause", NULL};

#define AT(f) offsetof(struct llmq_worker_metrics, f)
#define COUNTER LLMQ_METRIC_COUNTER
static const struct llmq_metric_spec job_families[] = {
    {"llmq_jobs_dispatched_total", "Jobs granted by the limiter and sent (one per attempt).",
     COUNTER, by_model, NULL, 0, AT(dispatched)},
    {"llmq_jobs_succeeded_total", "Attempts that ended with a result, by HTTP status.", COUNTER,
     by_status, NULL, 0, AT(succeeded)},
    {"llmq_jobs_retried_total",
     "Attempts requeued with backoff, by HTTP status or transport outcome.", COUNTER, by_status,
     NULL, 0, AT(retried)},
    {"llmq_jobs_dead_total",
     "Jobs this worker dead-lettered after a call, by HTTP status or outcome (the "
     "dispatch script's own, e.g. expired or never fitting, show in llmq_dead_jobs).",
     COUNTER, by_status, NULL, 0, AT(dead)},
    {"llmq_jobs_handed_back_total",
     "Jobs handed back untried (at shutdown, or their "
     "grant went stale before it was sent).",
     COUNTER, by_model, NULL, 0, AT(handed_back)},
    {"llmq_grants_stale_total",
     "Grants handed back unsent: their lifetime passed before the connection was ready "
     "(the arrival guard's bound; refunded, granted again, no attempt counted).",
     COUNTER, by_model, NULL, 0, AT(stale)},
    {"llmq_grants_stale_pool_total",
     "Stale grants whose call waited for one of the worker's own connections (all those "
     "to its endpoint were taken): a bug in llmq's connection sizing, logged as a warning "
     "(also counted in llmq_grants_stale_total).",
     COUNTER, by_model, NULL, 0, AT(stale_pool)},
    {"llmq_http_429_total",
     "429 responses from the API, by cause (rate_limit or insufficient_quota).", COUNTER, by_cause,
     NULL, 0, AT(http_429)},
    {"llmq_tokens_reserved_total", "Tokens reserved at dispatch (estimated cost).", COUNTER,
     by_model, NULL, 0, AT(tok_reserved)},
    {"llmq_tokens_used_total", "Tokens settled for succeeded jobs (the API's usage).", COUNTER,
     by_model, NULL, 0, AT(tok_used)},
    {"llmq_prompt_tokens_estimated_total",
     "Prompt tokens enqueue estimated, for jobs whose usage reported prompt tokens.", COUNTER,
     by_model, NULL, 0, AT(prompt_est)},
    {"llmq_prompt_tokens_actual_total", "Prompt tokens the API reported for the same jobs.",
     COUNTER, by_model, NULL, 0, AT(prompt_act)},
    {"llmq_invalid_responses_total",
     "2xx responses whose body the endpoint does not send (not JSON, wrong shape, cut "
     "stream): failed attempts, retried, dead-lettered as invalid_response.",
     COUNTER, by_model, NULL, 0, AT(invalid_resp)},
};
#undef COUNTER
#undef AT

static int register_jobs(struct llmq_worker_metrics *m)
{
    return llmq_metrics_register_table(m->reg, job_families,
                                       sizeof(job_families) / sizeof(job_families[0]), m);
}

static int register_gauges(struct llmq_worker_metrics *m)
{
    static const char *const a[] = {"account", NULL};
    static const char *const ap[] = {"account", "priority", NULL};
    static const char *const am[] = {"account", "model", NULL};
    struct llmq_metrics *r = m->reg;
    enum llmq_metric_type g = LLMQ_METRIC_GAUGE;
    m->in_flight = llmq_metrics_register(r, "llmq_requests_in_flight",
                                         "HTTP requests to the API in flight.", g, NULL, NULL, 0);
    m->in_hand = llmq_metrics_register(r, "llmq_jobs_in_hand",
                                       "Jobs held by this worker, from dispatch to settled.", g,
                                       NULL, NULL, 0);
    m->queue = llmq_metrics_register(
        r, "llmq_queue_jobs", "Jobs waiting in a priority's queues, not yet delivered (polled).", g,
        ap, NULL, 0);
    m->pending = llmq_metrics_register(r, "llmq_queue_pending_jobs",
                                       "Jobs delivered to some worker and not yet settled "
                                       "(polled).",
                                       g, ap, NULL, 0);
    m->delayed = llmq_metrics_register(r, "llmq_delayed_jobs",
                                       "Jobs waiting for their retry or parked time (polled).", g,
                                       a, NULL, 0);
    m->dead_jobs = llmq_metrics_register(
        r, "llmq_dead_jobs", "Entries in the dead-letter stream (polled).", g, a, NULL, 0);
    m->redis_up = llmq_metrics_register(r, "llmq_redis_connected",
                                        "1 when both Redis connections of the account are up.", g,
                                        a, NULL, 0);
    m->ready = llmq_metrics_register(r, "llmq_worker_ready", "1 when /readyz answers 200.", g, NULL,
                                     NULL, 0);
    m->draining = llmq_metrics_register(r, "llmq_worker_draining",
                                        "1 once the worker stops taking jobs.", g, NULL, NULL, 0);
    m->wait_s = llmq_metrics_register(
        r, "llmq_limiter_wait_seconds", "Waits the limiter returned to dispatch.",
        LLMQ_METRIC_HISTOGRAM, a, wait_bounds, sizeof(wait_bounds) / sizeof(wait_bounds[0]));
    m->latency_s = llmq_metrics_register(r, "llmq_request_duration_seconds",
                                         "Time of each API call, submit to response.",
                                         LLMQ_METRIC_HISTOGRAM, am, latency_bounds,
                                         sizeof(latency_bounds) / sizeof(latency_bounds[0]));
    m->auth_paused = llmq_metrics_register(
        r, "llmq_account_auth_paused",
        "1 while the account is paused because the API refused its key (401/403).", g, a, NULL, 0);
    m->guard = llmq_metrics_register(
        r, "llmq_arrival_guard_ms",
        "The model's arrival guard at its last grant: how much longer than its period a "
        "window admission counts (learned, or pinned by the policy).",
        g, am, NULL, 0);
    return m->in_flight && m->in_hand && m->queue && m->pending && m->delayed && m->dead_jobs &&
           m->redis_up && m->ready && m->draining && m->wait_s && m->latency_s && m->auth_paused &&
           m->guard;
}

static int register_endpoints(struct llmq_worker_metrics *m)
{
    static const char *const aemo[] = {"account", "endpoint", "model", "outcome", NULL};
    static const char *const ae[] = {"account", "endpoint", NULL};
    static const char *const aes[] = {"account", "endpoint", "state", NULL};
    static const char *const aemd[] = {"account", "endpoint", "model", "dimension", NULL};
    struct llmq_metrics *r = m->reg;
    enum llmq_metric_type g = LLMQ_METRIC_GAUGE;
    m->ep_requests = llmq_metrics_register(
        r, "llmq_endpoint_requests_total",
        "This worker's calls per endpoint, by what they said about it (ok, fail: 5xx, "
        "transport or an invalid 2xx; limit: a rate-limit 429; auth; quota; other: the job's "
        "own fault).",
        LLMQ_METRIC_COUNTER, aemo, NULL, 0);
    m->ep_latency = llmq_metrics_register(r, "llmq_endpoint_latency_seconds",
                                          "Time of this worker's calls per endpoint.",
                                          LLMQ_METRIC_HISTOGRAM, ae, latency_bounds,
                                          sizeof(latency_bounds) / sizeof(latency_bounds[0]));
    m->ep_up = llmq_metrics_register(r, "llmq_endpoint_state",
                                     "1 for the endpoint's shared state (ok, cooling, probing, "
                                     "disabled), 0 for the others (polled).",
                                     g, aes, NULL, 0);
    m->ep_used = llmq_metrics_register(
        r, "llmq_endpoint_bucket_used",
        "Requests or tokens counted in the endpoint's bucket of the model now (polled).", g, aemd,
        NULL, 0);
    m->ep_limit = llmq_metrics_register(r, "llmq_endpoint_bucket_limit",
                                        "The endpoint's limit of the model per period; -1 none "
                                        "(polled).",
                                        g, aemd, NULL, 0);
    m->ep_lat_shared = llmq_metrics_register(
        r, "llmq_endpoint_recent_latency_ms",
        "The endpoint's recent latency as every worker measured it (routing fastest; polled).", g,
        ae, NULL, 0);
    return m->ep_requests && m->ep_latency && m->ep_up && m->ep_used && m->ep_limit &&
           m->ep_lat_shared;
}

/* ---- readiness and scrape-time gauges ---- */

static int account_ready(const struct worker_account *a, char *reason, size_t n)
{
    if (!llmq_redis_async_ready(a->cmd) || !llmq_redis_async_ready(a->wake)) {
        const struct llmq_redis_async *down = llmq_redis_async_ready(a->cmd) ? a->wake : a->cmd;
        const char *why = llmq_redis_async_last_error(down);
        snprintf(reason, n, "redis not connected (account %s): %s", a->cfg->name,
                 why[0] ? why : "connecting");
        return 0;
    }
    const char *paused = llmq_worker_auth_pause_why(a);
    if (paused != NULL) {
        snprintf(reason, n,
                 "account %s paused: %s; fix the key and restart, or run llmq account resume",
                 a->cfg->name, paused);
        return 0;
    }
    if (!a->scripts_ok) {
        snprintf(reason, n, "no dispatch answered since redis connected (account %s)",
                 a->cfg->name);
        return 0;
    }
    return 1;
}

static int on_ready(void *privdata, char *reason, size_t n)
{
    struct llmq_worker *w = privdata;
    if (w->draining) {
        snprintf(reason, n, "draining");
        return 0;
    }
    for (int i = 0; i < w->n_accounts; i++)
        if (!account_ready(&w->accounts[i], reason, n))
            return 0;
    return 1;
}

static char *on_metrics(void *privdata, size_t *len)
{
    return llmq_worker_metrics_render(privdata, len);
}

char *llmq_worker_metrics_render(struct llmq_worker *w, size_t *len)
{
    struct llmq_worker_metrics *m = w->metrics;
    if (m == NULL)
        return NULL;
    char reason[256];
    llmq_metrics_set(m->in_flight, NULL, w->http ? (double)llmq_http_inflight(w->http) : 0);
    llmq_metrics_set(m->in_hand, NULL, w->slots.in_hand);
    llmq_metrics_set(m->ready, NULL, on_ready(w, reason, sizeof(reason)));
    llmq_metrics_set(m->draining, NULL, w->draining);
    for (int i = 0; i < w->n_accounts; i++) {
        const struct worker_account *a = &w->accounts[i];
        const char *l[] = {a->cfg->name};
        llmq_metrics_set(m->redis_up, l,
                         llmq_redis_async_ready(a->cmd) && llmq_redis_async_ready(a->wake));
        llmq_metrics_set(m->auth_paused, l, llmq_worker_auth_pause_why(a) != NULL);
    }
    return llmq_metrics_render(m->reg, len);
}

/* ---- queue depth poll ---- */

static void on_depth(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct depth_probe *p = privdata;
    struct llmq_worker_metrics *m = p->wm;
    const redisReply *r = reply;
    m->depth_pending[p->account]--;
    if (r == NULL)
        return;      /* connection lost: keep the last values */
    long long v = 0; /* an error (no stream or group yet) means none */
    if (r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
             r->element[0]->type == REDIS_REPLY_INTEGER)
        v = r->element[0]->integer; /* XPENDING summary: count first */
    const char *name = m->w->accounts[p->account].cfg->name;
    const char *l[] = {name,
                       p->kind < 6 ? llmq_priority_name(llmq_priority_by_rank(p->kind % 3)) : NULL};
    struct llmq_metric *f = p->kind < 3    ? m->queue
                            : p->kind < 6  ? m->pending
                            : p->kind == 6 ? m->delayed
                                           : m->dead_jobs;
    llmq_metrics_set(f, l, (double)v);
}

/* lua/endpoint_list.lua's JSON for account i: the shared state per
 * endpoint as gauges. */
struct ep_poll {
    struct llmq_worker_metrics *wm;
    int account;
};
static struct ep_poll ep_polls[LLMQ_WORKER_MAX_ACCOUNTS];

static void on_endpoints(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct ep_poll *p = privdata;
    struct llmq_worker_metrics *m = p->wm;
    m->ep_pending[p->account] = 0;
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        return;
    json_t *o = json_loadb(r->str, r->len, 0, NULL);
    const char *acct = m->w->accounts[p->account].cfg->name;
    static const char *const states[] = {"ok", "cooling", "probing", "disabled"};
    size_t i, j;
    json_t *e, *md;
    json_array_foreach(json_object_get(o, "endpoints"), i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *state = json_string_value(json_object_get(e, "state"));
        if (name == NULL || state == NULL)
            continue;
        for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++) {
            const char *l[] = {acct, name, states[k]};
            llmq_metrics_set(m->ep_up, l, strcmp(state, states[k]) == 0);
        }
        const char *ll[] = {acct, name};
        llmq_metrics_set(m->ep_lat_shared, ll, json_number_value(json_object_get(e, "lat_ms")));
        json_array_foreach(json_object_get(e, "models"), j, md)
        {
            const char *model = json_string_value(json_object_get(md, "model"));
            if (model == NULL)
                continue;
            const char *lr[] = {acct, name, model, "requests"},
                       *lt[] = {acct, name, model, "tokens"};
            llmq_metrics_set(m->ep_used, lr,
                             json_number_value(json_object_get(md, "requests_used")));
            llmq_metrics_set(m->ep_used, lt, json_number_value(json_object_get(md, "tokens_used")));
            llmq_metrics_set(m->ep_limit, lr,
                             json_number_value(json_object_get(md, "requests_limit")));
            llmq_metrics_set(m->ep_limit, lt,
                             json_number_value(json_object_get(md, "tokens_limit")));
        }
    }
    json_decref(o);
}

static void endpoints_send(struct llmq_worker_metrics *m, int i)
{
    struct worker_account *a = &m->w->accounts[i];
    redisAsyncContext *ac = llmq_redis_async_context(a->cmd);
    if (ac == NULL || m->ep_pending[i] || m->w->cfg->n_endpoint_keys == 0)
        return;
    ep_polls[i] = (struct ep_poll){.wm = m, .account = i};
    const char *argv[1] = {a->prefix};
    if (llmq_script_run_async(ac, LLMQ_SCRIPT_ENDPOINT_LIST, 1, 1, argv, NULL, on_endpoints,
                              &ep_polls[i]) == LLMQ_OK)
        m->ep_pending[i] = 1;
}

static void depth_send(struct llmq_worker_metrics *m, int i)
{
    struct worker_account *a = &m->w->accounts[i];
    redisAsyncContext *ac = llmq_redis_async_context(a->cmd);
    if (ac == NULL || m->depth_pending[i] > 0)
        return;
    for (int k = 0; k < DEPTH_PROBES; k++) {
        char key[LLMQ_KEY_FIXED_MAX];
        struct depth_probe *p = &m->probes[i][k];
        *p = (struct depth_probe){.wm = m, .account = i, .kind = k};
        const char *cmd = k < 3 ? "LLEN" : k < 6 ? "XPENDING" : k == 6 ? "ZCARD" : "XLEN";
        const char *prio = llmq_priority_name(llmq_priority_by_rank(k % 3));
        enum llmq_key_kind kind = k < 3    ? LLMQ_KEY_BACKLOG
                                  : k < 6  ? LLMQ_KEY_QUEUE
                                  : k == 6 ? LLMQ_KEY_DELAYED
                                           : LLMQ_KEY_DEAD;
        if (llmq_key(key, sizeof(key), a->prefix, kind, k < 6 ? prio : NULL, NULL) != LLMQ_OK)
            continue; /* cannot happen: the prefix fits LLMQ_KEY_PREFIX_MAX */
        const char *argv[3] = {cmd, key, LLMQ_GROUP};
        if (redisAsyncCommandArgv(ac, on_depth, p, k >= 3 && k < 6 ? 3 : 2, argv, NULL) == REDIS_OK)
            m->depth_pending[i]++;
    }
}

static void on_depth_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_worker_metrics *m = t->data;
    for (int i = 0; i < m->w->n_accounts; i++) {
        depth_send(m, i);
        struct worker_account *a = &m->w->accounts[i];
        llmq_worker_spend_metrics_poll(m->spend, i, llmq_redis_async_context(a->cmd), a->prefix,
                                       a->cfg->name);
        llmq_worker_offload_metrics_poll(m->offload, i, llmq_redis_async_context(a->cmd), a->prefix,
                                         a->cfg->name);
        endpoints_send(m, i);
    }
}

/* ---- setup ---- */

int llmq_worker_metrics_start(struct llmq_worker *w)
{
    struct llmq_worker_metrics *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->reg = llmq_metrics_new()) == NULL || !register_jobs(m) ||
        !register_gauges(m) || !register_endpoints(m) ||
        (m->spend = llmq_worker_spend_metrics_new(m->reg)) == NULL ||
        (m->offload = llmq_worker_offload_metrics_new(m->reg)) == NULL ||
        (m->streams = llmq_worker_stream_metrics_new(m->reg)) == NULL) {
        LLMQ_LOG(LLMQ_LOG_ERROR, "metrics: out of memory; running without metrics");
        if (m != NULL) {
            llmq_worker_spend_metrics_free(m->spend);
            llmq_worker_offload_metrics_free(m->offload);
            llmq_metrics_free(m->reg);
        }
        free(m);
        return w->cfg->metrics_port > 0 ? -1 : 0;
    }
    m->w = w;
    w->metrics = m;
    if (w->cfg->metrics_port <= 0)
        return 0;
    struct llmq_error err = {0};
    struct llmq_admin_http_handlers h = {.metrics = on_metrics, .ready = on_ready, .privdata = w};
    m->admin = llmq_admin_http_start(w->loop, w->cfg->metrics_host, w->cfg->metrics_port, &h, &err);
    if (m->admin == NULL) {
        LLMQ_LOG(LLMQ_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    ev_timer_init(&m->depth_timer, on_depth_timer, 0.2, DEPTH_EVERY_S);
    m->depth_timer.data = m;
    ev_timer_start(w->loop, &m->depth_timer);
    LLMQ_LOG(LLMQ_LOG_INFO, "metrics and health on http://%s:%d (/metrics, /healthz, /readyz)",
             w->cfg->metrics_host, w->cfg->metrics_port);
    return 0;
}

void llmq_worker_metrics_free(struct llmq_worker *w)
{
    struct llmq_worker_metrics *m = w->metrics;
    if (m == NULL)
        return;
    ev_timer_stop(w->loop, &m->depth_timer);
    llmq_admin_http_free(m->admin);
    llmq_worker_spend_metrics_free(m->spend);
    llmq_worker_offload_metrics_free(m->offload);
    llmq_worker_stream_metrics_free(m->streams);
    llmq_metrics_free(m->reg);
    free(m);
    w->metrics = NULL;
}

struct worker_stream_metrics *llmq_worker_metrics_of_streams(struct llmq_worker *w)
{
    return w->metrics != NULL ? w->metrics->streams : NULL;
}

/* ---- hooks ---- */

void llmq_worker_metrics_dispatched(struct llmq_worker *w, const struct worker_job *job)
{
    struct llmq_worker_metrics *m = w->metrics;
    if (m == NULL)
        return;
    const char *l[] = {job->acct->cfg->name, job->model};
    llmq_metrics_add(m->dispatched, l, 1);
    llmq_metrics_add(m->tok_reserved, l, job->cost > 0 ? (double)job->cost : 0);
}

void llmq_worker_metrics_wait(struct worker_account *a, int64_t wait_ms)
{
    struct llmq_worker_metrics *m = a->w->metrics;
    if (m == NULL)
        return;
    const char *l[] = {a->cfg->name};
    llmq_metrics_observe(m->wait_s, l, wait_ms / 1000.0);
}

void llmq_worker_metrics_guard(struct worker_account *a, const char *model, int64_t guard_ms)
{
    struct llmq_worker_metrics *m = a->w->metrics;
    if (m == NULL)
        return;
    const char *l[] = {a->cfg->name, model};
    llmq_metrics_set(m->guard, l, (double)guard_ms);
}

static void count_429(struct llmq_worker *w, const struct worker_job *job, int quota)
{
    struct llmq_worker_metrics *m = w->metrics;
    if (m == NULL)
        return;
    const char *l[] = {job->acct->cfg->name, job->model,
                       quota ? "insufficient_quota" : "rate_limit"};
    llmq_metrics_add(m->http_429, l, 1);
}

static void count_prompt(struct llmq_worker *w, const struct worker_job *job,
                         int64_t actual_prompt_tokens)
{
    struct llmq_worker_metrics *m = w->metrics;
    if (m == NULL || job->est_prompt_tokens < 0 || actual_prompt_tokens < 0)
        return;
    const char *l[] = {job->acct->cfg->name, job->model};
    llmq_metrics_add(m->prompt_est, l, (double)job->est_prompt_tokens);
    llmq_metrics_add(m->prompt_act, l, (double)actual_prompt_tokens);
}

static void count_invalid_response(struct llmq_worker *w, const struct worker_job *job)
{
    struct llmq_worker_metrics *m = w->metrics;
    if (m == NULL)
        return;
    const char *l[] = {job->acct->cfg->name, job->model};
    llmq_metrics_add(m->invalid_resp, l, 1);
}

/* What the classification of an attempt's response (at->c) adds to the
 * counts: the 429s and, when it decided the settle, its cause (auth
 * refusals, invalid responses, transport errors, rate limits, server
 * errors) and the prompt tokens of a result. A named endpoint's refused key
 * or quota puts the endpoint out, not the call: only the refusal counts. */
static void count_cause(struct llmq_worker *w, const struct worker_job *job,
                        const struct worker_attempt_end *at)
{
    const struct llmq_call_class *c = at->c;
    const struct llmq_http_response *resp = at->resp;
    struct llmq_worker_stats *s = &w->stats;
    if (resp != NULL && resp->outcome == LLMQ_HTTP_OK && c->cause != LLMQ_CALL_CAUSE_OK &&
        resp->status == 429)
        count_429(w, job, c->cause == LLMQ_CALL_CAUSE_QUOTA);
    if (!at->by_class)
        return;
    if (c->cause == LLMQ_CALL_CAUSE_AUTH)
        s->auth_refused++;
    int named = job->endpoint != NULL && job->endpoint[0] != '\0';
    if (named && (c->cause == LLMQ_CALL_CAUSE_AUTH || c->cause == LLMQ_CALL_CAUSE_QUOTA))
        return;
    if (c->verdict == LLMQ_CALL_DONE && c->has_usage && (c->usage.present & LLMQ_USAGE_INPUT))
        count_prompt(w, job, c->usage.input_tokens);
    if (c->verdict != LLMQ_CALL_RETRY)
        return;
    switch (c->cause) {
    case LLMQ_CALL_CAUSE_INVALID_RESPONSE:
        s->invalid_responses++;
        count_invalid_response(w, job);
        break;
    case LLMQ_CALL_CAUSE_TRANSPORT:
        s->transport_errors++;
        break;
    case LLMQ_CALL_CAUSE_RATE_LIMIT:
        s->rate_limited++;
        break;
    case LLMQ_CALL_CAUSE_SERVER:
    case LLMQ_CALL_CAUSE_QUOTA:
    case LLMQ_CALL_CAUSE_CLIENT:
        s->server_errors++;
        break;
    default:
        break;
    }
}

void llmq_worker_count_outcome(struct llmq_worker *w, struct worker_job *job,
                               const struct worker_attempt_end *at)
{
    const struct llmq_http_response *resp = at != NULL ? at->resp : NULL;
    if (at != NULL && at->c != NULL)
        count_cause(w, job, at);
    struct llmq_worker_stats *s = &w->stats;
    struct llmq_worker_metrics *m = w->metrics;
    int64_t *stat;
    struct llmq_metric *family;
    int64_t used = 0;
    switch (job->settle.mode) {
    case WORKER_SETTLE_DONE:
        stat = &s->succeeded;
        family = m ? m->succeeded : NULL;
        used = job->settle.actual_tokens > 0 ? job->settle.actual_tokens : 0;
        break;
    case WORKER_SETTLE_RETRY:
        stat = &s->retried;
        family = m ? m->retried : NULL;
        break;
    case WORKER_SETTLE_DEAD:
        /* counted once its settle says the dead letter was written
         * (llmq_worker_count_dead_letter): a job cancelled or ended by
         * another delivery meanwhile, or a gateway's synchronous call, is
         * none; only the label is chosen now, from the response */
        stat = NULL;
        family = NULL;
        break;
    case WORKER_SETTLE_HANDBACK:
    case WORKER_SETTLE_AUTHPAUSE: /* handed back too; the refusal is counted apart */
        stat = &s->handed_back;
        family = m ? m->handed_back : NULL;
        break;
    default:
        return;
    }
    if (stat != NULL)
        (*stat)++;
    s->tokens_used += used;
    char *status = job->settle.status_label;
    snprintf(status, sizeof(job->settle.status_label), "not_sent");
    if (resp != NULL && resp->outcome == LLMQ_HTTP_OK)
        snprintf(status, sizeof(job->settle.status_label), "%ld", resp->status);
    else if (resp != NULL)
        snprintf(status, sizeof(job->settle.status_label), "%s",
                 llmq_http_outcome_name(resp->outcome));
    if (m == NULL)
        return;
    const char *l[] = {job->acct->cfg->name, job->model, status};
    if (resp != NULL && resp->outcome != LLMQ_HTTP_CANCELLED)
        llmq_metrics_observe(m->latency_s, l, resp->elapsed_ms / 1000.0);
    if (family != NULL)
        llmq_metrics_add(family, l, 1);
    if (resp != NULL && resp->outcome == LLMQ_HTTP_STALE)
        llmq_metrics_add(m->stale, l, 1);
    if (resp != NULL && resp->outcome == LLMQ_HTTP_STALE && resp->pool_full)
        llmq_metrics_add(m->stale_pool, l, 1);
    if (job->settle.mode == WORKER_SETTLE_DONE)
        llmq_metrics_add(m->tok_used, l, (double)used);
    if (job->endpoint != NULL && job->endpoint[0] != '\0') {
        const char *o = job->settle.outcome[0] ? job->settle.outcome : "other";
        const char *le[] = {job->acct->cfg->name, job->endpoint, job->model, o};
        llmq_metrics_add(m->ep_requests, le, 1);
        if (resp != NULL && resp->outcome != LLMQ_HTTP_CANCELLED)
            llmq_metrics_observe(m->ep_latency, le, resp->elapsed_ms / 1000.0);
    }
}

void llmq_worker_count_dead_letter(struct llmq_worker *w, const struct worker_job *job)
{
    w->stats.dead++;
    if (w->metrics == NULL)
        return;
    const char *l[] = {job->acct->cfg->name, job->model,
                       job->settle.status_label[0] ? job->settle.status_label : "not_sent"};
    llmq_metrics_add(w->metrics->dead, l, 1);
}
