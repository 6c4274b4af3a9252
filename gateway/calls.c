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
#include "call_job.h"

#include <ev.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "jobs/job.h"
#include "jobs/job_result.h"
#include "jobs/job_store.h"
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

/* Answers from a result line. */
static void respond_result(struct call *c, const char *line, size_t len)
{
    gw_call_respond_result(c->r, c->job.id, line, len);
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
        switch (gw_call_job_cancel_outcome(rep)) {
        case GW_CANCEL_UNSENT:
            c->r->gw->stats.calls_cancelled++;
            gw_call_respond_waited_too_long(c->r);
            call_finish(c);
            break;
        case GW_CANCEL_SENT: /* give the call its time, then 504 */
            c->phase = CALL_SENT;
            ev_timer_set(&c->timer, c->r->gw->cfg->call_timeout_ms / 1000.0, 0.0);
            ev_timer_start(c->r->gw->loop, &c->timer);
            break;
        case GW_CANCEL_ENDED:
            look_up(c);
            break;
        case GW_CANCEL_FAILED:
            gw_respond_no_redis(c->r);
            call_finish(c);
            break;
        }
    }
    gw_request_release(c->r);
}

/* Runs job_cancel for the call's job; cb (NULL: fire and forget) gets c. */
static void cancel_job(struct gw *gw, const char *id, llmq_script_cb *cb, struct call *c)
{
    if (gw_call_job_cancel(gw, id, cb, c) != LLMQ_OK) {
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
    cancel_job(r->gw, c->job.id, NULL, NULL);
    call_finish(c);
}

static void on_pushed(enum llmq_rc rc, const struct llmq_error *err, void *ud)
{
    struct call *c = ud;
    if (c->phase != CALL_DONE && gw_call_job_pushed(c->r, rc, err, &c->out) != 0)
        call_finish(c);
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
    if (gw_call_job_make(r, &call, &c->job) != 0) {
        c->phase = CALL_DONE;
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
    struct llmq_error err = {0};
    if (gw_call_job_push(r, &c->job, &c->out, on_pushed, c, &err) != LLMQ_OK) {
        gw_request_release(r);
        gw_respond_no_redis(r);
        call_finish(c);
    }
}

void gw_calls_shutdown_one(struct gw_waiter *w)
{
    struct call *c = (struct call *)((char *)w - offsetof(struct call, w));
    cancel_job(c->r->gw, c->job.id, NULL, NULL);
    snprintf(c->r->retry_after, sizeof(c->r->retry_after), "1");
    gw_respond_errorf(c->r, 503, "server_error", NULL, "service_unavailable",
                      "llmq-gateway is shutting down; retry on another instance");
    call_finish(c);
}
