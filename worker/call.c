/* One job's call to the API (docs/DESIGN.md §3.3-3.5): sends it, classifies the
 * outcome with the pure llmq_call_classify (classify.h, where the table of
 * statuses lives) and turns the verdict into the settle to send (job_settle.c),
 * counters, metrics and log lines. A response's x-ratelimit-* headers go to
 * the settle, where the model bucket learns from them, when they can matter
 * (learn_throttle.h); its calibration sample is summed in memory and written
 * in batches (calib_batch.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "openai/errorbody.h"
#include "http/http.h"
#include "base/log.h"
#include "admin/metrics_worker.h"
#include "openai/usage.h"
#include "base/clock.h"
#include "auth_pause.h"
#include "calib_batch.h"
#include "call.h"
#include "classify.h"
#include "job_settle.h"
#include "learn_throttle.h"
#include "model_state.h"
#include "result_line.h"
#include "stream_call.h"
#include "worker.h"

/* Puts the response's header values into job's settle when the throttle
 * (learn_throttle.h) says they can matter; else they stay -1, not sent. An
 * (account, model) the worker cannot track (model_state.h) always sends. */
static void copy_headers(struct worker_job *job, long status,
                         const struct llmq_ratelimit_headers *h)
{
    int64_t v;
    struct worker_model *m = llmq_worker_model(job->acct, job->model);
    if (m != NULL && !llmq_worker_learn_send(&m->headers_sent_ms, status, h, llmq_monotonic_ms()))
        return;
    if (llmq_ratelimit_headers_get(h, LLMQ_RLH_REMAINING_REQUESTS, &v))
        job->settle.rem_req = v;
    if (llmq_ratelimit_headers_get(h, LLMQ_RLH_REMAINING_TOKENS, &v))
        job->settle.rem_tok = v;
    if (llmq_ratelimit_headers_get(h, LLMQ_RLH_RESET_REQUESTS_MS, &v))
        job->settle.reset_req_ms = v;
    if (llmq_ratelimit_headers_get(h, LLMQ_RLH_RESET_TOKENS_MS, &v))
        job->settle.reset_tok_ms = v;
    if (llmq_ratelimit_headers_get(h, LLMQ_RLH_LIMIT_REQUESTS, &v))
        job->settle.lim_req = v;
    if (llmq_ratelimit_headers_get(h, LLMQ_RLH_LIMIT_TOKENS, &v))
        job->settle.lim_tok = v;
}

/* Sets job up to retry (or, out of attempts, to die) after reason. */
static void plan_retry(struct llmq_worker *w, struct worker_job *job, const char *reason,
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
    LLMQ_LOG_JOB(LLMQ_LOG_INFO, job->acct->cfg->name, job->id,
                 "retry (attempt %d of %d) in %lld ms: %s", job->attempts + 1, job->max_attempts,
                 (long long)job->settle.delay_ms, reason);
}

/* Records how far enqueue's prompt estimate was from the real prompt tokens
 * (shown by llmq status; calib_batch.h sums and writes them). */
static void record_calibration(const struct worker_job *job, int64_t actual_prompt_tokens)
{
    if (job->est_prompt_tokens >= 0)
        llmq_worker_calib_add(job->acct, job->model, job->est_prompt_tokens, actual_prompt_tokens);
}

/* What call class c says about the endpoint that answered (settle outcome,
 * lua/lib/endpoints.lua): ok, fail (its fault: 5xx, transport, an invalid
 * 2xx), limit (a rate-limit 429), auth, quota, or "" (the job's own fault). */
static const char *endpoint_outcome(const struct llmq_call_class *c)
{
    switch (c->cause) {
    case LLMQ_CALL_CAUSE_OK:
        return c->verdict == LLMQ_CALL_DONE ? "ok" : "";
    case LLMQ_CALL_CAUSE_SERVER:
    case LLMQ_CALL_CAUSE_TRANSPORT:
    case LLMQ_CALL_CAUSE_INVALID_RESPONSE:
        return "fail";
    case LLMQ_CALL_CAUSE_RATE_LIMIT:
        return "limit";
    case LLMQ_CALL_CAUSE_AUTH:
        return "auth";
    case LLMQ_CALL_CAUSE_QUOTA:
        return "quota";
    default:
        return "";
    }
}

/* What every answered call of a named endpoint tells its shared health and
 * latency (the settle's outcome and latency_ms), streamed or not: a stream
 * that went to its client may revise the outcome
 * (llmq_worker_stream_decide). */
static void note_endpoint(struct worker_job *job, const struct llmq_http_response *resp,
                          const struct llmq_call_class *c)
{
    if (job->endpoint == NULL || job->endpoint[0] == '\0')
        return;
    snprintf(job->settle.outcome, sizeof(job->settle.outcome), "%s", endpoint_outcome(c));
    job->settle.latency_ms = resp->elapsed_ms;
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

/* Acts on a classified result (classify.h): the settle to send and logs
 * (what it counts is derived from c by llmq_worker_count_outcome). */
static void apply_class(struct llmq_worker *w, struct worker_job *job,
                        const struct llmq_http_response *resp, const struct llmq_call_class *c)
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
        job->settle.line =
            llmq_worker_result_line(job, resp, resp->body, resp->body_len, &c->eb, NULL, NULL);
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
            LLMQ_LOG_JOB(LLMQ_LOG_INFO, acct, job->id,
                         "grant stale: the connection was ready %lld ms past its lifetime; "
                         "handed back untried",
                         (long long)(llmq_monotonic_ms() - job->send_by_ms));
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
                llmq_worker_result_line(job, resp, resp->body, resp->body_len, &c->eb, NULL, NULL);
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
        line = llmq_worker_result_line(job, resp, resp->body, resp->body_len, &c->eb,
                                       "invalid_response", c->reason);
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, acct, job->id, "%s", c->reason);
    } else if (c->cause != LLMQ_CALL_CAUSE_TRANSPORT) {
        line = llmq_worker_result_line(job, resp, resp->body, resp->body_len, &c->eb, NULL, NULL);
    }
    if (c->cause == LLMQ_CALL_CAUSE_RATE_LIMIT) {
        job->settle.pause_ms = c->hint_ms > 0 ? c->hint_ms : w->cfg->backoff_base_ms;
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, acct, job->id, "429 from the API; pausing %s for %lld ms",
                     job->model, (long long)job->settle.pause_ms);
    }
    plan_retry(w, job, c->reason, c->hint_ms, c->refund, line);
}

/* Every attempt ends here once its mode is decided, however it ended (a
 * response, a transport error, a request that could not be sent): its
 * outcome is counted once, in the summary and in the metrics alike
 * (llmq_worker_count_outcome, from at alone), then settled. at is NULL when
 * nothing was sent. */
static void end_attempt(struct llmq_worker *w, struct worker_job *job,
                        const struct worker_attempt_end *at)
{
    llmq_worker_job_set_phase(job, WORKER_JOB_DECIDED);
    if (job->settle.mode == WORKER_SETTLE_DEAD)
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, job->acct->cfg->name, job->id, "dead-lettered: %s",
                     job->settle.reason);
    llmq_worker_count_outcome(w, job, at);
    llmq_worker_settle(job);
}

static void on_response(struct llmq_http_response *resp, void *privdata)
{
    struct worker_job *job = privdata;
    struct llmq_worker *w = job->acct->w;
    copy_headers(job, resp->status, &resp->headers);
    struct llmq_call_response in = {
        .outcome = resp->outcome,
        .request_sent = resp->request_sent,
        .error = resp->error,
        .status = resp->status,
        .headers = &resp->headers,
        .body = resp->body,
        .body_len = resp->body_len,
        .url_path = job->url_path,
    };
    struct llmq_call_class c;
    llmq_call_classify(&in, &c);
    note_endpoint(job, resp, &c);
    struct worker_attempt_end at = {.resp = resp, .c = &c};
    at.by_class = !llmq_worker_stream_decide(w, job, resp, &c);
    if (at.by_class)
        apply_class(w, job, resp, &c);
    llmq_worker_stream_end(job, resp);
    end_attempt(w, job, &at);
}

/* The body with its "model" set to model (a fallback model serves the
 * job), or NULL when it is not a JSON object. Returns new. */
static char *with_model(const char *body, const char *model)
{
    json_t *b = json_loads(body, 0, NULL);
    char *out = NULL;
    if (json_is_object(b) && json_object_set_new(b, "model", json_string(model)) == 0)
        out = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return out;
}

/* The URL and key of job's endpoint (named, or the implicit one: the
 * worker's --base-url and the account's key) into url, *key and *azure.
 * Returns 0; -1 when the URL does not fit; -2 when this worker holds no key
 * for the named endpoint (dispatch grants only those it holds: a reply it
 * was not asked for). */
static int endpoint_target(struct llmq_worker *w, const struct worker_job *job, char *url, size_t n,
                           const char **key, int *azure)
{
    if (job->endpoint == NULL || job->endpoint[0] == '\0') {
        *key = job->acct->cfg->api_key;
        *azure = w->cfg->azure_api_version[0] != '\0';
        return llmq_worker_request_url(w->cfg, job->url_path, url, n);
    }
    const struct llmq_worker_endpoint_key *k = llmq_worker_endpoint_key(w->cfg, job->endpoint);
    if (k == NULL)
        return -2;
    *key = k->key;
    *azure = job->api_version[0] != '\0';
    return llmq_worker_endpoint_url(job->base_url, job->api_version, job->deployment, job->url_path,
                                    url, n);
}

void llmq_worker_call(struct llmq_worker *w, struct worker_job *job)
{
    char url[2048];
    struct llmq_error err = {0};
    char *patched = NULL;
    if (job->asked_model != NULL && job->asked_model[0] != '\0' &&
        (patched = with_model(job->body, job->model)) != NULL) {
        free(job->body);
        job->body = patched;
    }
    const char *key = NULL;
    int azure = 0;
    int target = endpoint_target(w, job, url, sizeof(url), &key, &azure);
    if (target == -2) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, job->acct->cfg->name, job->id,
                     "no key for endpoint %s here: handed back", job->endpoint);
        job->settle.mode = WORKER_SETTLE_HANDBACK;
        end_attempt(w, job, NULL);
        return;
    }
    if (target != 0) {
        job->settle.mode = WORKER_SETTLE_DEAD;
        snprintf(job->settle.reason, sizeof(job->settle.reason), "invalid_url");
        job->settle.line =
            llmq_worker_error_line(job, "invalid_url", "the request URL is too long");
        job->settle.actual_tokens = -1;
        end_attempt(w, job, NULL);
        return;
    }
    struct llmq_http_request req = {
        .url = url,
        .body = job->body,
        .body_len = strlen(job->body),
        .body_borrowed = 1,
        .auth = azure ? LLMQ_HTTP_AUTH_API_KEY : LLMQ_HTTP_AUTH_BEARER,
        .api_key = key,
        .client_request_id = job->id,
        .send_by_ms = job->send_by_ms,
    };
    /* stream: true relays the answer as it comes (stream_call.h) */
    (void)llmq_worker_stream_begin(w, job, &req);
    if (llmq_http_submit(w->http, &req, on_response, job, &err) != LLMQ_OK) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, job->acct->cfg->name, job->id, "cannot send: %s", err.msg);
        plan_retry(w, job, err.msg, -1, 1, NULL);
        llmq_worker_stream_end(job, NULL);
        end_attempt(w, job, NULL);
        return;
    }
    llmq_worker_job_set_phase(job, WORKER_JOB_CALLING);
    llmq_worker_stream_sent(job);
}
