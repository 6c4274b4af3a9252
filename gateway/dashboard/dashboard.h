/* The operator's dashboard served by llmq-gateway at /dashboard
 * (docs/dashboard.md): one page (assets.h), a session per dashboard key
 * (session.h), a live feed over Server-Sent Events (feed.h) and the reads
 * and actions of actions.h. Every answer under /dashboard carries a strict
 * Content-Security-Policy (scripts and styles from the gateway only, no
 * inline script), refuses framing (X-Frame-Options DENY, frame-ancestors
 * 'none') and is not cached.
 *
 * Routes (below /dashboard):
 *   GET  /, /app.js, /app.css      the page
 *   POST api/login                 a dashboard key -> a session (session.h)
 *   GET  api/me                    the session's role, tenant, CSRF token
 *   POST api/logout
 *   GET  api/events                the live feed (feed.h)
 *   GET  api/dead, api/job         reads (actions.h)
 *   POST api/dead/retry, api/dead/purge, api/endpoint  actions: an admin's
 *        session and its CSRF token (X-CSRF-Token), else 403
 * Runs on the gateway's loop. */
#ifndef LLMQ_GW_DASHBOARD_H
#define LLMQ_GW_DASHBOARD_H

#include <stdio.h>

struct gw;
struct gw_dash;
struct gw_request;

/* The dashboard of gw (borrowed), or NULL without memory. */
struct gw_dash *gw_dash_new(struct gw *gw);

/* Ends the live streams (before the HTTP servers stop). */
void gw_dash_shutdown(struct gw_dash *d);

/* Frees d (NULL: no-op), after gw's Redis connections are freed. */
void gw_dash_free(struct gw_dash *d);

/* Appends the dashboard's series to a /metrics text (f borrowed; d NULL:
 * zeros): llmq_gateway_dashboard_snapshots_total (runs of the snapshot
 * script) and llmq_gateway_dashboard_streams (event streams open). */
void gw_dash_metrics(const struct gw_dash *d, FILE *f);

/* The router's handler of every path under /dashboard. */
void gw_dash_handle(struct gw_request *r);

#endif
