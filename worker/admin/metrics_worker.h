/* The worker's metrics: its metric families (metrics.h), the one-line hooks
 * the flows call as jobs move, the queue-depth poll, and the admin endpoint
 * (admin_http.h) with its readiness rule.
 *
 * Every hook is a no-op when the metrics could not be set up, so the flows
 * never check. Metrics are always counted; the endpoint and the queue-depth
 * poll run only with --metrics-port. */
#ifndef LLMQ_WORKER_METRICS_WORKER_H
#define LLMQ_WORKER_METRICS_WORKER_H

#include <stddef.h>
#include <stdint.h>

struct llmq_worker;
struct worker_account;
struct worker_job;
struct llmq_http_response;

/* Sets up w->metrics (after the accounts have started) and, when
 * w->cfg->metrics_port > 0, starts the endpoint on the loop. Returns 0, or -1
 * when the endpoint cannot listen (the reason is logged): the worker should
 * exit then, since it was asked to be scraped. */
int llmq_worker_metrics_start(struct llmq_worker *w);

/* Stops the endpoint and frees w->metrics. Call after the accounts' Redis
 * connections are freed (their pending queue-depth callbacks point here) and
 * before the loop is destroyed. */
void llmq_worker_metrics_free(struct llmq_worker *w);

/* Returns new Prometheus text of every family (what /metrics serves; free()
 * it) with its length in *len, or NULL without metrics or memory. */
char *llmq_worker_metrics_render(struct llmq_worker *w, size_t *len);

/* The streamed calls' metrics of w (metrics_stream.h, whose hooks use it),
 * or NULL without metrics. */
struct worker_stream_metrics *llmq_worker_metrics_of_streams(struct llmq_worker *w);

/* A job was granted by dispatch (counts it and its reserved tokens). */
void llmq_worker_metrics_dispatched(struct llmq_worker *w, const struct worker_job *job);

/* The limiter told account a to wait wait_ms before asking again. */
void llmq_worker_metrics_wait(struct worker_account *a, int64_t wait_ms);

/* Dispatch granted a job of model under arrival guard guard_ms (the gauge). */
void llmq_worker_metrics_guard(struct worker_account *a, const char *model, int64_t guard_ms);

struct llmq_call_class;

/* How one attempt ended, as the counts see it (call.c fills it). */
struct worker_attempt_end {
    const struct llmq_http_response *resp; /* borrowed; NULL: nothing was sent */
    const struct llmq_call_class *c;       /* resp's classification (classify.h); NULL: none */
    int by_class; /* 1: c decided the settle (call_decide.h); 0: the stream relay did */
};

/* The job's attempt ended with job->settle.mode decided: counts its
 * outcome (succeeded, retried, dead or handed back; an authpause is handed
 * back), the tokens used, and what its classification says (429s, auth
 * refusals, invalid responses, transport, rate-limit and server errors,
 * prompt tokens against the estimate), once, in the summary (w->stats) and
 * in the metrics alike — the one place either counts an attempt, derived
 * from (job, at) alone, so the two cannot disagree. at (borrowed; NULL:
 * nothing was sent, nothing classified) gives the status label and the
 * call's duration; job->settle.status_label is set to that label. A dead
 * decision is counted later, by what its settle wrote
 * (llmq_worker_count_dead_letter). Counts w->stats also without metrics. */
void llmq_worker_count_outcome(struct llmq_worker *w, struct worker_job *job,
                               const struct worker_attempt_end *at);

/* The settle of job (borrowed), decided dead, wrote its dead letter (an
 * entry of P dead: lua/job_settle.lua's reply says so): counts it, in the
 * summary and in llmq_jobs_dead_total under the status label its outcome
 * chose (job->settle.status_label). A dead decision whose settle wrote none
 * (the job cancelled or ended meanwhile, a gateway's synchronous call, a
 * failover) is not counted dead. */
void llmq_worker_count_dead_letter(struct llmq_worker *w, const struct worker_job *job);

#endif
