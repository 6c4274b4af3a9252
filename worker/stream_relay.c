/* The worker's side of the stream relay; see stream_relay.h.
 *
 * Every message a tick built waits in its relay's queue (struct held) until
 * a PUBLISH of it is answered: answered with a subscriber count, it is
 * delivered; unanswered (the connection lost, the command timeout of a
 * stalled Redis), it is sent again, in order, once the connection is back,
 * every RETRY_S; a copy Redis took before the connection broke reaches the
 * gateway twice, which drops the repeat by its sequence number. While the
 * relay has trouble (since trouble_s), a PUBLISH that reached no subscriber
 * is held too (the gateway's subscription may be coming back); without
 * trouble it means the gateway is gone. What waits is bounded: a stream's
 * frames held at most LLMQ_RELAY_HOLD_STREAM_BYTES, the worker's at most
 * LLMQ_RELAY_HOLD_WORKER_BYTES, the trouble at most LLMQ_RELAY_HOLD_MS;
 * past a bound the streams concerned are lost (their calls aborted).
 *
 * A relay lives while it has members, a message waiting or a PUBLISH in
 * flight (relay_maybe_free); the back channels (one subscribed connection
 * per account) live until llmq_worker_relays_free. */
#include "stream_relay.h"

#include <ev.h>
#include <hiredis/async.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/metrics_stream.h"
#include "admin/metrics_worker.h"
#include "base/bytes.h"
#include "base/log.h"
#include "jobs/stream_relay.h"
#include "redis/keys.h"
#include "redis/redis_async.h"
#include "redis/redis_sub.h"
#include "worker.h"

#define CHANNEL_MAX (LLMQ_KEY_PREFIX_MAX + LLMQ_RELAY_NAME_MAX + 8)
#define RETRY_S 0.25

/* A message waiting for its PUBLISH to be answered. */
struct held {
    struct worker_relay *r;
    struct held *next;
    int sent;   /* a PUBLISH of it is in flight */
    int orphan; /* out of the queue (given up): its answer frees it */
    size_t len;
    char data[];
};

struct worker_relay {
    struct worker_relays *hub;
    struct worker_account *a;
    char channel[CHANNEL_MAX]; /* P sse:<gateway id> */
    struct worker_relay_member *members;
    char *out; /* the message being built ("" none) */
    size_t out_len, out_cap;
    int inflight; /* PUBLISHes unanswered, and holds while members are told */
    double last_pub;
    struct held *held, *held_tail; /* the queue, oldest first */
    double trouble_s;              /* ev_now when a PUBLISH last failed to arrive (0: none) */
    ev_timer tick, retry;
    struct worker_relay *prev, *next;
};

/* The worker's own channel on one account's Redis. */
struct back_channel {
    struct worker_relays *hub;
    struct worker_account *a;
    struct llmq_redis_sub *sub; /* NULL until the account's first relayed stream */
    char channel[CHANNEL_MAX];  /* P ssw:<consumer> */
};

struct worker_relays {
    struct llmq_worker *w;
    struct worker_relay *list;
    size_t held_bytes; /* of every relay's queue */
    struct back_channel back[LLMQ_WORKER_MAX_ACCOUNTS];
};

/* ---- the worker's channel: cancels from gateways ---- */

static void tell_lost(struct worker_relay *r, const char *job_id, const char *why);
static void relay_maybe_free(struct worker_relay *r);

static void on_back_message(const char *msg, size_t len, void *privdata)
{
    struct back_channel *b = privdata;
    const char *id;
    size_t n;
    char job_id[LLMQ_RELAY_NAME_MAX + 1];
    if (llmq_relay_cancel_decode(msg, len, &id, &n) != 0) {
        LLMQ_LOG(LLMQ_LOG_WARN, "stream relay: a malformed message on %s ignored", b->channel);
        return;
    }
    memcpy(job_id, id, n);
    job_id[n] = '\0';
    for (struct worker_relay *rl = b->hub->list, *next; rl != NULL; rl = next) {
        next = rl->next;
        if (rl->a == b->a) {
            tell_lost(rl, job_id, "client_closed");
            relay_maybe_free(rl);
        }
    }
}

/* Opens the worker's channel on account a's Redis once. */
static void back_open(struct worker_relays *hub, struct worker_account *a)
{
    struct back_channel *b = &hub->back[a - hub->w->accounts];
    if (b->sub != NULL)
        return;
    struct llmq_worker *w = hub->w;
    b->hub = hub;
    b->a = a;
    struct llmq_error err = {0};
    if (llmq_key(b->channel, sizeof(b->channel), a->prefix, LLMQ_KEY_SSE_WORKER, w->cfg->consumer,
                 &err) != LLMQ_OK) {
        LLMQ_LOG(LLMQ_LOG_ERROR, "stream relay: %s", err.msg);
        return;
    }
    struct llmq_redis_url url = w->cfg->redis;
    llmq_redis_url_route(&url, a->cfg->name);
    struct llmq_redis_async_config rc = {.name = "worker-relay",
                                         .command_timeout_ms = (int)w->cfg->redis_timeout_ms};
    b->sub = llmq_redis_sub_new(w->loop, &url, &rc, b->channel, on_back_message, NULL, b, &err);
    memset(&url, 0, sizeof(url)); /* the password */
    if (b->sub == NULL)
        LLMQ_LOG(LLMQ_LOG_ERROR, "stream relay: %s", err.msg);
}

/* ---- relays ---- */

/* Frees r once nothing needs it. */
static void relay_maybe_free(struct worker_relay *r)
{
    if (r->members != NULL || r->out_len > 0 || r->inflight > 0 || r->held != NULL)
        return;
    ev_timer_stop(r->hub->w->loop, &r->tick);
    ev_timer_stop(r->hub->w->loop, &r->retry);
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->hub->list = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    free(r->out);
    free(r);
}

/* Tells r's members (the one of job_id only, when not NULL) that they are
 * lost. r is not freed here: the caller ends with relay_maybe_free. */
static void tell_lost(struct worker_relay *r, const char *job_id, const char *why)
{
    for (struct worker_relay_member *m = r->members, *next; m != NULL; m = next) {
        next = m->next;
        if (job_id == NULL || strcmp(m->job_id, job_id) == 0)
            m->lost(m, why);
    }
}

/* Takes h out of r's queue (not freed). */
static void held_unlink(struct worker_relay *r, struct held *h)
{
    struct held **p = &r->held, *prev = NULL;
    while (*p != NULL && *p != h) {
        prev = *p;
        p = &(*p)->next;
    }
    if (*p == NULL)
        return;
    *p = h->next;
    if (r->held_tail == h)
        r->held_tail = prev;
    h->next = NULL;
    r->hub->held_bytes -= h->len;
}

/* Empties r's queue: what is in flight is freed by its answer. */
static void held_drop(struct worker_relay *r)
{
    while (r->held != NULL) {
        struct held *h = r->held;
        held_unlink(r, h);
        if (h->sent)
            h->orphan = 1;
        else
            free(h);
    }
    r->trouble_s = 0;
    ev_timer_stop(r->hub->w->loop, &r->retry);
}

/* A PUBLISH did not arrive: r holds its queue, and tries again soon. */
static void trouble(struct worker_relay *r)
{
    struct llmq_worker *w = r->hub->w;
    if (r->trouble_s == 0) {
        r->trouble_s = ev_now(w->loop);
        LLMQ_LOG(LLMQ_LOG_WARN, "stream relay: %s unreachable: its frames are held (at most %d ms)",
                 r->channel, LLMQ_RELAY_HOLD_MS);
    }
    if (!ev_is_active(&r->retry)) {
        ev_timer_set(&r->retry, RETRY_S, 0.);
        ev_timer_start(w->loop, &r->retry);
    }
}

static void send_held(struct worker_relay *r);

static void on_published(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct held *h = privdata;
    struct worker_relay *r = h->r;
    const redisReply *rep = reply;
    r->inflight--;
    h->sent = 0;
    if (h->orphan) {
        free(h);
    } else if (rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0) {
        held_unlink(r, h);
        free(h);
        if (r->held == NULL && r->trouble_s > 0) {
            LLMQ_LOG(LLMQ_LOG_INFO, "stream relay: %s reachable again after %.1f s", r->channel,
                     ev_now(r->hub->w->loop) - r->trouble_s);
            r->trouble_s = 0;
            for (struct worker_relay_member *m = r->members; m != NULL; m = m->next)
                m->held_bytes = 0;
        }
    } else if (rep != NULL && rep->type == REDIS_REPLY_INTEGER && r->trouble_s == 0) {
        held_drop(r); /* nobody listens on the gateway's channel: it is gone */
        tell_lost(r, NULL, "client_closed");
    } else if (rep != NULL && rep->type != REDIS_REPLY_INTEGER) {
        held_drop(r); /* refused (an ACL without the channel): no use sending again */
        tell_lost(r, NULL, "relay_lost");
    } else { /* not arrived, or nobody subscribed while the relay had trouble */
        trouble(r);
    }
    relay_maybe_free(r);
}

/* Sends every message of r's queue not in flight, oldest first (r is not
 * freed here). Pipelined, in trouble too: a lost connection fails every
 * message after the first one that failed, so order holds; a message that
 * reached nobody while later ones reached the gateway shows there as a gap
 * (an error event, never a silent cut). */
static void send_held(struct worker_relay *r)
{
    struct llmq_worker *w = r->hub->w;
    redisAsyncContext *ac = llmq_redis_async_context(r->a->cmd);
    for (struct held *h = r->held; h != NULL; h = h->next) {
        if (h->sent)
            continue;
        if (ac == NULL || redisAsyncCommand(ac, on_published, h, "PUBLISH %s %b", r->channel,
                                            h->data, h->len) != REDIS_OK) {
            trouble(r);
            return;
        }
        h->sent = 1;
        r->inflight++;
        r->last_pub = ev_now(w->loop);
        llmq_worker_metrics_stream_message(llmq_worker_metrics_of_streams(w), r->a->cfg->name);
    }
}

static void on_retry(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct worker_relay *r = t->data;
    if (r->trouble_s > 0 && ev_now(loop) - r->trouble_s > LLMQ_RELAY_HOLD_MS / 1000.0) {
        LLMQ_LOG(LLMQ_LOG_WARN, "stream relay: %s unreachable for %d ms: its streams end",
                 r->channel, LLMQ_RELAY_HOLD_MS);
        held_drop(r);
        tell_lost(r, NULL, "relay_lost");
    } else {
        send_held(r);
    }
    relay_maybe_free(r);
}

/* Sends what waits in r (r is not freed here). */
static void flush(struct worker_relay *r)
{
    struct llmq_worker *w = r->hub->w;
    for (struct worker_relay_member *m = r->members; m != NULL; m = m->next) {
        if (m->dirty) {
            m->dirty = 0;
            m->flush(m);
        }
    }
    ev_timer_stop(w->loop, &r->tick); /* the frames just added leave now */
    if (r->out_len == 0)
        return;
    struct held *h = malloc(sizeof(*h) + r->out_len);
    if (h == NULL) {
        r->out_len = 0;
        tell_lost(r, NULL, "relay_lost");
        return;
    }
    *h = (struct held){.r = r, .len = r->out_len};
    memcpy(h->data, r->out, r->out_len);
    r->out_len = 0;
    if (r->held_tail != NULL)
        r->held_tail->next = h;
    else
        r->held = h;
    r->held_tail = h;
    r->hub->held_bytes += h->len;
    r->last_pub = ev_now(w->loop);
    if (r->trouble_s == 0 || !ev_is_active(&r->retry))
        send_held(r);
}

static void on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct worker_relay *r = t->data;
    flush(r);
    relay_maybe_free(r);
}

/* Something waits in r: flush at once after a quiet spell, else at the
 * next tick at least half an interval after the last publish (one publish
 * per interval on average, never two in a row), on the grid of the loop
 * clock that every relay shares. */
static void schedule(struct worker_relay *r)
{
    struct llmq_worker *w = r->hub->w;
    if (ev_is_active(&r->tick))
        return;
    double now = ev_now(w->loop), gap = (double)w->cfg->stream_coalesce_ms / 1000.0;
    double due = gap > 0.0 ? ceil((r->last_pub + 0.5 * gap) / gap) * gap : now;
    ev_timer_set(&r->tick, gap <= 0.0 || now - r->last_pub >= gap || due <= now ? 0. : due - now,
                 0.);
    ev_timer_start(w->loop, &r->tick);
}

int llmq_worker_relay_join(struct llmq_worker *w, struct worker_account *a, const char *gateway,
                           struct worker_relay_member *m)
{
    m->relay = NULL;
    if (w->relays == NULL && (w->relays = calloc(1, sizeof(*w->relays))) == NULL)
        return -1;
    struct worker_relays *hub = w->relays;
    hub->w = w;
    char channel[CHANNEL_MAX];
    if (llmq_key(channel, sizeof(channel), a->prefix, LLMQ_KEY_SSE, gateway, NULL) != LLMQ_OK)
        return -1;
    back_open(hub, a);
    struct worker_relay *r = hub->list;
    while (r != NULL && (r->a != a || strcmp(r->channel, channel) != 0))
        r = r->next;
    if (r == NULL) {
        if ((r = calloc(1, sizeof(*r))) == NULL)
            return -1;
        r->hub = hub;
        r->a = a;
        memcpy(r->channel, channel, sizeof(channel));
        ev_init(&r->tick, on_tick);
        r->tick.data = r;
        ev_init(&r->retry, on_retry);
        r->retry.data = r;
        r->next = hub->list;
        if (r->next != NULL)
            r->next->prev = r;
        hub->list = r;
    }
    m->relay = r;
    m->dirty = 0;
    m->held_bytes = 0;
    m->prev = NULL;
    m->next = r->members;
    if (m->next != NULL)
        m->next->prev = m;
    r->members = m;
    return 0;
}

void llmq_worker_relay_leave(struct worker_relay_member *m)
{
    struct worker_relay *r = m->relay;
    if (r == NULL)
        return;
    if (m->prev != NULL)
        m->prev->next = m->next;
    else
        r->members = m->next;
    if (m->next != NULL)
        m->next->prev = m->prev;
    m->prev = m->next = NULL;
    m->relay = NULL;
    relay_maybe_free(r);
}

static int out_add(struct worker_relay *r, const char *d, size_t n)
{
    return llmq_bytes_append(&r->out, &r->out_len, &r->out_cap, d, n);
}

int llmq_worker_relay_frame(struct worker_relay_member *m, char kind, long long seq,
                            const char *payload, size_t n)
{
    struct worker_relay *r = m->relay;
    char head[LLMQ_RELAY_HEAD_MAX];
    int k = llmq_relay_frame_head(head, sizeof(head), kind, seq, m->job_id, m->attempt, n);
    if (r == NULL || k < 0)
        return -1;
    if (r->trouble_s > 0) { /* held: within the bounds */
        size_t add = (size_t)k + n;
        if (m->held_bytes + add > LLMQ_RELAY_HOLD_STREAM_BYTES ||
            r->hub->held_bytes + r->out_len + add > LLMQ_RELAY_HOLD_WORKER_BYTES)
            return -1;
        m->held_bytes += add;
    }
    size_t was = r->out_len;
    const char *me = r->hub->w->cfg->consumer;
    if ((was == 0 && (out_add(r, me, strlen(me)) != 0 || out_add(r, "\n", 1) != 0)) ||
        out_add(r, head, (size_t)k) != 0 || (n > 0 && out_add(r, payload, n) != 0)) {
        r->out_len = was;
        return -1;
    }
    schedule(r);
    return 0;
}

void llmq_worker_relay_dirty(struct worker_relay_member *m)
{
    if (m->relay == NULL)
        return;
    m->dirty = 1;
    schedule(m->relay);
}

void llmq_worker_relay_flush_now(struct worker_relay_member *m)
{
    if (m->relay != NULL)
        flush(m->relay);
}

void llmq_worker_relays_free(struct llmq_worker *w)
{
    struct worker_relays *hub = w->relays;
    if (hub == NULL)
        return;
    for (int i = 0; i < LLMQ_WORKER_MAX_ACCOUNTS; i++)
        llmq_redis_sub_free(hub->back[i].sub);
    while (hub->list != NULL) {
        struct worker_relay *r = hub->list;
        hub->list = r->next;
        ev_timer_stop(w->loop, &r->tick);
        ev_timer_stop(w->loop, &r->retry);
        while (r->held != NULL) { /* the connections are freed: nothing is in flight */
            struct held *h = r->held;
            r->held = h->next;
            free(h);
        }
        free(r->out);
        free(r);
    }
    free(hub);
    w->relays = NULL;
}
