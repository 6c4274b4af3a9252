/* The dashboard's live feed: one run of lua/top_snapshot.lua per second for
 * the gateway's account, whatever the number of viewers, shared by all of
 * them over Server-Sent Events; and the last 15 minutes of points for the
 * charts, kept in this process's memory (a ring; a restarted gateway starts
 * it again).
 *
 * The feed runs while someone looks: from the first event stream until 15
 * minutes after the last one closed (so a page reopened finds its charts);
 * a gateway nobody looks at sends Redis nothing for it.
 *
 * Events: "history" once at the start ({points: [...]}, snapshot.h), then
 * "snap" each second (the snapshot, or for a tenant's viewer its part), and
 * "redis" ({ok: false, error}) while a run fails (Redis down), the page
 * saying so until the next "snap". A client that does not read (its backlog
 * over GW_DASH_CLIENT_BACKLOG_BYTES) is closed.
 *
 * Runs on the gateway's loop. */
#ifndef LLMQ_GW_DASH_FEED_H
#define LLMQ_GW_DASH_FEED_H

#include "dashboard/session.h"

#define GW_DASH_HISTORY_POINTS 900 /* 15 minutes at one a second */
#define GW_DASH_CLIENT_BACKLOG_BYTES (4u << 20)

struct gw;
struct gw_request;
struct gw_dash_feed;

/* A new feed for gw (borrowed; idle until a stream opens), or NULL. */
struct gw_dash_feed *gw_dash_feed_new(struct gw *gw);

/* Ends every stream (their requests complete). */
void gw_dash_feed_shutdown(struct gw_dash_feed *f);

/* Frees f (NULL: no-op); after gw's Redis connection is freed. */
void gw_dash_feed_free(struct gw_dash_feed *f);

/* Answers r with the event stream for viewer v (copied). */
void gw_dash_feed_attach(struct gw_dash_feed *f, struct gw_request *r,
                         const struct gw_dash_viewer *v);

/* Counters for the bench and /metrics: script runs so far, streams open. */
void gw_dash_feed_counts(const struct gw_dash_feed *f, unsigned long long *runs, int *streams);

#endif
