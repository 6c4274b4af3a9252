/* Synchronous calls: POST /v1/chat/completions, /v1/embeddings,
 * /v1/responses, /v1/completions become one job each, and the caller gets the
 * API's answer when the job has run.
 *
 * A call's life: decode and check (the same validation as `llmq enqueue`:
 * llmq_job_from_request; then the key's policy, key_policy.h: its models,
 * tenant, user and priority) -> register a waiter
 * (waiters.h) -> enqueue (llmq_job_store_push_async: lua/enqueue.lua) with
 * the key's priority, tenant and user, a deadline of --max-wait-ms and this
 * gateway's lease (lease.h), so a job nobody waits for any more is never
 * sent, not even after a kill -9 -> answer from its result.
 * At --max-wait-ms the job is cancelled if not sent (lua/job_cancel.lua) and
 * the caller gets a 429 with retry-after; a job already sent gets up to
 * --call-timeout-ms more, then a 504. A caller that hangs up cancels a job not
 * yet sent. The state lives in the request (r->state) and holds one reference
 * to it while registered. */
#include "calls.h"

#include <ev.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "http.h"
#include "jobs/job.h"
#include "jobs/job_result.h"
#include "jobs/job_store.h"
#include "base/log.h"
#include "redis/script.h"
#include "stream.h"
#include "waiters.h"

enum call_phase { CALL_QUEUED, CALL_SENT, CALL_DONE };

struct call {
    struct gw_request *r;
    struct gw_waiter w;
    ev_timer timer;
    struct llmq_job job;
    struct llmq_job_outcome out;
    enum call_phase phase;
    int looking;    /* a result read (job_result.h) is in flight */
    int cancelling; /* a job_cancel is in flight */
};

static void call_free(void *p)
{
    struct call *c = p;
    llmq_job_clear(&c->job);
    free(c);
}

/* Ends the wait: no more events, no timer, the reference dropped. */
static void call_finish(struct call *c)
{
    if (c->phase == CALL_DONE)
        return;
    c->phase = CALL_DONE;
    gw_waiters_remove(c->r->gw->waiters, &c->w);
    ev_timer_stop(c->r->gw->loop, &c->timer);
    c->r->on_gone = NULL;
    gw_request_release(c->r);
}

static void respond_waited_too_long(struct gw_request *r)
{
    long long s = r->gw->cfg->max_wait_ms / 1000;
    snprintf(r->retry_after, sizeof(r->retry_after), "%lld", s > 0 ? s : 1);
    r->gw->stats.calls_timed_out++;
    gw_respond_errorf(r, 429, "requests", NULL, "rate_limit_exceeded",
                      "The request waited %lld ms in llmq's queue for the shared rate limit "
                      "and was not sent (nothing was charged). Please try again later.",
                      r->gw->cfg->max_wait_ms);
}

/* Answers from a result line. */
static void respond_result(struct call *c, const char *line, size_t len)
{
    struct gw_request *r = c->r;
    struct gw_result res;
    if (gw_result_decode(line, len, &res) != 0) {
        gw_respond_errorf(r, 502, "server_error", NULL, NULL,
                          "llmq-gateway could not read the result of job %s", c->job.id);
    } else if (res.status != 0 && res.body != NULL) {
        if (res.request_id[0] != '\0')
            snprintf(r->request_id, sizeof(r->request_id), "%s", res.request_id);
        gw_respond(r, (unsigned int)res.status, res.body, strlen(res.body));
        res.body = NULL;
    } else if (strcmp(res.error_code, "expired") == 0 || strcmp(res.error_code, "cancelled") == 0) {
        respond_waited_too_long(r);
    } else if (strcmp(res.error_code, "budget_exhausted") == 0) {
        /* OpenAI's answer when the account's quota is spent, naming llmq's budget */
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
    call_finish(c);
}

/* No result yet (line NULL) or Redis failed: the next event or the
 * timer looks again. */
static void on_result(enum llmq_rc rc, const char *line, size_t len, int dead, void *ud)
{
    (void)dead;
    struct call *c = ud;
    c->looking = 0;
    if (c->phase != CALL_DONE && rc == LLMQ_OK && line != NULL)
        respond_result(c, line, len);
    gw_request_release(c->r);
}

static void look_up(struct call *c)
{
    redisAsyncContext *ac = gw_redis(c->r->gw);
    if (c->phase == CALL_DONE || c->looking || ac == NULL)
        return;
    gw_request_hold(c->r);
    if (llmq_job_result_read_async(ac, c->r->gw->prefix, c->job.id, on_result, c, NULL) == LLMQ_OK)
        c->looking = 1;
    else
        gw_request_release(c->r); /* (an id too long cannot happen: checked at enqueue) */
}

static void on_maybe_ended(struct gw_waiter *w)
{
    struct call *c = (struct call *)((char *)w - offsetof(struct call, w));
    look_up(c);
}

static void on_cancelled(redisAsyncContext *ac, redisReply *rep, void *privdata)
{
    (void)ac;
    struct call *c = privdata;
    c->cancelling = 0;
    if (c->phase != CALL_DONE) {
        int ok = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 3;
        if (ok && rep->element[0]->integer == 1) {
            c->r->gw->stats.calls_cancelled++;
            respond_waited_too_long(c->r);
            call_finish(c);
        } else if (ok && rep->element[1]->integer == 1) {
            /* sent: give the call its time, then 504 */
            c->phase = CALL_SENT;
            ev_timer_set(&c->timer, c->r->gw->cfg->call_timeout_ms / 1000.0, 0.0);
            ev_timer_start(c->r->gw->loop, &c->timer);
        } else if (ok) {
            look_up(c); /* it ended meanwhile */
        } else {
            gw_respond_no_redis(c->r);
            call_finish(c);
        }
    }
    gw_request_release(c->r);
}

/* Runs job_cancel for the call's job; cb (NULL: fire and forget) gets c. */
static void cancel_job(struct gw *gw, const char *id, llmq_script_cb *cb, struct call *c)
{
    redisAsyncContext *ac = gw_redis(gw);
    const char *argv[] = {gw->prefix, "", id};
    if (ac == NULL ||
        llmq_script_run_async(ac, LLMQ_SCRIPT_JOB_CANCEL, 1, 3, argv, NULL, cb, c) != LLMQ_OK) {
        if (c != NULL) {
            gw_respond_no_redis(c->r);
            call_finish(c);
        }
        return;
    }
    if (c != NULL) {
        c->cancelling = 1;
        gw_request_hold(c->r);
    }
}

static void on_ignore(redisAsyncContext *ac, redisReply *reply, void *privdata)
{
    (void)ac;
    (void)reply;
    (void)privdata;
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct call *c = t->data;
    if (c->phase == CALL_QUEUED) {
        cancel_job(c->r->gw, c->job.id, on_cancelled, c);
    } else if (c->phase == CALL_SENT) {
        c->r->gw->stats.calls_timed_out++;
        gw_respond_errorf(c->r, 504, "server_error", NULL, "timeout",
                          "The request was sent but no answer came within %lld ms; its result "
                          "will still be recorded as job %s.",
                          c->r->gw->cfg->call_timeout_ms, c->job.id);
        call_finish(c);
    }
}

static void on_gone(struct gw_request *r)
{
    struct call *c = r->state;
    if (c->phase == CALL_DONE)
        return;
    r->gw->stats.calls_cancelled++;
    cancel_job(r->gw, c->job.id, on_ignore, NULL);
    call_finish(c);
}

static void on_pushed(enum llmq_rc rc, const struct llmq_error *err, void *ud)
{
    struct call *c = ud;
    if (c->phase != CALL_DONE) {
        if (rc != LLMQ_OK && strstr(err->msg, "has no price") != NULL) {
            /* a USD budget applies and the model has no price (never run unpriced) */
            gw_respond_errorf(c->r, 400, "invalid_request_error", "model", "model_not_priced", "%s",
                              strstr(err->msg, "model "));
            call_finish(c);
        } else if (rc != LLMQ_OK || !c->out.created) {
            LLMQ_LOG(LLMQ_LOG_WARN, "gateway: enqueue failed: %s",
                     rc != LLMQ_OK ? err->msg : "job id taken");
            gw_respond_no_redis(c->r);
            call_finish(c);
        } else {
            c->r->gw->stats.calls_enqueued++;
        }
    }
    gw_request_release(c->r);
}

void gw_calls_handle(struct gw_request *r)
{
    struct gw *gw = r->gw;
    struct gw_error e;
    struct gw_call call;
    if (gw_call_decode(r->m.call_url, r->body ? r->body : "", r->body_len, &call, &e) != 0) {
        gw_respond_error(r, &e);
        return;
    }
    if (call.stream) {
        gw_stream_handle(r); /* relayed as it comes (stream.h) */
        return;
    }
    struct call *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    c->r = r;
    r->state = c;
    r->state_free = call_free;
    /* the request's own terms; the key's policy decides on the job below */
    struct llmq_job_options o = {
        .priority = r->key.priority,
        .user = call.user[0] ? call.user : NULL,
        .ttl_ms = gw->cfg->max_wait_ms,
    };
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    d.max_body_bytes = (size_t)gw->job_body_max;
    d.now_ms = llmq_wall_ms();
    struct llmq_error err = {0};
    if (llmq_job_from_request(r->m.call_url, r->body, &o, &d, &c->job, &err) != LLMQ_OK) {
        c->phase = CALL_DONE;
        if (err.rc == LLMQ_ETOOBIG)
            gw_respond_errorf(r, 413, "invalid_request_error", NULL, "request_too_large", "%s",
                              err.msg);
        else
            gw_respond_errorf(r, 400, "invalid_request_error", NULL, NULL, "%s", err.msg);
        return;
    }
    if (gw_key_policy_apply(&r->key, &c->job, &e) != GW_KEY_ALLOWS) {
        c->phase = CALL_DONE;
        gw_respond_error(r, &e);
        return;
    }
    redisAsyncContext *ac = gw_redis(gw);
    if (ac == NULL) {
        c->phase = CALL_DONE;
        gw_respond_no_redis(r);
        return;
    }
    snprintf(c->w.job_id, sizeof(c->w.job_id), "%s", c->job.id);
    c->w.on_maybe_ended = on_maybe_ended;
    gw_request_hold(r); /* the wait's reference, dropped by call_finish */
    gw_waiters_add(gw->waiters, &c->w);
    ev_timer_init(&c->timer, on_timer, gw->cfg->max_wait_ms / 1000.0, 0.0);
    c->timer.data = c;
    ev_timer_start(gw->loop, &c->timer);
    r->on_gone = on_gone;
    gw_request_hold(r); /* the push's */
    /* the job lives only while this gateway's lease does (lease.h): killed,
     * the gateway leaves no job that is sent for nobody */
    /* and its key's spend budgets apply (lua/lib/25_budget.lua) */
    char key_id[17];
    snprintf(key_id, sizeof(key_id), "%.16s", r->key.hash);
    const struct llmq_job_gate gate = {.lease = gw->id, .key_id = key_id[0] ? key_id : NULL};
    if (llmq_job_store_push_async(ac, gw->prefix, &gate, &c->job, 1, &c->out, on_pushed, c, &err) !=
        LLMQ_OK) {
        gw_request_release(r);
        gw_respond_no_redis(r);
        call_finish(c);
    }
}

void gw_calls_shutdown_one(struct gw_waiter *w)
{
    struct call *c = (struct call *)((char *)w - offsetof(struct call, w));
    cancel_job(c->r->gw, c->job.id, on_ignore, NULL);
    snprintf(c->r->retry_after, sizeof(c->r->retry_after), "1");
    gw_respond_errorf(c->r, 503, "server_error", NULL, "service_unavailable",
                      "llmq-gateway is shutting down; retry on another instance");
    call_finish(c);
}
