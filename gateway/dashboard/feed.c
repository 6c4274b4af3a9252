/* The dashboard's live feed (see feed.h).
 *
 * Ownership: the feed owns its ring of points (json_t, one reference each)
 * and the latest snapshot; each stream is a struct client owned by its
 * request (r->state, freed at the request's last release) and linked in the
 * feed's list while the request lives. A client that leaves is unlinked by
 * on_gone; a feed shut down unlinks every client (client->feed = NULL) and
 * ends its stream. At most one script run is in flight: a tick that finds
 * one still running skips (a slow Redis gets no pile of calls). */
#include "dashboard/feed.h"

#include <ev.h>
#include <hiredis/async.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dashboard/snapshot.h"
#include "http.h"
#include "redis/script.h"

#define TICK_S 1.0
#define LINGER_S 900.0 /* the feed runs this long after the last stream closed */

struct client {
    struct gw_dash_feed *feed; /* NULL once unlinked */
    struct gw_request *r;
    struct client *prev, *next;
    char tenant[LLMQ_JOB_ID_MAX + 1];
    char *buf;
    size_t off, len, cap;
    int paused, ended;
};

struct gw_dash_feed {
    struct gw *gw;
    ev_timer tick;
    struct client *clients;
    int n_clients;
    double last_viewer_s; /* when the last stream closed (ev_now) */
    int running;          /* a script run in flight */
    int closing;
    json_t *points[GW_DASH_HISTORY_POINTS];
    size_t head, n_points; /* the oldest point is points[head] */
    json_t *latest;        /* the last snapshot, NULL none yet */
    char *latest_text;     /* its text for viewers of the whole account */
    unsigned long long runs;
};

static void feed_appendf(struct client *c, const char *event, const char *data)
{
    if (c->ended)
        return;
    if (c->off == c->len)
        c->off = c->len = 0;
    size_t need = strlen(event) + strlen(data) + 32;
    if (c->len - c->off + need > GW_DASH_CLIENT_BACKLOG_BYTES) {
        c->ended = 1; /* it does not read: closed rather than buffered without end */
        return;
    }
    if (c->len + need > c->cap) {
        size_t cap = c->cap ? c->cap : 8192;
        while (cap < c->len + need)
            cap *= 2;
        char *b = realloc(c->buf, cap);
        if (b == NULL) {
            c->ended = 1;
            return;
        }
        c->buf = b;
        c->cap = cap;
    }
    /* data is compact JSON: one line, so one "data:" field; no event: data
     * is a field line of its own ("retry: 2000\n") */
    int n = event[0]
                ? snprintf(c->buf + c->len, c->cap - c->len, "event: %s\ndata: %s\n\n", event, data)
                : snprintf(c->buf + c->len, c->cap - c->len, "%s", data);
    if (n > 0)
        c->len += (size_t)n;
}

static void wake(struct client *c)
{
    if (c->paused) {
        c->paused = 0;
        gw_request_wake(c->r);
    }
}

static ssize_t read_events(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct client *c = cls;
    if (c->off < c->len) {
        size_t n = c->len - c->off < max ? c->len - c->off : max;
        memcpy(out, c->buf + c->off, n);
        c->off += n;
        return (ssize_t)n;
    }
    if (c->ended || c->r->gone)
        return MHD_CONTENT_READER_END_OF_STREAM;
    c->paused = 1;
    gw_request_pause(c->r);
    return 0;
}

static void unlink_client(struct client *c)
{
    struct gw_dash_feed *f = c->feed;
    if (f == NULL)
        return;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        f->clients = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->feed = NULL;
    f->n_clients--;
    f->last_viewer_s = ev_now(f->gw->loop);
}

static void client_free(void *p)
{
    struct client *c = p;
    if (c == NULL)
        return;
    unlink_client(c);
    free(c->buf);
    free(c);
}

static void on_client_gone(struct gw_request *r)
{
    unlink_client(r->state);
}

/* Sends snap (the whole account's, as text all_text) to c: its tenant's
 * part when it has one. */
static void send_snapshot(struct client *c, const json_t *snap, const char *all_text)
{
    if (c->tenant[0] == '\0') {
        feed_appendf(c, "snap", all_text);
        return;
    }
    json_t *mine = gw_dash_snapshot_for_tenant(snap, c->tenant);
    char *text = mine ? json_dumps(mine, JSON_COMPACT) : NULL;
    json_decref(mine);
    if (text != NULL)
        feed_appendf(c, "snap", text);
    free(text);
}

static void send_history(struct gw_dash_feed *f, struct client *c)
{
    json_t *list = json_array();
    for (size_t i = 0; i < f->n_points; i++) {
        json_t *p = f->points[(f->head + i) % GW_DASH_HISTORY_POINTS];
        json_array_append_new(list, c->tenant[0] ? gw_dash_point_for_tenant(p, c->tenant)
                                                 : json_incref(p));
    }
    json_t *h = json_pack("{s:o, s:s}", "points", list, "tenant", c->tenant);
    char *text = h ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    if (text != NULL)
        feed_appendf(c, "history", text);
    free(text);
}

static void push_point(struct gw_dash_feed *f, json_t *point)
{
    if (point == NULL)
        return;
    if (f->n_points == GW_DASH_HISTORY_POINTS) {
        json_decref(f->points[f->head]);
        f->points[f->head] = point;
        f->head = (f->head + 1) % GW_DASH_HISTORY_POINTS;
    } else {
        f->points[(f->head + f->n_points) % GW_DASH_HISTORY_POINTS] = point;
        f->n_points++;
    }
}

static void broadcast_redis_down(struct gw_dash_feed *f, const char *why)
{
    json_t *e = json_pack("{s:b, s:s}", "ok", 0, "error", why);
    char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    for (struct client *c = f->clients; c != NULL && text != NULL; c = c->next) {
        feed_appendf(c, "redis", text);
        wake(c);
    }
    free(text);
}

static void on_snapshot(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct gw_dash_feed *f = privdata;
    f->running = 0;
    if (f->closing)
        return;
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        broadcast_redis_down(f, r ? r->str : "no connection to Redis");
        return;
    }
    json_t *snap = gw_dash_snapshot_from_reply(r);
    char *text = snap ? json_dumps(snap, JSON_COMPACT) : NULL;
    if (text == NULL) {
        json_decref(snap);
        broadcast_redis_down(f, "top_snapshot: a reply of another shape");
        return;
    }
    f->runs++;
    push_point(f, gw_dash_snapshot_point(snap));
    json_decref(f->latest);
    free(f->latest_text);
    f->latest = snap;
    f->latest_text = text;
    for (struct client *c = f->clients; c != NULL; c = c->next) {
        send_snapshot(c, snap, text);
        wake(c);
    }
}

static void on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct gw_dash_feed *f = t->data;
    if (f->n_clients == 0 && ev_now(loop) - f->last_viewer_s > LINGER_S) {
        ev_timer_stop(loop, t); /* nobody looks: started again by the next stream */
        return;
    }
    if (f->running)
        return;
    redisAsyncContext *ac = gw_redis(f->gw);
    if (ac == NULL) {
        broadcast_redis_down(f, "no connection to Redis");
        return;
    }
    const char *argv[] = {f->gw->prefix};
    if (llmq_script_run_async(ac, LLMQ_SCRIPT_TOP_SNAPSHOT, 1, 1, argv, NULL, on_snapshot, f) ==
        LLMQ_OK)
        f->running = 1;
    else
        broadcast_redis_down(f, "the snapshot could not be sent to Redis");
}

struct gw_dash_feed *gw_dash_feed_new(struct gw *gw)
{
    struct gw_dash_feed *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->gw = gw;
    ev_timer_init(&f->tick, on_tick, TICK_S, TICK_S);
    f->tick.data = f;
    return f;
}

void gw_dash_feed_attach(struct gw_dash_feed *f, struct gw_request *r,
                         const struct gw_dash_viewer *v)
{
    struct client *c = calloc(1, sizeof(*c));
    if (c == NULL || f->closing) {
        free(c);
        gw_respond_errorf(r, 503, "server_error", NULL, NULL, "the gateway is stopping");
        return;
    }
    c->r = r;
    snprintf(c->tenant, sizeof(c->tenant), "%s", v->tenant);
    if (r->state_free != NULL)
        r->state_free(r->state);
    r->state = c;
    r->state_free = client_free;
    c->feed = f;
    c->next = f->clients;
    if (f->clients != NULL)
        f->clients->prev = c;
    f->clients = c;
    f->n_clients++;
    /* the browser reconnects after 2 s when the stream breaks (a restart) */
    feed_appendf(c, "", "retry: 2000\n\n");
    send_history(f, c);
    if (f->latest != NULL)
        send_snapshot(c, f->latest, f->latest_text);
    if (!ev_is_active(&f->tick)) {
        ev_timer_start(f->gw->loop, &f->tick);
        on_tick(f->gw->loop, &f->tick, 0); /* the first snapshot now, not in a second */
    }
    r->content_type = "text/event-stream; charset=utf-8";
    r->stream_read = read_events;
    r->stream_cls = c;
    gw_respond(r, 200, NULL, 0);
    r->on_gone = on_client_gone;
}

void gw_dash_feed_shutdown(struct gw_dash_feed *f)
{
    if (f == NULL)
        return;
    f->closing = 1;
    ev_timer_stop(f->gw->loop, &f->tick);
    while (f->clients != NULL) {
        struct client *c = f->clients;
        c->ended = 1;
        unlink_client(c);
        wake(c);
    }
}

void gw_dash_feed_free(struct gw_dash_feed *f)
{
    if (f == NULL)
        return;
    gw_dash_feed_shutdown(f);
    for (size_t i = 0; i < f->n_points; i++)
        json_decref(f->points[(f->head + i) % GW_DASH_HISTORY_POINTS]);
    json_decref(f->latest);
    free(f->latest_text);
    free(f);
}

void gw_dash_feed_counts(const struct gw_dash_feed *f, unsigned long long *runs, int *streams)
{
    *runs = f ? f->runs : 0;
    *streams = f ? f->n_clients : 0;
}
