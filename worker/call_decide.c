/* What an answered call makes of its job's settle (call_decide.h): the
 * verdict of its classification (classify.h) turned into a settle mode,
 * values, a result line (result_line.h) and log lines. What it counts is
 * derived later from the class by llmq_worker_count_outcome. */
#include "call_decide.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/backoff.h"
#include "base/clock.h"
#include "base/log.h"
#include "http/http.h"
#include "openai/cut_off.h"
#include "openai/usage.h"
#include "auth_pause.h"
#include "calib_batch.h"
#include "classify.h"
#include "result_line.h"
#include "worker.h"

void llmq_worker_plan_retry(struct llmq_worker *w, struct worker_job *job, const char *reason,
                            int64_t hint_ms, int refund, char *line_if_dead)
{
    if (job->attempts >= job->max_attempts) {
        job->settle.mode = WORKER_SETTLE_DEAD;
        snprintf(job->settle.reason, sizeof(job->settle.reason), "attempts_exhausted: %s", reason);
        job->settle.line =
            line_if_dead ? line_if_dead : llmq_worker_error_line(job, "attempts_exhausted", reason);
        job->settle.actual_tokens = refund ? -1 : job->cost;
        return;
    }
    free(line_if_dead);
    struct llmq_backoff_policy policy = {.base_ms = w->cfg->backoff_base_ms,
                                         .cap_ms = w->cfg->backoff_cap_ms,
                                         .hint_jitter_ms = 100};
    job->settle.mode = WORKER_SETTLE_RETRY;
    job->settle.refund = refund;
    job->settle.delay_ms = llmq_backoff_delay_ms(&policy, job->attempts, hint_ms, &w->rng);
    snprintf(job->settle.reason, sizeof(job->settle.reason), "%s", reason);
    /* logged once its settle says what became of it (job_settle.c): a
     * named endpoint's fault may send it to another endpoint instead */
}

/* Records how far enqueue's prompt estimate was from the real prompt tokens
 * (shown by llmq status; calib_batch.h sums and writes them). */
static void record_calibration(const struct worker_job *job, int64_t actual_prompt_tokens)
{
    if (job->est_prompt_tokens >= 0)
        llmq_worker_calib_add(job->acct, job->model, job->est_prompt_tokens, actual_prompt_tokens);
}

/* A named endpoint refused its key (401/403) or has no quota left: the
 * endpoint is out until an operator enables it (the settle disables it),
 * not the account, and the job goes back untried to run elsewhere. Returns
 * 1 when that is c, with job's settle decided. */
static int endpoint_refused(struct worker_job *job, const struct llmq_http_response *resp,
                            const struct llmq_call_class *c)
{
    if (c->cause != LLMQ_CALL_CAUSE_AUTH && c->cause != LLMQ_CALL_CAUSE_QUOTA)
        return 0;
    const char *detail = c->eb.code[0] ? c->eb.code : c->eb.message;
    snprintf(job->settle.reason, sizeof(job->settle.reason), "http %ld %.200s", resp->status,
             detail[0] ? detail : (c->cause == LLMQ_CALL_CAUSE_AUTH ? "key refused" : "no quota"));
    LLMQ_LOG_JOB(LLMQ_LOG_ERROR, job->acct->cfg->name, job->id,
                 "endpoint %s: %s; it is disabled until `llmq endpoints enable %s`, its jobs go "
                 "to the model's other endpoints",
                 job->endpoint, job->settle.reason, job->endpoint);
    job->settle.mode = WORKER_SETTLE_HANDBACK;
    job->settle.refund = 1;
    return 1;
}

void llmq_worker_call_decide(struct llmq_worker *w, struct worker_job *job,
                             const struct llmq_http_response *resp, const struct llmq_call_class *c,
                             const char *body, size_t body_len)
{
    const char *acct = job->acct->cfg->name;
    if (job->endpoint != NULL && job->endpoint[0] != '\0' && endpoint_refused(job, resp, c))
        return;
    switch (c->verdict) {
    case LLMQ_CALL_DONE:
        job->settle.mode = WORKER_SETTLE_DONE;
        job->settle.actual_tokens = job->cost; /* no usage reported: keep the reservation */
        if (c->has_usage && (c->usage.present & LLMQ_USAGE_TOTAL))
            job->settle.actual_tokens = c->usage.total_tokens;
        if (c->has_usage && (c->usage.present & LLMQ_USAGE_INPUT)) {
            llmq_worker_settle_usage(&job->settle, &c->usage); /* spend budgets price it */
            record_calibration(job, c->usage.input_tokens);
        }
        job->settle.line = llmq_worker_result_line(job, resp, body, body_len, &c->eb, NULL, NULL);
        job->settle.nostore =
            llmq_openai_cut_off(body, body_len) ? LLMQ_WORKER_NOSTORE_CUT : LLMQ_WORKER_NOSTORE_NO;
        LLMQ_LOG_JOB(LLMQ_LOG_DEBUG, acct, job->id,
                     "done: http %ld, %lld tokens used of %lld reserved, %lld ms", resp->status,
                     (long long)job->settle.actual_tokens, (long long)job->cost,
                     (long long)resp->elapsed_ms);
        return;
    case LLMQ_CALL_HANDBACK:
        job->settle.mode = WORKER_SETTLE_HANDBACK;
        if (c->cause == LLMQ_CALL_CAUSE_STALE) {
            /* The reason tells the settle to lengthen the model's grant
             * lifetime (lua/job_settle.lua). */
            snprintf(job->settle.reason, sizeof(job->settle.reason), "%s", c->reason);
            if (resp->pool_full) {
                /* Not the network nor the host: the worker's own pool had
                 * fewer connections to the endpoint than calls for it. */
                w->stats.stale_pool++;
                LLMQ_LOG_JOB(LLMQ_LOG_WARN, acct, job->id,
                             "grant stale because the worker's connection pool held it: %zu "
                             "calls were in flight to its endpoint on %d connections when it "
                             "was submitted, and it waited %lld ms past its lifetime for one; "
                             "a bug in llmq's connection sizing (%lld such grants so far), "
                             "handed back untried",
                             resp->pool_ahead, resp->pool_connections,
                             (long long)(llmq_monotonic_ms() - job->send_by_ms),
                             (long long)w->stats.stale_pool);
            } else {
                LLMQ_LOG_JOB(LLMQ_LOG_INFO, acct, job->id,
                             "grant stale: the connection was ready %lld ms past its lifetime; "
                             "handed back untried",
                             (long long)(llmq_monotonic_ms() - job->send_by_ms));
            }
        }
        return;
    case LLMQ_CALL_AUTH:
        llmq_worker_auth_refused(job->acct, resp->status,
                                 c->eb.code[0] ? c->eb.code : c->eb.message);
        job->settle.mode = WORKER_SETTLE_AUTHPAUSE;
        snprintf(job->settle.reason, sizeof(job->settle.reason), "%s", c->reason);
        job->settle.refund = 1;
        return;
    case LLMQ_CALL_DEAD:
        job->settle.mode = WORKER_SETTLE_DEAD;
        snprintf(job->settle.reason, sizeof(job->settle.reason), "%s", c->reason);
        if (c->cause == LLMQ_CALL_CAUSE_TOO_BIG) {
            job->settle.line = llmq_worker_error_line(job, "response_too_big",
                                                      "the response exceeded the size limit");
            job->settle.actual_tokens = job->cost;
        } else {
            job->settle.line =
                llmq_worker_result_line(job, resp, body, body_len, &c->eb, NULL, NULL);
            job->settle.actual_tokens = c->refund ? -1 : job->cost;
        }
        return;
    case LLMQ_CALL_RETRY:
        break;
    }
    char *line = NULL;
    if (c->cause == LLMQ_CALL_CAUSE_INVALID_RESPONSE) {
        /* The body is kept for whoever looks at the dead letter, but the
         * line says it is no result. */
        line = llmq_worker_result_line(job, resp, body, body_len, &c->eb, "invalid_response",
                                       c->reason);
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, acct, job->id, "%s", c->reason);
    } else if (c->cause != LLMQ_CALL_CAUSE_TRANSPORT) {
        line = llmq_worker_result_line(job, resp, body, body_len, &c->eb, NULL, NULL);
    }
    if (c->cause == LLMQ_CALL_CAUSE_RATE_LIMIT) {
        job->settle.pause_ms = c->hint_ms > 0 ? c->hint_ms : w->cfg->backoff_base_ms;
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, acct, job->id, "429 from the API; pausing %s for %lld ms",
                     job->model, (long long)job->settle.pause_ms);
    }
    llmq_worker_plan_retry(w, job, c->reason, c->hint_ms, c->refund, line);
}
