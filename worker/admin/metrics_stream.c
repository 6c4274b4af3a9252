/* The streamed calls' metrics; see metrics_stream.h. */
#include "admin/metrics_stream.h"

#include <stdlib.h>

struct worker_stream_metrics {
    struct llmq_metric *in_progress, *ends, *events, *messages, *ttft, *duration;
};

static const double ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60};
static const double duration_bounds[] = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};

struct worker_stream_metrics *llmq_worker_stream_metrics_new(struct llmq_metrics *reg)
{
    static const char *const a[] = {"account", NULL};
    static const char *const ae[] = {"account", "end", NULL};
    enum llmq_metric_type c = LLMQ_METRIC_COUNTER, h = LLMQ_METRIC_HISTOGRAM;
    struct worker_stream_metrics *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->in_progress = llmq_metrics_register(reg, "llmq_worker_streams_in_progress",
                                           "Streamed answers being relayed to a gateway now.",
                                           LLMQ_METRIC_GAUGE, a, NULL, 0);
    s->ends = llmq_metrics_register(
        reg, "llmq_worker_streams_total",
        "Streamed calls by how their attempt ended (completed, error: broke off, aborted: the "
        "client or its gateway left, collected: nobody relays it).",
        c, ae, NULL, 0);
    s->events = llmq_metrics_register(reg, "llmq_worker_stream_events_total",
                                      "Events (chunks) of streamed answers relayed to gateways.", c,
                                      a, NULL, 0);
    s->messages = llmq_metrics_register(
        reg, "llmq_worker_stream_messages_total",
        "Relay messages sent (one carries the events of a few milliseconds of every stream "
        "to one gateway).",
        c, a, NULL, 0);
    s->ttft = llmq_metrics_register(reg, "llmq_worker_stream_ttft_seconds",
                                    "Time from a streamed request's sending to its first event.", h,
                                    a, ttft_bounds, sizeof(ttft_bounds) / sizeof(ttft_bounds[0]));
    s->duration = llmq_metrics_register(
        reg, "llmq_worker_stream_duration_seconds", "Time from a stream's first event to its end.",
        h, a, duration_bounds, sizeof(duration_bounds) / sizeof(duration_bounds[0]));
    if (!s->in_progress || !s->ends || !s->events || !s->messages || !s->ttft || !s->duration) {
        free(s);
        return NULL;
    }
    return s;
}

void llmq_worker_stream_metrics_free(struct worker_stream_metrics *s)
{
    free(s);
}

void llmq_worker_metrics_stream_first(struct worker_stream_metrics *s, const char *account,
                                      double ttft_s)
{
    if (s == NULL)
        return;
    const char *l[] = {account};
    llmq_metrics_observe(s->ttft, l, ttft_s > 0 ? ttft_s : 0);
    llmq_metrics_add(s->in_progress, l, 1);
}

void llmq_worker_metrics_stream_events(struct worker_stream_metrics *s, const char *account, long n)
{
    const char *l[] = {account};
    if (s != NULL && n > 0)
        llmq_metrics_add(s->events, l, (double)n);
}

void llmq_worker_metrics_stream_message(struct worker_stream_metrics *s, const char *account)
{
    const char *l[] = {account};
    if (s != NULL)
        llmq_metrics_add(s->messages, l, 1);
}

void llmq_worker_metrics_stream_end(struct worker_stream_metrics *s, const char *account,
                                    const char *end, double duration_s)
{
    if (s == NULL)
        return;
    const char *l[] = {account}, *le[] = {account, end};
    llmq_metrics_add(s->ends, le, 1);
    if (duration_s >= 0) {
        llmq_metrics_observe(s->duration, l, duration_s);
        llmq_metrics_add(s->in_progress, l, -1);
    }
}
