/* Streamed calls (see stream.h): subscribe, enqueue, wait, relay, end.
 *
 * A stream's life (struct stream, r->state):
 *   WAITING   subscribed and enqueued; answers as a synchronous call would
 *             (a result without events, a 429 after --max-wait-ms);
 *   RUNNING   a worker announced it sends the request (message s or h): a
 *             watchdog of GW_STREAM_WATCHDOG_MS replaces the wait; r: back
 *             to WAITING (a 429 or 5xx before any event: retried);
 *   STREAMING the first events came: 200 text/event-stream is answered with
 *             a content reader (MHD_create_response_from_callback) that
 *             hands MHD what came and pauses the connection when nothing
 *             waits; e / x end it (x, a gap or the watchdog with an error
 *             event);
 *   DONE      nothing more is expected.
 * The worker's messages come on this gateway's one relay channel (stream.h)
 * and are routed by job id through the waiters' table (the stream's waiter):
 * a frame for a job that has no stream here (its client left) is answered
 * with a cancel to its worker.
 * Attempts: a job handed back (or reclaimed) and taken by another worker
 * has two attempts whose frames come on two connections, in any order
 * between them. Every frame names its attempt (its delivery's entry id,
 * greater for a later one): the stream follows the newest attempt it has
 * seen, drops the frames of older ones (and tells an older attempt's
 * worker that is still sending to stop), and within its attempt the
 * sequence numbers run without a gap; a newer attempt after the stream
 * began is an error (the client has half an answer).
 * The push, the wait, the result's look-up, the cancel and a client gone
 * are call_wait.h's, shared with synchronous calls: struct stream begins
 * with its struct gw_call_wait, and stream_kind says what a stream does at
 * each of those steps. Its own step besides (request_step.h): a PUBSUB
 * NUMSUB in flight (ask_worker). */
#include "stream.h"
#include "cache_replay.h"
#include "call_job.h"
#include "call_wait.h"

#include <ev.h>
#include <hiredis/async.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "http.h"
#include "jobs/job.h"
#include "jobs/job_result.h"
#include "jobs/job_store.h"
#include "jobs/stream_relay.h"
#include "redis/redis_sub.h"
#include "redis/script.h"
#include "request_step.h"
#include "waiters.h"

enum stream_phase { ST_WAITING, ST_RUNNING, ST_STREAMING, ST_DONE };

/* Histogram bounds, seconds. */
static const double ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60};
static const double duration_bounds[] = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
#define TTFT_N (sizeof(ttft_bounds) / sizeof(ttft_bounds[0]))
#define DURATION_N (sizeof(duration_bounds) / sizeof(duration_bounds[0]))

struct histogram {
    unsigned long long counts[16]; /* per bound, then +Inf */
    double sum;
    unsigned long long n;
};

struct stream;

struct gw_streams {
    struct gw *gw;
    struct llmq_redis_sub *relay;           /* P sse:<gateway id> subscribed */
    char channel[LLMQ_KEY_PREFIX_MAX + 64]; /* that channel */
    struct stream *active;                  /* every stream not yet DONE */
    long long in_progress;
    unsigned long long started, completed, aborted, failed, messages, events, bytes;
    struct histogram ttft, duration;
    /* Is Redis reachable from here (stream.h, the watchdog)? A PING every
     * second while streams are active: doubt_s is when it last looked
     * stalled or away (no connection, no subscription, a PING unanswered
     * or answered late). */
    ev_timer probe;
    int probing;
    double probe_sent_s, doubt_s;
    double last_message_s; /* ev_now of the relay's last message (for any stream) */
};

struct stream {
    /* first: r->state is both; its timer is the max wait (WAITING) or the
     * watchdog (RUNNING, STREAMING) */
    struct gw_call_wait cw;
    struct gw_streams *ss;
    struct stream *prev, *next; /* in ss->active while not DONE */
    enum stream_phase phase;
    char worker[LLMQ_RELAY_NAME_MAX + 1]; /* the sender of its s message ("" none yet) */
    int responses;                        /* the Responses API's error event shape */
    struct llmq_relay_attempt attempt;    /* the newest attempt seen ({0, 0} none) */
    long long next_seq;
    char *buf; /* bytes for the client not yet handed to MHD */
    size_t len, off, cap;
    int ended;  /* no more bytes after buf */
    int paused; /* the connection waits in the content reader */
    int asking; /* whether its worker lives (ask_worker) */
    double t0_s, t_first_s;
    double last_frame_s; /* ev_now of the last frame taken (the watchdog's) */
    /* Its job ended done before its frames came: they are behind the ended
     * event on the relay connection (a gateway slow to read it), so they are
     * waited for rather than answering a streaming client with a JSON body
     * it would read as an empty stream. 0: no; 1: waiting for them (since
     * ended_s); 2: they never came, the result answers. */
    int ended_done;
    double ended_s;
};

static void observe(struct histogram *h, const double *bounds, size_t n, double v)
{
    size_t i = 0;
    while (i < n && v > bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->n++;
}

static void stream_free(void *p)
{
    struct stream *st = p;
    gw_call_wait_clear(&st->cw);
    free(st->buf);
    free(st);
}

/* The SSE events in payload[0..n) (each ends with a blank line). */
static unsigned long long count_events(const char *p, size_t n)
{
    unsigned long long k = 0;
    const char *end = p + n, *at;
    while (p < end && (at = memmem(p, (size_t)(end - p), "\n\n", 2)) != NULL) {
        k++;
        p = at + 2;
    }
    return k;
}

/* ---- bytes to the client ---- */

static int buf_add(struct stream *st, const char *d, size_t n)
{
    if (st->off > 0 && st->off == st->len)
        st->off = st->len = 0;
    if (st->len + n > st->cap) {
        size_t cap = st->cap ? st->cap : 4096;
        while (cap < st->len + n)
            cap *= 2;
        char *b = realloc(st->buf, cap);
        if (b == NULL)
            return -1;
        st->buf = b;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, d, n);
    st->len += n;
    return 0;
}

/* MHD's content reader of a streamed answer. */
static ssize_t read_stream(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct stream *st = cls;
    if (st->off < st->len) {
        size_t n = st->len - st->off < max ? st->len - st->off : max;
        memcpy(out, st->buf + st->off, n);
        st->off += n;
        return (ssize_t)n;
    }
    if (st->ended)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (st->cw.r->gone)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    st->paused = 1;
    gw_request_pause(st->cw.r);
    return 0;
}

static void wake(struct stream *st)
{
    if (st->paused) {
        st->paused = 0;
        gw_request_wake(st->cw.r);
    }
}

/* Starts the 200 event stream (first bytes came). */
static void start_streaming(struct stream *st)
{
    struct gw_request *r = st->cw.r;
    st->phase = ST_STREAMING;
    st->t_first_s = ev_now(r->gw->loop);
    observe(&st->ss->ttft, ttft_bounds, TTFT_N, st->t_first_s - st->t0_s);
    st->ss->started++;
    r->content_type = "text/event-stream; charset=utf-8";
    r->stream_read = read_stream;
    r->stream_cls = st;
    void (*gone)(struct gw_request *) = r->on_gone;
    gw_respond(r, 200, NULL, 0);
    r->on_gone = gone; /* a client leaving mid-stream still aborts the call */
}

/* ---- the end ---- */

/* Nothing more is expected (call_wait.h's on_finish: then it leaves the
 * waiters, so the relay finds it no more, and its timer stops). */
static void on_finish(struct gw_call_wait *cw)
{
    struct stream *st = (struct stream *)cw;
    struct gw_streams *ss = st->ss;
    if (st->phase == ST_STREAMING) {
        ss->in_progress--;
        observe(&ss->duration, duration_bounds, DURATION_N,
                ev_now(cw->r->gw->loop) - st->t_first_s);
    }
    st->phase = ST_DONE;
    if (st->prev != NULL)
        st->prev->next = st->next;
    else
        ss->active = st->next;
    if (st->next != NULL)
        st->next->prev = st->prev;
    st->prev = st->next = NULL;
}

static void stream_finish(struct stream *st)
{
    gw_call_wait_finish(&st->cw);
}

/* Ends a started stream with bytes (may be empty) and an error event
 * saying why when why is not NULL; failed: it ended with an error (ours, or
 * the API's among bytes). */
static void end_streaming(struct stream *st, const char *bytes, size_t n, const char *why,
                          int failed_end)
{
    int failed = n > 0 && buf_add(st, bytes, n) != 0;
    if (why != NULL) {
        json_t *e = st->responses
                        ? json_pack("{s:s, s:s, s:s, s:n}", "type", "error", "code",
                                    "stream_interrupted", "message", why, "param")
                        : json_pack("{s:{s:s, s:s, s:n, s:s}}", "error", "message", why, "type",
                                    "server_error", "param", "code", "stream_interrupted");
        char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
        json_decref(e);
        char ev[1024];
        int k = snprintf(ev, sizeof(ev), "%sdata: %s\n\n", st->responses ? "event: error\n" : "",
                         t ? t : "{}");
        free(t);
        failed |= buf_add(st, ev, (size_t)k < sizeof(ev) ? (size_t)k : sizeof(ev) - 1) != 0;
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, st->cw.r->gw->cfg->account, st->cw.job.id, "stream ended: %s",
                     why);
    }
    if (failed_end || why != NULL)
        st->ss->failed++;
    else
        st->ss->completed++;
    (void)failed; /* out of memory: the client gets what fitted, then the end */
    st->ended = 1;
    wake(st);
    stream_finish(st);
}

/* Something broke: an error event when streaming, else a 502; either way
 * the stream counts as ended with an error. */
static void fail(struct stream *st, const char *why)
{
    if (st->phase == ST_STREAMING) {
        end_streaming(st, NULL, 0, why, 1);
        return;
    }
    st->ss->failed++;
    LLMQ_LOG_JOB(LLMQ_LOG_WARN, st->cw.r->gw->cfg->account, st->cw.job.id, "stream failed: %s",
                 why);
    gw_respond_errorf(st->cw.r, 502, "server_error", NULL, "stream_interrupted",
                      "%s; the job is %s", why, st->cw.job.id);
    stream_finish(st);
}

/* ---- the job: enqueue, results, cancel ---- */

/* The job ended without events: answer from its result as a synchronous
 * call does (the API's error, expired, never fits...). */
static void respond_result(struct stream *st, const char *line, size_t len)
{
    gw_call_respond_result(st->cw.r, st->cw.job.id, line, len);
    stream_finish(st);
}

/* When line is an answer from the response cache (no worker relays frames
 * for it), streams it whole as the API's events (cache_replay.h) and
 * returns 1; else 0. */
static int replay_cached(struct stream *st, const char *line, size_t len)
{
    size_t n = 0;
    char *sse = gw_cache_replay_sse(st->cw.r->m.call_url, st->cw.r->body, line, len, &n);
    if (sse == NULL)
        return 0;
    st->ss->in_progress++;
    start_streaming(st);
    end_streaming(st, sse, n, NULL, 0);
    free(sse);
    return 1;
}

static void arm(struct stream *st, double s)
{
    gw_call_wait_arm(&st->cw, s);
}

/* Its job's result came while WAITING or RUNNING: once events flow, the
 * stream's own end message ends it. */
static void on_result(struct gw_call_wait *cw, const char *line, size_t len, int dead)
{
    struct stream *st = (struct stream *)cw;
    if (!dead && st->ended_done == 0 && replay_cached(st, line, len)) {
        /* answered from the response cache: streamed whole */
    } else if (!dead && st->ended_done == 0) {
        /* a worker relayed it: its frames are on their way */
        st->ended_done = 1;
        st->ended_s = ev_now(cw->r->gw->loop);
        st->phase = ST_RUNNING;
        arm(st, GW_STREAM_WATCHDOG_MS / 1000.0);
    } else if (dead || st->ended_done == 2) {
        respond_result(st, line, len);
    }
}

static int may_look(const struct gw_call_wait *cw)
{
    const struct stream *st = (const struct stream *)cw;
    return st->phase == ST_WAITING || st->phase == ST_RUNNING;
}

static void look_up(struct stream *st)
{
    gw_call_wait_look_up(&st->cw);
}

static int is_queued(const struct gw_call_wait *cw)
{
    return ((const struct stream *)cw)->phase == ST_WAITING;
}

/* job_cancel at --max-wait-ms found it sent: its messages decide now. */
static void on_sent(struct gw_call_wait *cw)
{
    struct stream *st = (struct stream *)cw;
    st->phase = ST_RUNNING;
    st->last_frame_s = ev_now(cw->r->gw->loop);
    arm(st, GW_STREAM_WATCHDOG_MS / 1000.0);
}

/* Cancels the stream's job unless sent (call_wait.h). */
static void cancel_job(struct stream *st, int with_reply)
{
    gw_call_wait_cancel(&st->cw, with_reply);
}

/* 1 while Redis may be stalled or away from here, or was within the last
 * GW_STREAM_STALL_GRACE_MS: a silent worker may be waiting for it too. */
static int redis_doubtful(struct gw_streams *ss, double now)
{
    if (gw_redis(ss->gw) == NULL || !llmq_redis_sub_ready(ss->relay) ||
        (ss->probing && now - ss->probe_sent_s > GW_STREAM_PROBE_SLOW_MS / 1000.0))
        ss->doubt_s = now;
    return ss->doubt_s > 0 && now - ss->doubt_s < GW_STREAM_STALL_GRACE_MS / 1000.0;
}

static void on_pong(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw *gw = privdata; /* the streams may be gone by now */
    struct gw_streams *ss = gw->streams;
    if (ss == NULL)
        return;
    ss->probing = 0;
    double now = ev_now(gw->loop);
    if (reply == NULL || now - ss->probe_sent_s > GW_STREAM_PROBE_SLOW_MS / 1000.0)
        ss->doubt_s = now;
}

static void on_probe(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct gw_streams *ss = t->data;
    if (ss->active == NULL) {
        ev_timer_stop(loop, t);
        return;
    }
    double now = ev_now(loop);
    redisAsyncContext *ac = gw_redis(ss->gw);
    (void)redis_doubtful(ss, now); /* notes a connection down, a PING late */
    if (ac != NULL && !ss->probing && redisAsyncCommand(ac, on_pong, ss->gw, "PING") == REDIS_OK) {
        ss->probing = 1;
        ss->probe_sent_s = now;
    }
}

/* The stream's worker is gone: the stream ends. */
static void worker_gone(struct stream *st)
{
    cancel_job(st, 0); /* should its worker be gone, it is never sent again */
    fail(st, "the worker relaying this stream stopped answering");
}

static void on_numsub(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct stream *st = privdata;
    const redisReply *rep = reply;
    st->asking = 0;
    if (st->phase == ST_RUNNING || st->phase == ST_STREAMING) {
        if (rep == NULL ||
            (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
             rep->element[1]->type == REDIS_REPLY_INTEGER && rep->element[1]->integer > 0))
            arm(st, 1.0); /* the worker lives (or Redis went away): wait on */
        else
            worker_gone(st);
    }
}

/* Asks Redis whether st's worker still holds its channel P ssw:<worker>
 * (a process that died lost its connection, and the channel with it): the
 * answer decides (on_numsub). Returns 0, or -1 when it cannot ask. */
static int ask_worker(struct stream *st)
{
    char channel[LLMQ_KEY_PREFIX_MAX + LLMQ_RELAY_NAME_MAX + 8];
    redisAsyncContext *ac = gw_redis(st->cw.r->gw);
    if (st->asking)
        return 0;
    if (st->worker[0] == '\0' || ac == NULL ||
        llmq_key(channel, sizeof(channel), st->cw.r->gw->prefix, LLMQ_KEY_SSE_WORKER, st->worker,
                 NULL) != LLMQ_OK)
        return -1;
    if (gw_step_command(st->cw.r, ac, on_numsub, st, "PUBSUB NUMSUB %s", channel) != REDIS_OK)
        return -1;
    st->asking = 1;
    return 0;
}

static void on_timer(struct gw_call_wait *cw)
{
    struct stream *st = (struct stream *)cw;
    struct ev_loop *loop = cw->r->gw->loop;
    if (st->phase == ST_WAITING) {
        cancel_job(st, 1); /* (once: a cancel in flight decides) */
    } else if (st->phase == ST_RUNNING && st->ended_done == 1) {
        /* its job is done: wait for its frames while the relay still
         * delivers (a backlog drains), then answer from the result */
        double now = ev_now(loop);
        if (now - st->ss->last_message_s < 1.0 && now - st->ended_s < GW_STREAM_DONE_WAIT_S) {
            arm(st, 1.0);
            return;
        }
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, st->cw.r->gw->cfg->account, st->cw.job.id,
                     "stream: its job is done but its relayed frames never came; answered "
                     "with the stored result as one body");
        st->ended_done = 2;
        look_up(st);
    } else if (st->phase == ST_RUNNING || st->phase == ST_STREAMING) {
        double now = ev_now(loop);
        int patient =
            now - st->last_frame_s < (LLMQ_RELAY_HOLD_MS + GW_STREAM_WATCHDOG_MS) / 1000.0;
        if (patient && redis_doubtful(st->ss, now)) {
            arm(st, 1.0); /* Redis stalled: its worker holds the frames (stream.h) */
            return;
        }
        if (patient && ask_worker(st) == 0)
            return; /* a worker alive but slow (a busy host) is waited for */
        worker_gone(st);
    }
}

static void tell_worker_gone(struct gw_streams *ss, const char *name, size_t n, const char *job_id);

/* The client left (call_wait.h has cancelled the job: unsent, it is never
 * sent): a running call's worker is told to abort it. */
static void on_gone(struct gw_call_wait *cw)
{
    struct stream *st = (struct stream *)cw;
    if (st->phase == ST_STREAMING)
        st->ss->aborted++;
    if (st->worker[0] != '\0')
        tell_worker_gone(st->ss, st->worker, strlen(st->worker), cw->job.id);
    /* else its worker learns from its next frame (on_relay_message) */
}

static const struct gw_call_kind stream_kind = {
    .on_result = on_result,
    .may_look = may_look,
    .is_queued = is_queued,
    .on_timer = on_timer,
    .on_sent = on_sent,
    .on_gone = on_gone,
    .on_finish = on_finish,
};

/* ---- the worker's messages ---- */

/* Where frame f of its stream stands among the attempts: 1 to take it, 0
 * to drop it (an older attempt's, or a repeat), -1 when the stream failed (a gap, a new
 * attempt after it began). sender (name[0..n)) is the worker that sent it. */
static int frame_attempt(struct stream *st, const struct llmq_relay_frame *f, const char *sender,
                         size_t sender_len)
{
    int cmp = llmq_relay_attempt_cmp(&f->attempt, &st->attempt);
    if (cmp < 0) { /* superseded: a worker still sending it stops */
        if ((sender_len != strlen(st->worker) || memcmp(sender, st->worker, sender_len) != 0) &&
            f->kind != 'e' && f->kind != 'x' && f->kind != 'r')
            tell_worker_gone(st->ss, sender, sender_len, st->cw.job.id);
        return 0;
    }
    int unnumbered = f->attempt.ms == 0 && f->attempt.n == 0; /* an earlier release's worker */
    if (cmp > 0 || (f->kind == 's' && unnumbered)) {          /* a new attempt */
        if (st->phase == ST_STREAMING) {
            fail(st, "the call was started again after its stream had begun");
            return -1;
        }
        st->attempt = f->attempt;
        st->next_seq = f->seq == 0 ? 0 : -1;
        if (sender_len <= LLMQ_RELAY_NAME_MAX) {
            memcpy(st->worker, sender, sender_len);
            st->worker[sender_len] = '\0';
        }
    }
    if (f->seq < st->next_seq)
        return 0; /* a repeat: a worker sends again what Redis may have taken */
    if (f->seq != st->next_seq) {
        fail(st, "a relayed part of the stream is missing");
        return -1;
    }
    return 1;
}

/* One frame of its stream (jobs/stream_relay.h) from sender (name[0..n)). */
static void on_relay_frame(struct stream *st, const struct llmq_relay_frame *f, const char *sender,
                           size_t sender_len)
{
    char kind = f->kind;
    const char *payload = f->payload;
    size_t plen = f->payload_len;
    if (frame_attempt(st, f, sender, sender_len) <= 0)
        return;
    st->next_seq++;
    if (kind == 'r') { /* back in the queue: wait as before */
        st->phase = ST_WAITING;
        arm(st, st->cw.r->gw->cfg->max_wait_ms / 1000.0);
        return;
    }
    if (st->phase == ST_WAITING)
        st->phase = ST_RUNNING;
    st->last_frame_s = ev_now(st->cw.r->gw->loop);
    arm(st, GW_STREAM_WATCHDOG_MS / 1000.0);
    if ((kind == 'd' || kind == 'e' || kind == 'x') && plen > 0 && st->phase == ST_RUNNING) {
        st->ss->in_progress++;
        start_streaming(st);
    }
    st->ss->bytes += plen;
    st->ss->events += count_events(payload, plen);
    if (kind == 'd') {
        if (buf_add(st, payload, plen) != 0)
            fail(st, "out of memory");
        else
            wake(st);
    } else if (kind == 'e' && st->phase == ST_STREAMING) {
        end_streaming(st, payload, plen, NULL, 0);
    } else if (kind == 'e') {
        st->ended_done = 2;
        look_up(st); /* ended without events: its result answers */
    } else if (kind == 'x' && st->phase == ST_STREAMING) {
        LLMQ_LOG_JOB(LLMQ_LOG_INFO, st->cw.r->gw->cfg->account, st->cw.job.id,
                     "stream ended with an error event");
        end_streaming(st, payload, plen, NULL, 1);
    } else if (kind == 'x') {
        fail(st, "the stream failed before it began");
    }
}

/* ---- the relay connection ---- */

static void on_cancel_published(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    (void)reply;
    (void)privdata; /* no subscriber: the worker is gone, and its call with it */
}

/* Tells worker (name[0..n)) that the client of job_id left: it aborts the
 * upstream call (best effort; a lost cancel is sent again on its next
 * frame). */
static void tell_worker_gone(struct gw_streams *ss, const char *name, size_t n, const char *job_id)
{
    char worker[LLMQ_RELAY_NAME_MAX + 1], channel[LLMQ_KEY_PREFIX_MAX + LLMQ_RELAY_NAME_MAX + 8];
    char msg[LLMQ_RELAY_NAME_MAX + 8];
    redisAsyncContext *ac = gw_redis(ss->gw);
    if (n > LLMQ_RELAY_NAME_MAX || ac == NULL)
        return;
    memcpy(worker, name, n);
    worker[n] = '\0';
    int k = llmq_relay_cancel_encode(msg, sizeof(msg), job_id);
    if (k < 0 || llmq_key(channel, sizeof(channel), ss->gw->prefix, LLMQ_KEY_SSE_WORKER, worker,
                          NULL) != LLMQ_OK)
        return;
    (void)redisAsyncCommand(ac, on_cancel_published, NULL, "PUBLISH %s %b", channel, msg,
                            (size_t)k);
}

/* The relay's subscription is lost (0; 1: up again): a stream a worker
 * had started may have missed a message, so it ends (an error event, or a
 * 502); a waiting one waits on (a message it missed shows as a gap in its
 * sequence). */
static void on_relay_state(int subscribed, void *privdata)
{
    struct gw_streams *ss = privdata;
    if (subscribed)
        return;
    for (struct stream *st = ss->active, *next; st != NULL; st = next) {
        next = st->next;
        if (st->phase == ST_RUNNING || st->phase == ST_STREAMING)
            fail(st, "llmq-gateway lost its relay connection to Redis");
    }
}

/* One worker's message: its frames, each to its stream. */
static void on_relay_message(const char *m, size_t n, void *privdata)
{
    struct gw_streams *ss = privdata;
    const char *sender;
    size_t sender_len;
    long first = llmq_relay_sender(m, n, &sender, &sender_len);
    if (first < 0) {
        LLMQ_LOG(LLMQ_LOG_WARN, "stream relay: a malformed message on %s ignored", ss->channel);
        return;
    }
    ss->messages++;
    ss->last_message_s = ev_now(ss->gw->loop);
    size_t off = (size_t)first;
    struct llmq_relay_frame f;
    char id[LLMQ_JOB_ID_MAX + 1], told[LLMQ_JOB_ID_MAX + 1] = "";
    int rc;
    while ((rc = llmq_relay_frame_next(m, n, &off, &f)) == 1) {
        if (f.job_id_len > LLMQ_JOB_ID_MAX)
            continue;
        memcpy(id, f.job_id, f.job_id_len);
        id[f.job_id_len] = '\0';
        struct stream *st = (struct stream *)gw_call_wait_find(ss->gw, id, &stream_kind);
        if (st == NULL || st->phase == ST_DONE) {
            /* its client is gone (or another gateway's id): the worker stops */
            if (strcmp(told, id) != 0 && f.kind != 'e' && f.kind != 'x' && f.kind != 'r')
                tell_worker_gone(ss, sender, sender_len, id);
            memcpy(told, id, sizeof(told));
            continue;
        }
        on_relay_frame(st, &f, sender, sender_len);
    }
    if (rc < 0)
        LLMQ_LOG(LLMQ_LOG_WARN, "stream relay: a malformed frame on %s: the rest ignored",
                 ss->channel);
}

struct gw_streams *gw_streams_new(struct gw *gw, struct llmq_error *err)
{
    struct gw_streams *ss = calloc(1, sizeof(*ss));
    if (ss == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
        return NULL;
    }
    ss->gw = gw;
    if (llmq_key(ss->channel, sizeof(ss->channel), gw->prefix, LLMQ_KEY_SSE, gw->id, err) !=
        LLMQ_OK) {
        free(ss);
        return NULL;
    }
    /* a stalled Redis must not cost the subscription (what is published
     * meanwhile would be lost): it outlasts what workers hold */
    struct llmq_redis_async_config rc = {.name = "gateway-relay",
                                         .command_timeout_ms =
                                             gw->cfg->redis_timeout_ms > LLMQ_RELAY_HOLD_MS
                                                 ? gw->cfg->redis_timeout_ms
                                                 : LLMQ_RELAY_HOLD_MS};
    ev_init(&ss->probe, on_probe);
    ss->probe.repeat = 1.0;
    ss->probe.data = ss;
    ss->relay = llmq_redis_sub_new(gw->loop, &gw->url, &rc, ss->channel, on_relay_message,
                                   on_relay_state, ss, err);
    if (ss->relay == NULL) {
        free(ss);
        return NULL;
    }
    return ss;
}

int gw_streams_ready(const struct gw_streams *ss, const char **why)
{
    if (ss != NULL && llmq_redis_sub_ready(ss->relay))
        return 1;
    *why = ss != NULL ? llmq_redis_sub_last_error(ss->relay) : "";
    return 0;
}

/* ---- the handler ---- */

void gw_stream_start(struct gw_request *r, const struct gw_call *call)
{
    struct gw *gw = r->gw;
    struct stream *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    st->ss = gw->streams;
    st->responses = strcmp(r->m.call_url, "/v1/responses") == 0;
    st->t0_s = ev_now(gw->loop);
    st->phase = ST_DONE; /* until it waits */
    r->state = st;
    r->state_free = stream_free;
    if (gw_call_wait_make(&st->cw, r, &stream_kind, call) != 0)
        return;
    const char *why;
    if (gw_redis(gw) == NULL || !gw_streams_ready(st->ss, &why)) {
        gw_respond_no_redis(r);
        return;
    }
    st->phase = ST_WAITING;
    st->next = st->ss->active;
    if (st->next != NULL)
        st->next->prev = st;
    st->ss->active = st;
    if (!ev_is_active(&st->ss->probe))
        ev_timer_again(gw->loop, &st->ss->probe);
    gw_call_wait_begin(&st->cw); /* registered: the worker's frames find it from now on */
}

/* ---- shutdown, metrics ---- */

void gw_streams_shutdown(struct gw_streams *ss)
{
    if (ss == NULL)
        return;
    while (ss->active != NULL) {
        struct stream *st = ss->active;
        if (st->phase == ST_STREAMING) {
            end_streaming(st, NULL, 0, "llmq-gateway is shutting down", 1);
            continue;
        }
        cancel_job(st, 0);
        snprintf(st->cw.r->retry_after, sizeof(st->cw.r->retry_after), "1");
        gw_respond_errorf(st->cw.r, 503, "server_error", NULL, "service_unavailable",
                          "llmq-gateway is shutting down; retry on another instance");
        stream_finish(st);
    }
}

void gw_streams_free(struct gw_streams *ss)
{
    if (ss == NULL)
        return;
    ev_timer_stop(ss->gw->loop, &ss->probe);
    llmq_redis_sub_free(ss->relay);
    free(ss);
}

static void print_histogram(FILE *f, const char *name, const char *help, const struct histogram *h,
                            const double *bounds, size_t n)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long long cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += h->counts[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, h->n, name,
            h->sum, name, h->n);
}

void gw_streams_metrics(const struct gw_streams *ss, FILE *f)
{
    if (ss == NULL)
        return;
    fprintf(f,
            "# HELP llmq_gateway_streams_in_progress Streamed answers being relayed now.\n"
            "# TYPE llmq_gateway_streams_in_progress gauge\n"
            "llmq_gateway_streams_in_progress %lld\n"
            "# HELP llmq_gateway_streams_total Streamed answers by how they ended (started: "
            "the first event reached the client; error: an error event, or a 502 before the "
            "first event).\n"
            "# TYPE llmq_gateway_streams_total counter\n"
            "llmq_gateway_streams_total{end=\"started\"} %llu\n"
            "llmq_gateway_streams_total{end=\"completed\"} %llu\n"
            "llmq_gateway_streams_total{end=\"error\"} %llu\n"
            "llmq_gateway_streams_total{end=\"aborted\"} %llu\n"
            "# HELP llmq_gateway_stream_messages_total Relay messages received (each carries "
            "the events of a few milliseconds).\n"
            "# TYPE llmq_gateway_stream_messages_total counter\n"
            "llmq_gateway_stream_messages_total %llu\n"
            "# HELP llmq_gateway_stream_events_total Events (chunks) relayed to clients.\n"
            "# TYPE llmq_gateway_stream_events_total counter\n"
            "llmq_gateway_stream_events_total %llu\n"
            "# HELP llmq_gateway_stream_bytes_total Event bytes relayed to clients.\n"
            "# TYPE llmq_gateway_stream_bytes_total counter\n"
            "llmq_gateway_stream_bytes_total %llu\n",
            ss->in_progress, ss->started, ss->completed, ss->failed, ss->aborted, ss->messages,
            ss->events, ss->bytes);
    print_histogram(f, "llmq_gateway_stream_ttft_seconds",
                    "Time from a streamed call's arrival to its first event sent to the client "
                    "(queue wait included).",
                    &ss->ttft, ttft_bounds, TTFT_N);
    print_histogram(f, "llmq_gateway_stream_duration_seconds",
                    "Time from a stream's first event to its end.", &ss->duration, duration_bounds,
                    DURATION_N);
}
