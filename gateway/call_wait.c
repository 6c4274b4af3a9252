/* The core of a call a caller waits for (see call_wait.h). Its steps
 * (request_step.h): the wait (begin to finish), and each Redis command in
 * flight (the push, a result read, a job_cancel whose reply counts). */
#include "call_wait.h"

#include <hiredis/async.h>
#include <stdio.h>

#include "call_job.h"
#include "http.h"
#include "jobs/job_result.h"
#include "redis/script.h"
#include "request_step.h"

static struct gw_call_wait *of_waiter(struct gw_waiter *w)
{
    return (struct gw_call_wait *)((char *)w - offsetof(struct gw_call_wait, w));
}

static int may_look(const struct gw_call_wait *cw)
{
    return cw->waiting && (cw->kind->may_look == NULL || cw->kind->may_look(cw));
}

static void on_result(enum llmq_rc rc, const char *line, size_t len, int dead, void *ud)
{
    struct gw_call_wait *cw = ud;
    cw->looking = 0;
    /* no result yet (line NULL) or Redis failed: the next event or the
     * timer looks again */
    if (may_look(cw) && rc == LLMQ_OK && line != NULL)
        cw->kind->on_result(cw, line, len, dead);
}

void gw_call_wait_look_up(struct gw_call_wait *cw)
{
    redisAsyncContext *ac = gw_redis(cw->r->gw);
    if (!may_look(cw) || cw->looking || ac == NULL)
        return;
    /* (an id too long cannot happen: checked at enqueue) */
    if (gw_step_result_read(cw->r, ac, cw->r->gw->prefix, cw->job.id, on_result, cw, NULL) ==
        LLMQ_OK)
        cw->looking = 1;
}

static void on_maybe_ended(struct gw_waiter *w)
{
    gw_call_wait_look_up(of_waiter(w));
}

static void on_cancelled(redisAsyncContext *ac, redisReply *rep, void *privdata)
{
    (void)ac;
    struct gw_call_wait *cw = privdata;
    struct gw_request *r = cw->r;
    cw->cancelling = 0;
    if (cw->waiting && cw->kind->is_queued(cw)) {
        switch (gw_call_job_cancel_outcome(rep)) {
        case GW_CANCEL_UNSENT:
            r->gw->stats.calls_cancelled++;
            gw_call_respond_waited_too_long(r);
            gw_call_wait_finish(cw);
            break;
        case GW_CANCEL_SENT:
            cw->kind->on_sent(cw);
            break;
        case GW_CANCEL_ENDED:
            gw_call_wait_look_up(cw);
            break;
        case GW_CANCEL_FAILED:
            gw_respond_no_redis(r);
            gw_call_wait_finish(cw);
            break;
        }
    }
}

void gw_call_wait_cancel(struct gw_call_wait *cw, int with_reply)
{
    if (with_reply && cw->cancelling)
        return; /* one reply decides */
    if (gw_call_job_cancel(cw->r->gw, cw->job.id, with_reply ? on_cancelled : NULL, cw,
                           with_reply ? cw->r : NULL) != LLMQ_OK) {
        if (with_reply) {
            gw_respond_no_redis(cw->r);
            gw_call_wait_finish(cw);
        }
        return;
    }
    cw->cancelling = with_reply;
}

void gw_call_wait_arm(struct gw_call_wait *cw, double s)
{
    struct ev_loop *loop = cw->r->gw->loop;
    ev_timer_stop(loop, &cw->timer);
    ev_timer_set(&cw->timer, s, 0.0);
    ev_timer_start(loop, &cw->timer);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct gw_call_wait *cw = t->data;
    if (cw->waiting)
        cw->kind->on_timer(cw);
}

static void on_gone(struct gw_request *r)
{
    struct gw_call_wait *cw = r->state;
    if (!cw->waiting)
        return;
    r->gw->stats.calls_cancelled++;
    gw_call_wait_cancel(cw, 0); /* unsent: never sent */
    if (cw->kind->on_gone != NULL)
        cw->kind->on_gone(cw);
    gw_call_wait_finish(cw);
}

void gw_call_wait_finish(struct gw_call_wait *cw)
{
    if (!cw->waiting)
        return;
    if (cw->kind->on_finish != NULL)
        cw->kind->on_finish(cw);
    cw->waiting = 0;
    struct gw_request *r = cw->r;
    gw_waiters_remove(r->gw->waiters, &cw->w);
    ev_timer_stop(r->gw->loop, &cw->timer);
    r->on_gone = NULL;
    gw_step_wait_end(r);
}

static void on_pushed(enum llmq_rc rc, const struct llmq_error *err, void *ud)
{
    struct gw_call_wait *cw = ud;
    if (cw->waiting && gw_call_job_pushed(cw->r, rc, err, &cw->out) != 0)
        gw_call_wait_finish(cw);
}

int gw_call_wait_make(struct gw_call_wait *cw, struct gw_request *r,
                      const struct gw_call_kind *kind, const struct gw_call *call)
{
    cw->r = r;
    cw->kind = kind;
    return gw_call_job_make(r, call, &cw->job);
}

void gw_call_wait_begin(struct gw_call_wait *cw)
{
    struct gw_request *r = cw->r;
    struct gw *gw = r->gw;
    snprintf(cw->w.job_id, sizeof(cw->w.job_id), "%s", cw->job.id);
    cw->w.on_maybe_ended = on_maybe_ended;
    cw->waiting = 1;
    gw_step_wait_begin(r); /* ended by gw_call_wait_finish */
    gw_waiters_add(gw->waiters, &cw->w);
    ev_timer_init(&cw->timer, on_timer, gw->cfg->max_wait_ms / 1000.0, 0.0);
    cw->timer.data = cw;
    ev_timer_start(gw->loop, &cw->timer);
    r->on_gone = on_gone;
    /* registered: its job's end (and a stream's frames) find it from now on */
    struct llmq_error err = {0};
    if (gw_call_job_push(r, &cw->job, &cw->out, on_pushed, cw, &err) != LLMQ_OK) {
        gw_respond_no_redis(r);
        gw_call_wait_finish(cw);
    }
}

struct gw_call_wait *gw_call_wait_find(struct gw *gw, const char *id,
                                       const struct gw_call_kind *kind)
{
    struct gw_waiter *w = gw_waiters_find(gw->waiters, id, on_maybe_ended);
    struct gw_call_wait *cw = w != NULL ? of_waiter(w) : NULL;
    return cw != NULL && cw->kind == kind ? cw : NULL;
}

void gw_call_wait_shutdown_one(struct gw_waiter *w)
{
    struct gw_call_wait *cw = of_waiter(w);
    if (!cw->waiting)
        return;
    if (cw->kind->on_shutdown != NULL) {
        cw->kind->on_shutdown(cw);
        return;
    }
    struct gw_request *r = cw->r;
    gw_call_wait_cancel(cw, 0);
    snprintf(r->retry_after, sizeof(r->retry_after), "1");
    gw_respond_errorf(r, 503, "server_error", NULL, "service_unavailable",
                      "llmq-gateway is shutting down; retry on another instance");
    gw_call_wait_finish(cw);
}

void gw_call_wait_clear(struct gw_call_wait *cw)
{
    llmq_job_clear(&cw->job);
}
