/* /dashboard: its routes and the headers of every answer (see
 * dashboard.h). */
#include "dashboard/dashboard.h"

#include <stdlib.h>
#include <string.h>

#include "dashboard/actions.h"
#include "dashboard/assets.h"
#include "dashboard/feed.h"
#include "dashboard/session.h"
#include "http.h"

struct gw_dash {
    struct gw_dash_feed *feed;
};

/* The page's own files only, no inline script or style, nothing from
 * elsewhere, never in a frame. */
static const char security_headers[] =
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'\n"
    "X-Frame-Options: DENY\n"
    "X-Content-Type-Options: nosniff\n"
    "Referrer-Policy: no-referrer\n"
    "Cache-Control: no-store\n";

struct gw_dash *gw_dash_new(struct gw *gw)
{
    struct gw_dash *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    d->feed = gw_dash_feed_new(gw);
    if (d->feed == NULL) {
        free(d);
        return NULL;
    }
    return d;
}

void gw_dash_shutdown(struct gw_dash *d)
{
    if (d != NULL)
        gw_dash_feed_shutdown(d->feed);
}

void gw_dash_free(struct gw_dash *d)
{
    if (d == NULL)
        return;
    gw_dash_feed_free(d->feed);
    free(d);
}

void gw_dash_metrics(const struct gw_dash *d, FILE *f)
{
    unsigned long long runs = 0;
    int streams = 0;
    gw_dash_feed_counts(d ? d->feed : NULL, &runs, &streams);
    fprintf(f,
            "# HELP llmq_gateway_dashboard_snapshots_total Runs of the dashboard's snapshot "
            "script (one a second while a dashboard is open, whatever their number).\n"
            "# TYPE llmq_gateway_dashboard_snapshots_total counter\n"
            "llmq_gateway_dashboard_snapshots_total %llu\n"
            "# HELP llmq_gateway_dashboard_streams Dashboard event streams open.\n"
            "# TYPE llmq_gateway_dashboard_streams gauge\n"
            "llmq_gateway_dashboard_streams %d\n",
            runs, streams);
}

static void serve_asset(struct gw_request *r, const char *name)
{
    const struct gw_dash_asset *a = gw_dash_asset_find(name);
    char *copy = a ? malloc(a->len ? a->len : 1) : NULL;
    if (a == NULL || copy == NULL) {
        free(copy);
        gw_respond_errorf(r, 404, "invalid_request_error", NULL, "unknown_url",
                          "No such dashboard file: %s", r->path);
        return;
    }
    memcpy(copy, a->data, a->len);
    r->content_type = a->content_type;
    gw_respond(r, 200, copy, a->len);
}

static int is_post(const struct gw_request *r)
{
    return strcmp(r->method, "POST") == 0;
}

static void me(struct gw_request *r, const struct gw_dash_viewer *v)
{
    gw_respond_json(r, 200,
                    json_pack("{s:s, s:s, s:s}", "role", v->admin ? "admin" : "viewer", "tenant",
                              v->tenant, "csrf", v->csrf));
}

static void events(struct gw_request *r, const struct gw_dash_viewer *v)
{
    gw_dash_feed_attach(r->gw->dash->feed, r, v);
}

/* The checks of every action: an admin's session and its CSRF token. */
static int may_act(struct gw_request *r, const struct gw_dash_viewer *v)
{
    if (!gw_dash_session_csrf_ok(r, v)) {
        gw_respond_errorf(r, 403, "invalid_request_error", NULL, "csrf",
                          "Missing or wrong X-CSRF-Token: reload the page.");
        return 0;
    }
    if (!v->admin) {
        gw_respond_errorf(r, 403, "invalid_request_error", NULL, "forbidden",
                          "This is a viewer key: it can look, not act. Actions need a key made "
                          "with `llmq keys create --role admin`.");
        return 0;
    }
    return 1;
}

static void dead_retry(struct gw_request *r, const struct gw_dash_viewer *v)
{
    if (may_act(r, v))
        gw_dash_dead_act(r, v, 1);
}

static void dead_purge(struct gw_request *r, const struct gw_dash_viewer *v)
{
    if (may_act(r, v))
        gw_dash_dead_act(r, v, 0);
}

static void endpoint(struct gw_request *r, const struct gw_dash_viewer *v)
{
    if (may_act(r, v))
        gw_dash_endpoint_act(r, v);
}

static void logout(struct gw_request *r, const struct gw_dash_viewer *v)
{
    if (gw_dash_session_csrf_ok(r, v))
        gw_dash_session_logout(r, v);
    else
        gw_respond_errorf(r, 403, "invalid_request_error", NULL, "csrf",
                          "Missing or wrong X-CSRF-Token: reload the page.");
}

struct api_route {
    const char *path; /* below /dashboard/api/ */
    int post;
    void (*run)(struct gw_request *r, const struct gw_dash_viewer *v);
};

static const struct api_route api_routes[] = {
    {"me", 0, me},
    {"events", 0, events},
    {"dead", 0, gw_dash_dead_list},
    {"job", 0, gw_dash_job_get},
    {"batches", 0, gw_dash_batches},
    {"pbatches", 0, gw_dash_pbatches},
    {"budgets", 0, gw_dash_budgets},
    {"logout", 1, logout},
    {"dead/retry", 1, dead_retry},
    {"dead/purge", 1, dead_purge},
    {"endpoint", 1, endpoint},
};

void gw_dash_handle(struct gw_request *r)
{
    size_t have = r->headers ? strlen(r->headers) : 0;
    char *h = realloc(r->headers, have + sizeof(security_headers));
    if (h != NULL) {
        memcpy(h + have, security_headers, sizeof(security_headers));
        r->headers = h;
    }
    const char *sub = r->path + strlen("/dashboard");
    int get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    if (strcmp(sub, "") == 0 || strcmp(sub, "/") == 0 || strcmp(sub, "/app.js") == 0 ||
        strcmp(sub, "/app.css") == 0) {
        if (!get)
            gw_respond_errorf(r, 405, "invalid_request_error", NULL, "method_not_allowed",
                              "Method %s is not allowed for this URL.", r->method);
        else
            serve_asset(r, sub[0] == '\0' || sub[1] == '\0' ? "index.html" : sub + 1);
        return;
    }
    if (r->body_too_big) {
        gw_respond_errorf(r, 413, "invalid_request_error", NULL, "request_too_large",
                          "The request body is too large.");
        return;
    }
    if (strcmp(sub, "/api/login") == 0) {
        if (is_post(r))
            gw_dash_session_login(r);
        else
            gw_respond_errorf(r, 405, "invalid_request_error", NULL, "method_not_allowed",
                              "Log in with POST.");
        return;
    }
    for (size_t i = 0; i < sizeof(api_routes) / sizeof(api_routes[0]); i++) {
        if (strncmp(sub, "/api/", 5) != 0 || strcmp(sub + 5, api_routes[i].path) != 0)
            continue;
        if (api_routes[i].post ? !is_post(r) : !get) {
            gw_respond_errorf(r, 405, "invalid_request_error", NULL, "method_not_allowed",
                              "Method %s is not allowed for this URL.", r->method);
            return;
        }
        gw_dash_session_check(r, api_routes[i].run);
        return;
    }
    gw_respond_errorf(r, 404, "invalid_request_error", NULL, "unknown_url",
                      "Unknown dashboard URL: %s %s", r->method, r->path);
}
