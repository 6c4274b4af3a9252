/* /metrics of llmq-gateway: Prometheus text format 0.0.4 from gw->stats. */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "dashboard/dashboard.h"
#include "gateway.h"
#include "http.h"
#include "stream.h"

char *gw_metrics_text(struct gw *gw, size_t *len)
{
    const struct gw_stats *s = &gw->stats;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        return NULL;
    fprintf(f,
            "# HELP llmq_gateway_requests_total HTTP requests received.\n"
            "# TYPE llmq_gateway_requests_total counter\n"
            "llmq_gateway_requests_total %llu\n"
            "# HELP llmq_gateway_responses_total HTTP responses by status class.\n"
            "# TYPE llmq_gateway_responses_total counter\n"
            "llmq_gateway_responses_total{class=\"2xx\"} %llu\n"
            "llmq_gateway_responses_total{class=\"4xx\"} %llu\n"
            "llmq_gateway_responses_total{class=\"5xx\"} %llu\n"
            "# HELP llmq_gateway_calls_enqueued_total Synchronous calls enqueued as jobs.\n"
            "# TYPE llmq_gateway_calls_enqueued_total counter\n"
            "llmq_gateway_calls_enqueued_total %llu\n"
            "# HELP llmq_gateway_calls_cancelled_total Calls whose job was cancelled unsent "
            "(caller left, or waited too long).\n"
            "# TYPE llmq_gateway_calls_cancelled_total counter\n"
            "llmq_gateway_calls_cancelled_total %llu\n"
            "# HELP llmq_gateway_calls_timed_out_total Calls answered 429 or 504 for waiting "
            "too long.\n"
            "# TYPE llmq_gateway_calls_timed_out_total counter\n"
            "llmq_gateway_calls_timed_out_total %llu\n"
            "# HELP llmq_gateway_own_429_total Calls answered 429 by llmq itself, not the "
            "API, by cause: wait (waited --max-wait-ms for room under llmq's limits), budget "
            "(an llmq spend budget refused it). The account's sum of every gateway is in "
            "llmq status --json (totals.own_429_wait, totals.own_429_budget).\n"
            "# TYPE llmq_gateway_own_429_total counter\n"
            "llmq_gateway_own_429_total{cause=\"wait\"} %llu\n"
            "llmq_gateway_own_429_total{cause=\"budget\"} %llu\n"
            "# HELP llmq_gateway_call_bodies_decoded_total Call bodies decoded (once per call, "
            "synchronous or streamed).\n"
            "# TYPE llmq_gateway_call_bodies_decoded_total counter\n"
            "llmq_gateway_call_bodies_decoded_total %llu\n"
            "# HELP llmq_gateway_calls_waiting Calls waiting for their job now.\n"
            "# TYPE llmq_gateway_calls_waiting gauge\n"
            "llmq_gateway_calls_waiting %lld\n"
            "# HELP llmq_gateway_uploads_validating Uploaded files being checked line by line "
            "now.\n"
            "# TYPE llmq_gateway_uploads_validating gauge\n"
            "llmq_gateway_uploads_validating %lld\n"
            "# HELP llmq_gateway_files_created_total Files uploaded.\n"
            "# TYPE llmq_gateway_files_created_total counter\n"
            "llmq_gateway_files_created_total %llu\n"
            "# HELP llmq_gateway_batches_created_total Batches created.\n"
            "# TYPE llmq_gateway_batches_created_total counter\n"
            "llmq_gateway_batches_created_total %llu\n"
            "# HELP llmq_gateway_batches_cancelled_total Batches cancelled.\n"
            "# TYPE llmq_gateway_batches_cancelled_total counter\n"
            "llmq_gateway_batches_cancelled_total %llu\n"
            "# HELP llmq_gateway_batch_inputs_checked_again_total Batches made of a file stored "
            "before the records layout, whose lines were checked again.\n"
            "# TYPE llmq_gateway_batch_inputs_checked_again_total counter\n"
            "llmq_gateway_batch_inputs_checked_again_total %llu\n"
            "# HELP llmq_gateway_redis_ready 1 while both Redis connections are up.\n"
            "# TYPE llmq_gateway_redis_ready gauge\n"
            "llmq_gateway_redis_ready %d\n",
            s->requests, s->responses_2xx, s->responses_4xx, s->responses_5xx, s->calls_enqueued,
            s->calls_cancelled, s->calls_timed_out, s->own_429_wait, s->own_429_budget,
            s->call_bodies_decoded, s->calls_waiting, s->uploads_validating, s->files_created,
            s->batches_created, s->batches_cancelled, s->batch_inputs_checked_again,
            llmq_redis_async_ready(gw->redis) && llmq_redis_async_ready(gw->events));
    unsigned long long head_timeouts, evicted;
    gw_http_slow_counts(gw->http, &head_timeouts, &evicted);
    fprintf(f,
            "# HELP llmq_gateway_slow_clients_closed_total Connections closed for a request "
            "head or body that did not arrive in time (--header-timeout-ms, "
            "--body-timeout-ms), or as the oldest of too many waiting for a head.\n"
            "# TYPE llmq_gateway_slow_clients_closed_total counter\n"
            "llmq_gateway_slow_clients_closed_total{why=\"head_timeout\"} %llu\n"
            "llmq_gateway_slow_clients_closed_total{why=\"body_timeout\"} %llu\n"
            "llmq_gateway_slow_clients_closed_total{why=\"too_many_pending\"} %llu\n",
            head_timeouts, s->body_timeouts, evicted);
    gw_streams_metrics(gw->streams, f);
    gw_dash_metrics(gw->dash, f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}
