/* Streamed calls: the relay of an answer's events to the gateway, its
 * coalescing, the abort when the client leaves, and the settle on the
 * streamed usage (see stream_call.h for the protocol and why it is pub/sub).
 *
 * The curl data callback (on_data) runs inside curl: it only splits and
 * assembles events and sends PUBLISH commands (hiredis, not curl); aborting
 * the transfer happens from a PUBLISH reply or a timer, outside curl, with
 * llmq_http_abort. */
#include "stream_call.h"

#include <ev.h>
#include <hiredis/async.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/metrics_stream.h"
#include "admin/metrics_worker.h"
#include "base/log.h"
#include "jobs/job.h"
#include "jobs/job_id.h"
#include "redis/keys.h"
#include "stream_assemble.h"

enum relay_state { RELAY_UNKNOWN = 0, RELAY_NONE, RELAY_ON };

struct worker_stream {
    struct llmq_worker *w;
    struct worker_job *job; /* NULL once the job let go (llmq_worker_stream_end) */
    struct worker_account *acct;
    int refs; /* the job's, and one per PUBLISH in flight */
    enum llmq_stream_api api;
    struct llmq_stream_asm *as;
    int client_usage; /* the client asked for usage itself */
    enum relay_state relay;
    int relayed;     /* events went to the gateway */
    int in_progress; /* counted in progress (metrics_stream.h) */
    int error_sent;  /* the API's own error event was relayed */
    int clean_end;   /* [DONE] or response.completed seen */
    int aborting;    /* the transfer is being ended by us */
    char abort_why[32];
    struct llmq_http_xfer *xfer;
    char *pending; /* bytes of an event not complete yet */
    size_t pending_len, pending_cap;
    char *out; /* events not published yet */
    size_t out_len, out_cap;
    long long seq;
    long out_events; /* events in out */
    double sent_at;  /* ev_now when the request was sent */
    double first_at; /* ev_now of the first event from the API (0: none yet) */
    double last_pub; /* ev_now of the last PUBLISH */
    ev_timer flush_timer;
    ev_timer beat_timer;
    char channel[LLMQ_KEY_PREFIX_MAX + LLMQ_JOB_ID_MAX + 8];
};

static void stream_release(struct worker_stream *s)
{
    if (--s->refs > 0)
        return;
    llmq_stream_asm_free(s->as);
    free(s->pending);
    free(s->out);
    free(s);
}

static int buf_add(char **p, size_t *len, size_t *cap, const char *d, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < *len + n + 1)
            c *= 2;
        char *np = realloc(*p, c);
        if (np == NULL)
            return -1;
        *p = np;
        *cap = c;
    }
    memcpy(*p + *len, d, n);
    *len += n;
    (*p)[*len] = '\0';
    return 0;
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

/* ---- publishing ---- */

static void abort_call(struct worker_stream *s, const char *why);
static void flush(struct worker_stream *s);

static void on_published(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct worker_stream *s = privdata;
    const redisReply *r = reply;
    char kind = 0;
    if (s->job != NULL) {
        if (r == NULL || r->type != REDIS_REPLY_INTEGER) {
            if (s->relay == RELAY_ON)
                abort_call(s, "relay_lost");
        } else if (s->relay == RELAY_UNKNOWN) {
            s->relay = r->integer > 0 ? RELAY_ON : RELAY_NONE;
            kind = 's';
        } else if (s->relay == RELAY_ON && r->integer == 0) {
            abort_call(s, "client_closed");
        }
    }
    if (kind == 's' && s->relay == RELAY_ON) {
        ev_timer_again(s->w->loop, &s->beat_timer);
        flush(s); /* what came before the answer */
    } else if (kind == 's') {
        s->out_len = 0; /* nobody relays this job: it runs collected */
        s->out_events = 0;
    }
    stream_release(s);
}

/* Publishes kind + seq + payload[0..n). Returns 0, or -1 when it could not be sent. */
static int publish(struct worker_stream *s, char kind, const char *payload, size_t n)
{
    redisAsyncContext *ac = llmq_redis_async_context(s->acct->cmd);
    char head[32];
    int hl = snprintf(head, sizeof(head), "%c%lld\n", kind, s->seq);
    char *msg = malloc((size_t)hl + n + 1);
    if (ac == NULL || msg == NULL) {
        free(msg);
        return -1;
    }
    memcpy(msg, head, (size_t)hl);
    if (n > 0)
        memcpy(msg + hl, payload, n);
    int rc =
        redisAsyncCommand(ac, on_published, s, "PUBLISH %s %b", s->channel, msg, (size_t)hl + n);
    free(msg);
    if (rc != REDIS_OK)
        return -1;
    s->refs++;
    s->seq++;
    s->last_pub = ev_now(s->w->loop);
    llmq_worker_metrics_stream_message(llmq_worker_metrics_of_streams(s->w), s->acct->cfg->name);
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

/* Sends the events waiting in out as one d message. */
static void flush(struct worker_stream *s)
{
    ev_timer_stop(s->w->loop, &s->flush_timer);
    if (s->out_len == 0 || s->relay != RELAY_ON || s->aborting)
        return;
    if (publish(s, 'd', s->out, s->out_len) != 0) {
        abort_call(s, "relay_lost");
        return;
    }
    s->relayed = 1;
    s->out_len = 0;
    ev_timer_again(s->w->loop, &s->beat_timer);
}

static void on_flush_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    flush(t->data);
}

static void on_beat(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct worker_stream *s = t->data;
    if (s->relay != RELAY_ON || s->aborting)
        return;
    if (ev_now(loop) - s->last_pub >= LLMQ_STREAM_HEARTBEAT_MS / 1000.0 - 0.001 &&
        publish(s, 'h', NULL, 0) != 0)
        abort_call(s, "relay_lost");
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
    ev_timer_stop(s->w->loop, &s->flush_timer);
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
        failed |= buf_add(&s->out, &s->out_len, &s->out_cap, ev, (size_t)(at - ev));
        n -= (size_t)(at - ev) + un;
        ev = at + un;
    }
    failed |= buf_add(&s->out, &s->out_len, &s->out_cap, ev, n);
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
    if (buf_add(&s->pending, &s->pending_len, &s->pending_cap, data, len) != 0)
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
    if (s->relay == RELAY_ON && s->out_len > 0 && !ev_is_active(&s->flush_timer)) {
        /* Later flushes fall on ticks of the loop clock shared by every
         * stream of the worker, so those due together go out in one write
         * and Redis reads them in one go. */
        double now = ev_now(s->w->loop), gap = (double)s->w->cfg->stream_coalesce_ms / 1000.0;
        /* the first tick at least half an interval after the last publish:
         * one publish per interval on average, never two in a row */
        double due = ceil((s->last_pub + 0.5 * gap) / gap) * gap;
        if (!s->relayed || gap <= 0.0 || now - s->last_pub >= gap) {
            flush(s); /* the first events, or a quiet spell: at once */
        } else {
            ev_timer_set(&s->flush_timer, due - now > 0 ? due - now : 0., 0.);
            ev_timer_start(s->w->loop, &s->flush_timer);
        }
    }
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
    if (s == NULL || (s->as = llmq_stream_asm_new((enum llmq_stream_api)api)) == NULL ||
        llmq_key(s->channel, sizeof(s->channel), job->acct->prefix, LLMQ_KEY_SSE, job->id, NULL) !=
            LLMQ_OK) {
        if (s != NULL)
            llmq_stream_asm_free(s->as);
        free(s);
        return -1;
    }
    s->w = w;
    s->job = job;
    s->acct = job->acct;
    s->refs = 1;
    s->api = (enum llmq_stream_api)api;
    char *patched = ask_usage(job->body, s->api, &s->client_usage);
    if (patched != NULL) {
        free(job->body);
        job->body = patched;
    }
    ev_init(&s->flush_timer, on_flush_timer);
    s->flush_timer.data = s;
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
    if (s != NULL)
        s->sent_at = ev_now(s->w->loop);
    if (s != NULL && publish(s, 's', NULL, 0) != 0)
        s->relay = RELAY_NONE; /* Redis away: nobody can be relayed to */
}

/* The Batch output line of a streamed answer: its assembled body, and
 * error {code, message} when err_code is not NULL. Returns new. */
static char *stream_line(const struct worker_stream *s, const struct llmq_http_response *resp,
                         const char *err_code, const char *err_message)
{
    const struct worker_job *job = s->job;
    size_t len;
    char *text = llmq_stream_asm_result(s->as, &len);
    json_t *body = text ? json_loadb(text, len, 0, NULL) : NULL;
    free(text);
    const char *rid = resp->headers.request_id[0] ? resp->headers.request_id : "";
    json_t *error =
        err_code ? json_pack("{s:s, s:s}", "code", err_code, "message", err_message) : json_null();
    char id[LLMQ_JOB_OUTPUT_ID_MAX], custom_id[LLMQ_JOB_ID_MAX + 1];
    llmq_job_output_id(rid, job->id, id, sizeof(id));
    llmq_job_id_to_custom(job->id, custom_id, sizeof(custom_id));
    json_t *line = json_pack("{s:s, s:s, s:{s:i, s:s, s:o}, s:o}", "id", id, "custom_id", custom_id,
                             "response", "status_code", (int)resp->status, "request_id", rid,
                             "body", body ? body : json_null(), "error", error);
    char *out = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    return out;
}

int llmq_worker_stream_decide(struct llmq_worker *w, struct worker_job *job,
                              const struct llmq_http_response *resp,
                              const struct llmq_call_class *c)
{
    (void)w;
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
        (void)publish(s, back ? 'r' : 'e', NULL, 0);
        return;
    }
    if (m == WORKER_SETTLE_DONE) {
        (void)publish(s, 'e', s->out, s->out_len);
        return;
    }
    if (s->out_len > 0)
        (void)publish(s, 'd', s->out, s->out_len);
    char ev[1024] = "";
    if (!s->error_sent)
        synth_error(s, job->settle.reason, ev, sizeof(ev));
    (void)publish(s, 'x', ev, strlen(ev));
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
    if (s->relay != RELAY_ON && job->settle.mode == WORKER_SETTLE_DONE && resp != NULL &&
        resp->status >= 200 && resp->status <= 299) {
        /* collected: the result is the assembled answer, not the event text */
        char *line = stream_line(s, resp, NULL, NULL);
        if (line != NULL) {
            free(job->settle.line);
            job->settle.line = line;
        }
    }
    ev_timer_stop(s->w->loop, &s->flush_timer);
    ev_timer_stop(s->w->loop, &s->beat_timer);
    if (resp != NULL) /* else nothing was sent, and no s message either */
        publish_end(s, job);
    count_end(s, job);
    s->job = NULL;
    s->xfer = NULL;
    job->stream = NULL;
    stream_release(s);
}
