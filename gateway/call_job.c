/* The job of a call a caller waits for (call_job.h): the parts a synchronous
 * and a streamed call share. */
#include "call_job.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "cache_opts.h"
#include "decode.h"
#include "fallbacks.h"
#include "http.h"
#include "key_policy.h"
#include "request_step.h"

int gw_call_job_make(struct gw_request *r, const struct gw_call *call, struct llmq_job *job)
{
    struct gw *gw = r->gw;
    /* the request's own terms; the key's policy decides on the job below */
    struct llmq_job_options o = {
        .priority = r->key.priority,
        .user = call->user[0] ? call->user : NULL,
        .ttl_ms = gw->cfg->max_wait_ms,
    };
    if (gw_cache_opts(r, &o) != 0)
        return -1; /* answered */
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    d.max_body_bytes = (size_t)gw->job_body_max;
    d.now_ms = llmq_wall_ms();
    d.cache_defaults = 1; /* a call that asks nothing: the account's default decides */
    struct llmq_error err = {0};
    if (llmq_job_from_request_json(r->m.call_url, call->body, &o, &d, job, &err) != LLMQ_OK) {
        if (err.rc == LLMQ_ETOOBIG)
            gw_respond_errorf(r, 413, "invalid_request_error", NULL, "request_too_large", "%s",
                              err.msg);
        else
            gw_respond_errorf(r, 400, "invalid_request_error", NULL, NULL, "%s", err.msg);
        return -1;
    }
    struct gw_error e;
    if (gw_key_policy_apply(&r->key, job, &e) != GW_KEY_ALLOWS) {
        gw_respond_error(r, &e);
        return -1;
    }
    /* its cost as its model's fallback, charged if the fallback serves it */
    if (gw_fallbacks_apply(gw->fallbacks, job, &err) != LLMQ_OK) {
        gw_respond_errorf(r, 400, "invalid_request_error", NULL, NULL, "%s", err.msg);
        return -1;
    }
    gw_key_policy_fallback(&r->key, job, 1); /* the key's models hold for the fallback too */
    return 0;
}

enum llmq_rc gw_call_job_push(struct gw_request *r, const struct llmq_job *job,
                              struct llmq_job_outcome *out, llmq_job_store_push_cb *cb, void *ud,
                              struct llmq_error *err)
{
    struct gw *gw = r->gw;
    redisAsyncContext *ac = gw_redis(gw);
    if (ac == NULL)
        return llmq_error_set(err, LLMQ_EREDIS, "Redis is not connected");
    char key_id[17];
    snprintf(key_id, sizeof(key_id), "%.16s", r->key.hash);
    const struct llmq_job_gate gate = {.lease = gw->id, .key_id = key_id[0] ? key_id : NULL};
    return gw_step_push(r, ac, gw->prefix, &gate, job, 1, out, cb, ud, err);
}

int gw_call_job_pushed(struct gw_request *r, enum llmq_rc rc, const struct llmq_error *err,
                       const struct llmq_job_outcome *out)
{
    if (rc == LLMQ_EINVAL) {
        /* the account refuses the job: a USD budget applies and its model
         * has no price (lua/enqueue.lua; never run unpriced) */
        const char *m = strstr(err->msg, "model ");
        gw_respond_errorf(r, 400, "invalid_request_error", "model", "model_not_priced", "%s",
                          m != NULL ? m : err->msg);
        return -1;
    }
    if (rc != LLMQ_OK || !out->created) {
        LLMQ_LOG(LLMQ_LOG_WARN, "gateway: enqueue failed: %s",
                 rc != LLMQ_OK ? err->msg : "job id taken");
        gw_respond_no_redis(r);
        return -1;
    }
    r->gw->stats.calls_enqueued++;
    return 0;
}

static void on_ignore(redisAsyncContext *ac, redisReply *reply, void *privdata)
{
    (void)ac;
    (void)reply;
    (void)privdata;
}

enum llmq_rc gw_call_job_cancel(struct gw *gw, const char *id, llmq_script_cb *cb, void *ud,
                                struct gw_request *r)
{
    redisAsyncContext *ac = gw_redis(gw);
    const char *argv[] = {gw->prefix, "", id};
    if (ac == NULL)
        return LLMQ_EREDIS;
    return gw_step_script(r, ac, LLMQ_SCRIPT_JOB_CANCEL, 1, 3, argv, NULL,
                          cb != NULL ? cb : on_ignore, ud);
}

enum gw_cancel_outcome gw_call_job_cancel_outcome(const redisReply *rep)
{
    /* lua/job_cancel.lua: {cancelled, running, ended}, one job here */
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 3)
        return GW_CANCEL_FAILED;
    if (rep->element[0]->integer == 1)
        return GW_CANCEL_UNSENT;
    return rep->element[1]->integer == 1 ? GW_CANCEL_SENT : GW_CANCEL_ENDED;
}

/* The causes of a 429 llmq gives itself (not the API's), and their P stats
 * fields. */
enum own_429 {
    OWN_429_WAIT,   /* the call waited --max-wait-ms for room under llmq's limits */
    OWN_429_BUDGET, /* an llmq spend budget refused it */
};
static const char *const own_429_field[] = {"own_429_wait", "own_429_budget"};

/* Counts a 429 of cause c in this process's /metrics and in the account's
 * P stats, which every gateway adds to and `llmq status`, `llmq top` and the
 * dashboard's snapshot read. The HINCRBY is not waited for (the caller's
 * answer is not held for a counter); while Redis is away it is lost. */
static void count_own_429(struct gw *gw, enum own_429 c)
{
    if (c == OWN_429_WAIT)
        gw->stats.own_429_wait++;
    else
        gw->stats.own_429_budget++;
    redisAsyncContext *ac = gw_redis(gw);
    char key[LLMQ_KEY_FIXED_MAX];
    if (ac != NULL && llmq_key(key, sizeof(key), gw->prefix, LLMQ_KEY_STATS, NULL, NULL) == LLMQ_OK)
        (void)redisAsyncCommand(ac, NULL, NULL, "HINCRBY %s %s 1", key, own_429_field[c]);
}

void gw_call_respond_waited_too_long(struct gw_request *r)
{
    long long s = r->gw->cfg->max_wait_ms / 1000;
    snprintf(r->retry_after, sizeof(r->retry_after), "%lld", s > 0 ? s : 1);
    r->gw->stats.calls_timed_out++;
    count_own_429(r->gw, OWN_429_WAIT);
    gw_respond_errorf(r, 429, "requests", NULL, "rate_limit_exceeded",
                      "The request waited %lld ms in llmq's queue for room (the shared rate "
                      "limits, or its model's endpoints) and was not sent (nothing was "
                      "charged). Please try again later.",
                      r->gw->cfg->max_wait_ms);
}

void gw_call_respond_result(struct gw_request *r, const char *job_id, const char *line, size_t len)
{
    struct gw_result res;
    if (gw_result_decode(line, len, &res) != 0) {
        gw_respond_errorf(r, 502, "server_error", NULL, NULL,
                          "llmq-gateway could not read the result of job %s", job_id);
        return;
    }
    if (res.status != 0 && res.body != NULL) {
        if (res.request_id[0] != '\0')
            snprintf(r->request_id, sizeof(r->request_id), "%s", res.request_id);
        gw_respond(r, (unsigned int)res.status, res.body, strlen(res.body));
        res.body = NULL; /* gw_respond took it */
    } else if (strcmp(res.error_code, "expired") == 0 || strcmp(res.error_code, "cancelled") == 0) {
        gw_call_respond_waited_too_long(r);
    } else if (strcmp(res.error_code, "budget_exhausted") == 0) {
        /* OpenAI's answer when the account's quota is spent, naming llmq's budget */
        count_own_429(r->gw, OWN_429_BUDGET);
        gw_respond_errorf(r, 429, "insufficient_quota", NULL, "insufficient_quota",
                          "You exceeded your current quota: %s",
                          res.error_message ? res.error_message : "a spend budget is exhausted");
    } else if (strcmp(res.error_code, "never_fits") == 0) {
        gw_respond_errorf(r, 400, "invalid_request_error", NULL, "never_fits", "%s",
                          res.error_message ? res.error_message : "the request never fits");
    } else {
        gw_respond_errorf(r, 502, "server_error", NULL, res.error_code, "The request failed: %s",
                          res.error_message ? res.error_message : res.error_code);
    }
    gw_result_clear(&res);
}
