/* One job's call to the API (docs/DESIGN.md §3.3-3.5): sends it and takes
 * its response one way: classified with the pure llmq_call_classify
 * (classify.h, where the table of statuses lives), decided by the stream
 * when the answer was streamed (stream_call.h) or else by its class
 * (call_decide.h, which builds the result line: result_line.h), counted
 * once and handed to the settle (job_settle.c). A response's x-ratelimit-*
 * headers go to the settle, where the model bucket learns from them, when
 * they can matter (learn_throttle.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "base/log.h"
#include "admin/metrics_worker.h"
#include "base/clock.h"
#include "call.h"
#include "call_decide.h"
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

/* What every answered call tells, streamed or not: its latency (the
 * settle's latency_ms: the job's list of calls, and a named endpoint's
 * latency) and, of a named endpoint, its shared health (the settle's
 * outcome; a stream that went to its client may revise it,
 * llmq_worker_stream_finish). */
static void note_endpoint(struct worker_job *job, const struct llmq_http_response *resp,
                          const struct llmq_call_class *c)
{
    /* every call's, for the job's list of calls (lua/lib/attempts.lua) */
    job->settle.latency_ms = resp->elapsed_ms;
    if (job->endpoint == NULL || job->endpoint[0] == '\0')
        return;
    snprintf(job->settle.outcome, sizeof(job->settle.outcome), "%s", endpoint_outcome(c));
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
    job->settle.late_ms = resp->late_ms;
    struct worker_attempt_end at = {.resp = resp, .c = &c, .by_class = 1};
    if (job->stream != NULL) /* decided by the stream or by c, and its end sent */
        at.by_class = !llmq_worker_stream_finish(w, job, resp, &c);
    else
        llmq_worker_call_decide(w, job, resp, &c, resp->body, resp->body_len);
    end_attempt(w, job, &at);
}

/* The body with its "model" set to model (a fallback model serves the
 * job), or NULL when it is not a JSON object. Returns new. */
char *llmq_worker_body_with_model(const char *body, const char *model)
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
        (patched = llmq_worker_body_with_model(job->body, job->model)) != NULL) {
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
        .asked_ms = job->send_by_ms > 0 ? job->asked_ms : 0,
    };
    /* stream: true relays the answer as it comes (stream_call.h) */
    (void)llmq_worker_stream_begin(w, job, &req);
    if (llmq_http_submit(w->http, &req, on_response, job, &err) != LLMQ_OK) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, job->acct->cfg->name, job->id, "cannot send: %s", err.msg);
        llmq_worker_plan_retry(w, job, err.msg, -1, 1, NULL);
        llmq_worker_stream_end(job, NULL);
        end_attempt(w, job, NULL);
        return;
    }
    llmq_worker_job_set_phase(job, WORKER_JOB_CALLING);
    llmq_worker_stream_sent(job);
}
