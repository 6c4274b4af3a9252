/* Synchronous calls: POST /v1/chat/completions, /v1/embeddings,
 * /v1/responses, /v1/completions become one job each, and the caller gets the
 * API's answer when the job has run.
 *
 * A call's life: decode and check (the same validation as `llmq enqueue`:
 * llmq_job_from_request_json, over the one parse of the body; then the key's
 * policy, key_policy.h: its models,
 * tenant, user and priority) -> register a waiter
 * (waiters.h) -> enqueue (llmq_job_store_push_async: lua/enqueue.lua) with
 * the key's priority, tenant and user, a deadline of --max-wait-ms and this
 * gateway's lease (lease.h), so a job nobody waits for any more is never
 * sent, not even after a kill -9 -> answer from its result.
 * At --max-wait-ms the job is cancelled if not sent (lua/job_cancel.lua) and
 * the caller gets a 429 with retry-after; a job already sent gets up to
 * --call-timeout-ms more, then a 504. A caller that hangs up cancels a job not
 * yet sent. The push, wait, look-up and cancel are call_wait.h's (shared
 * with streamed calls); this file holds what a synchronous call does at
 * each step, and the one route handler of every call: it decodes the body
 * once and hands the decoded call to the synchronous or the streamed kind. */
#include "calls.h"

#include <stdlib.h>

#include "call_job.h"
#include "call_wait.h"
#include "decode.h"
#include "http.h"
#include "stream.h"

enum call_phase { CALL_QUEUED, CALL_SENT };

struct call {
    struct gw_call_wait cw; /* first: r->state is both */
    enum call_phase phase;
};

static struct call *of(struct gw_call_wait *cw)
{
    return (struct call *)cw;
}

static void call_free(void *p)
{
    struct call *c = p;
    gw_call_wait_clear(&c->cw);
    free(c);
}

/* Answers from a result line. */
static void on_result(struct gw_call_wait *cw, const char *line, size_t len, int dead)
{
    (void)dead;
    gw_call_respond_result(cw->r, cw->job.id, line, len);
    gw_call_wait_finish(cw);
}

static int is_queued(const struct gw_call_wait *cw)
{
    return ((const struct call *)cw)->phase == CALL_QUEUED;
}

/* Sent before --max-wait-ms ran out: the call gets its time, then a 504. */
static void on_sent(struct gw_call_wait *cw)
{
    of(cw)->phase = CALL_SENT;
    gw_call_wait_arm(cw, cw->r->gw->cfg->call_timeout_ms / 1000.0);
}

static void on_timer(struct gw_call_wait *cw)
{
    struct gw_request *r = cw->r;
    if (of(cw)->phase == CALL_QUEUED) {
        gw_call_wait_cancel(cw, 1);
        return;
    }
    r->gw->stats.calls_timed_out++;
    gw_respond_errorf(r, 504, "server_error", NULL, "timeout",
                      "The request was sent but no answer came within %lld ms; its result "
                      "will still be recorded as job %s.",
                      r->gw->cfg->call_timeout_ms, cw->job.id);
    gw_call_wait_finish(cw);
}

static const struct gw_call_kind sync_kind = {
    .on_result = on_result,
    .is_queued = is_queued,
    .on_timer = on_timer,
    .on_sent = on_sent,
};

/* A synchronous call of r, decoded as call. */
static void start_sync(struct gw_request *r, const struct gw_call *call)
{
    struct call *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    r->state = c;
    r->state_free = call_free;
    if (gw_call_wait_make(&c->cw, r, &sync_kind, call) != 0)
        return;
    if (gw_redis(r->gw) == NULL) {
        gw_respond_no_redis(r);
        return;
    }
    gw_call_wait_begin(&c->cw);
}

void gw_calls_handle(struct gw_request *r)
{
    struct gw_error e;
    struct gw_call call;
    r->gw->stats.call_bodies_decoded++;
    if (gw_call_decode(r->m.call_url, r->body ? r->body : "", r->body_len, &call, &e) != 0) {
        gw_respond_error(r, &e);
        return;
    }
    if (call.stream)
        gw_stream_start(r, &call); /* relayed as it comes (stream.h) */
    else
        start_sync(r, &call);
    gw_call_clear(&call); /* the job was built from it (call_job.h) */
}
