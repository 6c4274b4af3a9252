/* Streamed calls: an answer's events as frames for the gateway (their
 * coalescing is the relay's, stream_relay.c), the abort when the client
 * leaves, and the settle on the streamed usage (see stream_call.h for the
 * frames and why it is pub/sub).
 *
 * The curl data callback (on_data) runs inside curl: it only splits and
 * assembles events and may send a PUBLISH (hiredis, not curl); aborting the
 * transfer happens from a PUBLISH reply, a cancel or a timer, outside curl,
 * with llmq_http_abort. */
#include "stream_call.h"

#include <ev.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/metrics_stream.h"
#include "admin/metrics_worker.h"
#include "base/bytes.h"
#include "base/log.h"
#include "openai/cut_off.h"
#include "call_decide.h"
#include "result_line.h"
#include "stream_assemble.h"
#include "stream_relay.h"

enum relay_state { RELAY_NONE = 0, RELAY_ON };

struct worker_stream {
    struct llmq_worker *w;
    struct worker_job *job; /* NULL once the job let go (llmq_worker_stream_end) */
    struct worker_account *acct;
    enum llmq_stream_api api;
    struct llmq_stream_asm *as;
    int client_usage;                  /* the client asked for usage itself */
    enum relay_state relay;            /* ON: its job's gateway holds the client (job->lease) */
    struct worker_relay_member member; /* in the relay to that gateway while ON */
    int relayed;                       /* events went to the gateway */
    int in_progress;                   /* counted in progress (metrics_stream.h) */
    int error_sent;                    /* the API's own error event was relayed */
    int clean_end;                     /* [DONE] or response.completed seen */
    int aborting;                      /* the transfer is being ended by us */
    char abort_why[32];
    struct llmq_http_xfer *xfer;
    char *pending; /* bytes of an event not complete yet */
    size_t pending_len, pending_cap;
    char *out; /* events not published yet */
    size_t out_len, out_cap;
    long long seq;
    long out_events;   /* events in out */
    double sent_at;    /* ev_now when the request was sent */
    double first_at;   /* ev_now of the first event from the API (0: none yet) */
    double last_frame; /* ev_now of its last frame */
    ev_timer beat_timer;
};

static void stream_free(struct worker_stream *s)
{
    llmq_stream_asm_free(s->as);
    free(s->pending);
    free(s->out);
    free(s);
}

/* ---- the upstream request ---- */

/* Rewrites body so a chat or completions stream reports usage; tells whether
 * the client asked for it. Returns the new body (NULL: keep the old one). */
static char *ask_usage(const char *body, enum llmq_stream_api api, int *client_usage)
{
    json_t *b = json_loads(body, 0, NULL);
    char *out = NULL;
    const json_t *so = json_object_get(b, "stream_options");
    *client_usage =
        api == LLMQ_STREAM_RESPONSES || json_is_true(json_object_get(so, "include_usage"));
    if (json_is_object(b) && !*client_usage) {
        json_t *opts = json_is_object(so) ? json_deep_copy(so) : json_object();
        json_object_set_new(opts, "include_usage", json_true());
        json_object_set_new(b, "stream_options", opts);
        out = json_dumps(b, JSON_COMPACT);
    }
    json_decref(b);
    return out;
}

/* 1 when body is a JSON object with "stream": true (a cheap look first). */
static int wants_stream(const char *body)
{
    if (strstr(body, "\"stream\"") == NULL)
        return 0;
    json_t *b = json_loads(body, 0, NULL);
    int yes = json_is_true(json_object_get(b, "stream"));
    json_decref(b);
    return yes;
}

/* ---- relaying ---- */

static void abort_call(struct worker_stream *s, const char *why);

/* Appends frame kind (payload[0..n)) of this stream to its relay. Returns
 * 0, or -1 (out of memory: the call is aborted). */
static int send_frame(struct worker_stream *s, char kind, const char *payload, size_t n)
{
    if (llmq_worker_relay_frame(&s->member, kind, s->seq, payload, n) != 0) {
        abort_call(s, "relay_lost");
        return -1;
    }
    s->seq++;
    s->last_frame = ev_now(s->w->loop);
    if (n > 0 && kind != 'x') {
        if (!s->in_progress) /* the first events reach the client */
            llmq_worker_metrics_stream_first(llmq_worker_metrics_of_streams(s->w),
                                             s->acct->cfg->name, s->first_at - s->sent_at);
        s->in_progress = 1;
        llmq_worker_metrics_stream_events(llmq_worker_metrics_of_streams(s->w), s->acct->cfg->name,
                                          s->out_events);
        s->out_events = 0;
    }
    return 0;
}

/* The relay's tick: the events waiting in out as one d frame. */
static void on_relay_flush(struct worker_relay_member *m)
{
    struct worker_stream *s =
        (struct worker_stream *)((char *)m - offsetof(struct worker_stream, member));
    if (s->out_len == 0 || s->aborting)
        return;
    if (send_frame(s, 'd', s->out, s->out_len) == 0) {
        s->relayed = 1;
        s->out_len = 0;
    }
}

static void on_relay_lost(struct worker_relay_member *m, const char *why)
{
    abort_call((struct worker_stream *)((char *)m - offsetof(struct worker_stream, member)), why);
}

static void on_beat(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct worker_stream *s = t->data;
    if (s->aborting)
        return;
    if (ev_now(loop) - s->last_frame >= LLMQ_STREAM_HEARTBEAT_MS / 1000.0 - 0.001)
        (void)send_frame(s, 'h', NULL, 0);
}

/* Ends the upstream call now (the client left or the relay broke). */
static void abort_call(struct worker_stream *s, const char *why)
{
    if (s->aborting || s->job == NULL)
        return;
    s->aborting = 1;
    snprintf(s->abort_why, sizeof(s->abort_why), "%s", why);
    LLMQ_LOG_JOB(LLMQ_LOG_INFO, s->acct->cfg->name, s->job->id,
                 "stream %s: aborting the upstream call",
                 strcmp(why, "client_closed") == 0 ? "client gone" : "relay lost");
    ev_timer_stop(s->w->loop, &s->beat_timer);
    llmq_http_abort(s->w->http, s->xfer);
}

/* ---- the answer as it comes (inside curl's write callback) ---- */

/* Appends event ev[0..n) to out as the client must see it. */
static void relay_event(struct worker_stream *s, const char *ev, size_t n,
                        enum llmq_stream_event_kind kind)
{
    if (s->relay == RELAY_NONE)
        return;
    if (!s->client_usage && kind == LLMQ_STREAM_EV_USAGE)
        return; /* asked for llmq's settle, not by the client */
    if (kind == LLMQ_STREAM_EV_ERROR)
        s->error_sent = 1;
    static const char usage_null[] = ",\"usage\":null";
    const size_t un = sizeof(usage_null) - 1;
    int failed = 0;
    while (!s->client_usage && n > 0) {
        /* a JSON string cannot hold an unescaped quote: this is the field */
        const char *at = memmem(ev, n, usage_null, un);
        if (at == NULL)
            break;
        failed |= llmq_bytes_append(&s->out, &s->out_len, &s->out_cap, ev, (size_t)(at - ev));
        n -= (size_t)(at - ev) + un;
        ev = at + un;
    }
    failed |= llmq_bytes_append(&s->out, &s->out_len, &s->out_cap, ev, n);
    s->out_events++;
    if (failed) { /* out of memory: on_data ends the transfer */
        s->aborting = 1;
        snprintf(s->abort_why, sizeof(s->abort_why), "out_of_memory");
    }
}

static int on_data(const char *data, size_t len, long status, void *privdata)
{
    struct worker_stream *s = privdata;
    if (s->aborting)
        return 1;
    if (status < 200 || status > 299)
        return 0; /* an error body: classify reads it whole */
    if (llmq_bytes_append(&s->pending, &s->pending_len, &s->pending_cap, data, len) != 0)
        return 1;
    size_t off = 0, n;
    while ((n = llmq_sse_event_len(s->pending + off, s->pending_len - off)) > 0) {
        const char *ev = s->pending + off;
        enum llmq_stream_event_kind kind = llmq_stream_asm_event(s->as, ev, n);
        if (s->first_at == 0)
            s->first_at = ev_now(s->w->loop);
        if (kind == LLMQ_STREAM_EV_DONE || kind == LLMQ_STREAM_EV_FINAL)
            s->clean_end = 1;
        relay_event(s, ev, n, kind);
        off += n;
    }
    memmove(s->pending, s->pending + off, s->pending_len - off);
    s->pending_len -= off;
    if (s->aborting)
        return 1;
    if (s->relay == RELAY_ON && s->out_len > 0)
        llmq_worker_relay_dirty(&s->member); /* the relay's next tick sends them */
    return 0;
}

/* ---- begin and end ---- */

int llmq_worker_stream_begin(struct llmq_worker *w, struct worker_job *job,
                             struct llmq_http_request *req)
{
    int api = llmq_stream_api_of(job->url_path);
    if (api < 0 || !wants_stream(job->body))
        return 0;
    struct worker_stream *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->as = llmq_stream_asm_new((enum llmq_stream_api)api)) == NULL) {
        free(s);
        return -1;
    }
    s->w = w;
    s->job = job;
    s->acct = job->acct;
    s->api = (enum llmq_stream_api)api;
    /* relayed when a gateway's caller waits for it (its lease); else (a
     * Batch line, llmq enqueue) it runs collected */
    s->member.job_id = job->id;
    s->member.attempt = job->eid; /* a later delivery's is greater */
    s->member.flush = on_relay_flush;
    s->member.lost = on_relay_lost;
    if (job->lease != NULL && job->lease[0] != '\0') {
        if (llmq_worker_relay_join(w, job->acct, job->lease, &s->member) == 0)
            s->relay = RELAY_ON;
        else /* no memory, or no gateway id: its client cannot be reached */
            LLMQ_LOG_JOB(LLMQ_LOG_WARN, job->acct->cfg->name, job->id,
                         "stream: cannot relay to gateway %s: the call runs collected", job->lease);
    }
    char *patched = ask_usage(job->body, s->api, &s->client_usage);
    if (patched != NULL) {
        free(job->body);
        job->body = patched;
    }
    ev_init(&s->beat_timer, on_beat);
    s->beat_timer.repeat = LLMQ_STREAM_HEARTBEAT_MS / 1000.0;
    s->beat_timer.data = s;
    job->stream = s;
    req->body = job->body;
    req->body_len = strlen(job->body);
    req->on_data = on_data;
    req->data_privdata = s;
    req->xfer_out = &s->xfer;
    return 0;
}

void llmq_worker_stream_sent(struct worker_job *job)
{
    struct worker_stream *s = job->stream;
    if (s == NULL)
        return;
    s->sent_at = ev_now(s->w->loop);
    if (s->relay == RELAY_ON && send_frame(s, 's', NULL, 0) == 0)
        ev_timer_again(s->w->loop, &s->beat_timer);
}

/* The result line (result_line.h) of a streamed answer: its assembled body,
 * and error {code, message} when err_code is not NULL. Returns new. Marks the
 * job's settle nostore when the response cache must not keep it: an error
 * (a stream aborted or broken off) or an answer cut off at its limit. */
static char *stream_line(const struct worker_stream *s, const struct llmq_http_response *resp,
                         const char *err_code, const char *err_message)
{
    size_t len = 0;
    char *text = llmq_stream_asm_result(s->as, &len);
    s->job->settle.nostore = err_code != NULL                 ? LLMQ_WORKER_NOSTORE_ALL
                             : llmq_openai_cut_off(text, len) ? LLMQ_WORKER_NOSTORE_CUT
                                                              : LLMQ_WORKER_NOSTORE_NO;
    char *line = llmq_worker_result_line(s->job, resp, text, len, NULL, err_code, err_message);
    free(text);
    return line;
}

/* When the stream reached the client (or the client left), decides
 * job->settle itself and returns 1; else returns 0. */
static int decide_relayed(struct worker_job *job, const struct llmq_http_response *resp,
                          const struct llmq_call_class *c)
{
    struct worker_stream *s = job->stream;
    if (s == NULL || (!s->relayed && !s->aborting && s->out_len == 0))
        return 0;
    if (s->relay != RELAY_ON && !s->aborting)
        return 0; /* collected: decided as any call */
    struct llmq_usage u;
    int has = llmq_stream_asm_usage(s->as, &u) && (u.present & LLMQ_USAGE_TOTAL);
    struct worker_settle *st = &job->settle;
    free(st->line);
    st->line = NULL;
    if (has)
        llmq_worker_settle_usage(st, &u); /* spend budgets price it */
    if (s->aborting) {
        int64_t est = job->est_prompt_tokens > 0 ? job->est_prompt_tokens : 0;
        st->outcome[0] = '\0'; /* we ended it: nothing learnt about the endpoint */
        st->mode = WORKER_SETTLE_DONE;
        st->actual_tokens = has ? u.total_tokens : est + llmq_stream_asm_deltas(s->as);
        st->line = stream_line(s, resp, s->abort_why,
                               strcmp(s->abort_why, "client_closed") == 0
                                   ? "the client left; the upstream call was aborted"
                                   : "the relay to the gateway was lost; the upstream call "
                                     "was aborted");
        LLMQ_LOG_JOB(LLMQ_LOG_INFO, job->acct->cfg->name, job->id,
                     "stream aborted (%s) after %lld events: settled on %lld tokens (%s)",
                     s->abort_why, (long long)llmq_stream_asm_deltas(s->as),
                     (long long)st->actual_tokens, has ? "reported usage" : "estimate");
        return 1;
    }
    const char *code = llmq_stream_asm_error_code(s->as);
    if (c->verdict == LLMQ_CALL_DONE && s->clean_end && code[0] == '\0') {
        st->mode = WORKER_SETTLE_DONE;
        st->actual_tokens = has ? u.total_tokens : job->cost;
        st->line = stream_line(s, resp, NULL, NULL);
        return 1;
    }
    /* broken off after it reached the client: no retry (the client has half
     * an answer); the result line and the dead letter say why */
    const char *msg = code[0] ? llmq_stream_asm_error_message(s->as) : c->reason;
    if (job->endpoint != NULL && job->endpoint[0] != '\0') /* its health counts the failure */
        snprintf(st->outcome, sizeof(st->outcome), "fail");
    st->mode = WORKER_SETTLE_DEAD;
    snprintf(st->reason, sizeof(st->reason), "stream_error: %s", code[0] ? code : c->reason);
    st->actual_tokens = has ? u.total_tokens : job->cost;
    st->line = stream_line(s, resp, code[0] ? code : "stream_interrupted", msg);
    return 1;
}

/* The error event of a stream that broke off without the API's own. */
static void synth_error(const struct worker_stream *s, const char *why, char *out, size_t n)
{
    json_t *e;
    if (s->api == LLMQ_STREAM_RESPONSES)
        e = json_pack("{s:s, s:s, s:s, s:n, s:I}", "type", "error", "code", "stream_interrupted",
                      "message", why, "param", "sequence_number",
                      (json_int_t)(llmq_stream_asm_last_seq(s->as) + 1));
    else
        e = json_pack("{s:{s:s, s:s, s:n, s:s}}", "error", "message", why, "type", "server_error",
                      "param", "code", "stream_interrupted");
    char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
    snprintf(out, n, "%sdata: %s\n\n", s->api == LLMQ_STREAM_RESPONSES ? "event: error\n" : "",
             t ? t : "{}");
    free(t);
    json_decref(e);
}

/* The last message of an attempt (see stream_call.h). */
static void publish_end(struct worker_stream *s, const struct worker_job *job)
{
    if (s->relay == RELAY_NONE || s->aborting)
        return;
    enum worker_settle_mode m = job->settle.mode;
    if (!s->relayed && s->out_len == 0) {
        int back =
            m == WORKER_SETTLE_RETRY || m == WORKER_SETTLE_HANDBACK || m == WORKER_SETTLE_AUTHPAUSE;
        (void)send_frame(s, back ? 'r' : 'e', NULL, 0);
    } else if (m == WORKER_SETTLE_DONE) {
        (void)send_frame(s, 'e', s->out, s->out_len);
    } else {
        if (s->out_len > 0)
            (void)send_frame(s, 'd', s->out, s->out_len);
        char ev[1024] = "";
        if (!s->error_sent)
            synth_error(s, job->settle.reason, ev, sizeof(ev));
        (void)send_frame(s, 'x', ev, strlen(ev));
    }
    s->out_len = 0;
    /* a draining worker stops once its last settle is answered: the frames
     * leave now, before that settle */
    if (s->w->draining)
        llmq_worker_relay_flush_now(&s->member);
}

/* Counts how the attempt ended (metrics_stream.h). An attempt that ended
 * before any event reached the gateway (back in the queue, an error answered
 * whole) is no stream, unless the client left meanwhile. */
static void count_end(const struct worker_stream *s, const struct worker_job *job)
{
    int relayed = s->in_progress;
    const char *end = NULL;
    if (s->aborting)
        end = "aborted";
    else if (s->relay == RELAY_NONE && s->first_at > 0)
        end = "collected";
    else if (relayed)
        end = job->settle.mode == WORKER_SETTLE_DONE ? "completed" : "error";
    if (end != NULL)
        llmq_worker_metrics_stream_end(llmq_worker_metrics_of_streams(s->w), s->acct->cfg->name,
                                       end, relayed ? ev_now(s->w->loop) - s->first_at : -1);
}

void llmq_worker_stream_end(struct worker_job *job, const struct llmq_http_response *resp)
{
    struct worker_stream *s = job->stream;
    if (s == NULL)
        return;
    ev_timer_stop(s->w->loop, &s->beat_timer);
    if (resp != NULL) /* else nothing was sent, and no s message either */
        publish_end(s, job);
    count_end(s, job);
    llmq_worker_relay_leave(&s->member);
    job->stream = NULL;
    stream_free(s);
}

/* Decides job's settle as any call's (call_decide.h); a collected stream
 * that answered has the answer assembled from its events as its result,
 * not the event text. */
static void decide_by_class(struct llmq_worker *w, struct worker_job *job,
                            const struct llmq_http_response *resp, const struct llmq_call_class *c)
{
    struct worker_stream *s = job->stream;
    char *answer = NULL;
    size_t len = 0;
    if (s->relay != RELAY_ON && c->verdict == LLMQ_CALL_DONE && resp->status >= 200 &&
        resp->status <= 299)
        answer = llmq_stream_asm_result(s->as, &len);
    if (answer != NULL)
        llmq_worker_call_decide(w, job, resp, c, answer, len);
    else
        llmq_worker_call_decide(w, job, resp, c, resp->body, resp->body_len);
    free(answer);
}

int llmq_worker_stream_finish(struct llmq_worker *w, struct worker_job *job,
                              const struct llmq_http_response *resp,
                              const struct llmq_call_class *c)
{
    int by_stream = decide_relayed(job, resp, c);
    if (!by_stream)
        decide_by_class(w, job, resp, c);
    llmq_worker_stream_end(job, resp);
    return by_stream;
}
