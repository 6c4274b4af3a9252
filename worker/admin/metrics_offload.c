/* The offload series of /metrics; see metrics_offload.h. */
#include "admin/metrics_offload.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/offload_stats.h"
#include "redis/script.h"

#define SLOTS 16
#define SEEN_MAX 256 /* (account, model) pairs whose counters are followed */

/* The counters' fields of jobs/offload_stats.h, in the order of seen.v */
static const char *const counter_fields[] = {"staged_ever", "offloaded_ever", "done_ever",
                                             "failed_ever"};
static const char *const counter_states[] = {"staged", "offloaded", "done", "failed"};
enum { N_JOB_COUNTERS = 4, V_ENDED = 4, V_SAVED = 5, N_V = 6 };

/* The last values of an (account, model)'s Redis counters this worker added. */
struct seen {
    char account[128], model[128];
    double v[N_V];
};

struct offload_probe {
    struct worker_offload_metrics *s;
    int slot;
    char account[128];
};

struct worker_offload_metrics {
    struct llmq_metric *jobs, *jobs_total, *batches, *ended, *enqueued, *limit, *saved;
    struct offload_probe probes[SLOTS];
    int pending[SLOTS];
    struct seen seen[SEEN_MAX];
    size_t n_seen;
};

static const char *const by_model[] = {"account", "model", NULL};
static const char *const by_state[] = {"account", "model", "state", NULL};

#define AT(f) offsetof(struct worker_offload_metrics, f)
static const struct llmq_metric_spec families[] = {
    {"llmq_offload_jobs",
     "Jobs of a model in offload now: staged for a provider batch, or offloaded (in an "
     "unfinished provider batch, its line not settled yet) (polled).",
     LLMQ_METRIC_GAUGE, by_state, NULL, 0, AT(jobs)},
    {"llmq_offload_jobs_total",
     "Jobs that offload staged, put in a provider batch's input file (offloaded), ended done "
     "from a provider batch, or dead-lettered from one (failed).",
     LLMQ_METRIC_COUNTER, by_state, NULL, 0, AT(jobs_total)},
    {"llmq_offload_batches", "Unfinished provider batches by state (polled).", LLMQ_METRIC_GAUGE,
     by_state, NULL, 0, AT(batches)},
    {"llmq_offload_batches_ended_total", "Provider batches that ended.", LLMQ_METRIC_COUNTER,
     by_model, NULL, 0, AT(ended)},
    {"llmq_offload_enqueued_tokens",
     "Estimated prompt tokens of a model's batches the provider holds unfinished: what its "
     "enqueued-token limit counts (polled).",
     LLMQ_METRIC_GAUGE, by_model, NULL, 0, AT(enqueued)},
    {"llmq_offload_queue_limit_tokens",
     "The provider's enqueued-token limit set for a model "
     "(llmq limits set --batch-queue-tokens; absent: none).",
     LLMQ_METRIC_GAUGE, by_model, NULL, 0, AT(limit)},
    {"llmq_offload_saved_usd_total",
     "USD that offload saved against the live price: the list price less the batch price "
     "of the usage of the jobs done in provider batches.",
     LLMQ_METRIC_COUNTER, by_model, NULL, 0, AT(saved)},
};
#undef AT

struct worker_offload_metrics *llmq_worker_offload_metrics_new(struct llmq_metrics *reg)
{
    struct worker_offload_metrics *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    if (!llmq_metrics_register_table(reg, families, sizeof(families) / sizeof(families[0]), s)) {
        free(s);
        return NULL;
    }
    return s;
}

static struct seen *seen_get(struct worker_offload_metrics *s, const char *account,
                             const char *model)
{
    for (size_t i = 0; i < s->n_seen; i++)
        if (strcmp(s->seen[i].account, account) == 0 && strcmp(s->seen[i].model, model) == 0)
            return &s->seen[i];
    if (s->n_seen == SEEN_MAX || strlen(account) >= 128 || strlen(model) >= 128)
        return NULL;
    struct seen *e = &s->seen[s->n_seen++];
    memset(e, 0, sizeof(*e));
    snprintf(e->account, sizeof(e->account), "%s", account);
    snprintf(e->model, sizeof(e->model), "%s", model);
    return e;
}

/* Adds to counter f (labels l) what Redis' value v grew by since *last. A
 * value below *last (Redis' counters reset) is taken as the new start. */
static void follow(struct llmq_metric *f, const char *const *l, double v, double *last)
{
    if (v > *last)
        llmq_metrics_add(f, l, v - *last);
    *last = v;
}

static void on_model(struct worker_offload_metrics *s, const char *account, const json_t *m)
{
    const char *model = json_string_value(json_object_get(m, "model"));
    if (model == NULL)
        return;
    const char *staged[] = {account, model, "staged"}, *off[] = {account, model, "offloaded"};
    llmq_metrics_set(s->jobs, staged, (double)json_integer_value(json_object_get(m, "staged")));
    llmq_metrics_set(s->jobs, off, (double)json_integer_value(json_object_get(m, "offloaded")));
    const char *am[] = {account, model};
    llmq_metrics_set(s->enqueued, am,
                     (double)json_integer_value(json_object_get(m, "enqueued_tokens")));
    const json_t *lim = json_object_get(m, "queue_limit_tokens");
    if (json_is_integer(lim))
        llmq_metrics_set(s->limit, am, (double)json_integer_value(lim));
    /* every state: one that has no batch now reads 0, not its last count */
    static const char *const states[] = {"building", "uploading", "uploaded",
                                         "creating", "submitted", "collecting"};
    const json_t *b = json_object_get(m, "batches");
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
        const char *l[] = {account, model, states[i]};
        llmq_metrics_set(s->batches, l, (double)json_integer_value(json_object_get(b, states[i])));
    }
    struct seen *e = seen_get(s, account, model);
    if (e == NULL)
        return;
    for (int k = 0; k < N_JOB_COUNTERS; k++) {
        const char *l[] = {account, model, counter_states[k]};
        follow(s->jobs_total, l, (double)json_integer_value(json_object_get(m, counter_fields[k])),
               &e->v[k]);
    }
    follow(s->ended, am, (double)json_integer_value(json_object_get(m, "batches_ended")),
           &e->v[V_ENDED]);
    follow(s->saved, am, json_real_value(json_object_get(m, "saved_usd")), &e->v[V_SAVED]);
}

static void on_reply(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct offload_probe *p = privdata;
    p->s->pending[p->slot]--;
    json_t *list = llmq_offload_stats_json(r);
    if (list == NULL)
        return; /* lost or refused: the last values stay */
    size_t i;
    const json_t *m;
    json_array_foreach(list, i, m)
    {
        on_model(p->s, p->account, m);
    }
    json_decref(list);
}

void llmq_worker_offload_metrics_poll(struct worker_offload_metrics *s, int slot,
                                      redisAsyncContext *ac, const char *prefix,
                                      const char *account)
{
    if (s == NULL || ac == NULL || slot < 0 || slot >= SLOTS || s->pending[slot] > 0)
        return;
    struct offload_probe *p = &s->probes[slot];
    *p = (struct offload_probe){.s = s, .slot = slot};
    snprintf(p->account, sizeof(p->account), "%s", account);
    const char *argv[] = {prefix};
    if (llmq_script_run_async(ac, LLMQ_SCRIPT_OFFLOAD_STATS, 1, 1, argv, NULL, on_reply, p) ==
        LLMQ_OK)
        s->pending[slot]++;
}

void llmq_worker_offload_metrics_free(struct worker_offload_metrics *s)
{
    free(s);
}
