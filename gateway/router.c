/* The route table (see router.h). */
#include "router.h"

#include "auth.h"
#include "batches.h"
#include "calls.h"
#include "dashboard/dashboard.h"
#include "files.h"
#include "http.h"
#include "models.h"
#include "probes.h"

static void not_found(struct gw_request *r)
{
    gw_respond_errorf(r, 404, "invalid_request_error", NULL, "unknown_url",
                      "Unknown request URL: %s %s. Please check the URL for typos.", r->method,
                      r->path);
}

static void method_not_allowed(struct gw_request *r)
{
    gw_respond_errorf(r, 405, "invalid_request_error", NULL, "method_not_allowed",
                      "Method %s is not allowed for this URL.", r->method);
}

/* Indexed by route; every route of decode.h has its row. */
static const struct gw_route_entry routes[] = {
    [GW_ROUTE_NOT_FOUND] = {GW_ROUTE_NOT_FOUND, not_found},
    [GW_ROUTE_METHOD_NOT_ALLOWED] = {GW_ROUTE_METHOD_NOT_ALLOWED, method_not_allowed},
    [GW_ROUTE_HEALTHZ] = {GW_ROUTE_HEALTHZ, gw_probe_healthz},
    [GW_ROUTE_READYZ] = {GW_ROUTE_READYZ, gw_probe_readyz},
    [GW_ROUTE_METRICS] = {GW_ROUTE_METRICS, gw_probe_metrics},
    [GW_ROUTE_CALL] = {GW_ROUTE_CALL, gw_calls_handle},
    [GW_ROUTE_FILE_CREATE] = {GW_ROUTE_FILE_CREATE, gw_files_create},
    [GW_ROUTE_FILE_LIST] = {GW_ROUTE_FILE_LIST, gw_files_list},
    [GW_ROUTE_FILE_GET] = {GW_ROUTE_FILE_GET, gw_files_get},
    [GW_ROUTE_FILE_CONTENT] = {GW_ROUTE_FILE_CONTENT, gw_files_content},
    [GW_ROUTE_FILE_DELETE] = {GW_ROUTE_FILE_DELETE, gw_files_delete},
    [GW_ROUTE_BATCH_CREATE] = {GW_ROUTE_BATCH_CREATE, gw_batches_create},
    [GW_ROUTE_BATCH_LIST] = {GW_ROUTE_BATCH_LIST, gw_batches_list},
    [GW_ROUTE_BATCH_GET] = {GW_ROUTE_BATCH_GET, gw_batches_get},
    [GW_ROUTE_BATCH_CANCEL] = {GW_ROUTE_BATCH_CANCEL, gw_batches_cancel},
    [GW_ROUTE_MODEL_LIST] = {GW_ROUTE_MODEL_LIST, gw_models_list},
    [GW_ROUTE_MODEL_GET] = {GW_ROUTE_MODEL_GET, gw_models_get},
    [GW_ROUTE_DASHBOARD] = {GW_ROUTE_DASHBOARD, gw_dash_handle},
};

const struct gw_route_entry *gw_router_entry(enum gw_route route)
{
    if ((int)route < 0 || (size_t)route >= sizeof(routes) / sizeof(routes[0]) ||
        routes[route].handle == NULL)
        return &routes[GW_ROUTE_NOT_FOUND];
    return &routes[route];
}

void gw_router_admit(struct gw_request *r)
{
    if (gw_route_needs_key(r->m.route))
        gw_auth_check(r, gw_request_admit);
    else
        gw_request_admit(r);
}

void gw_router_handle(struct gw_request *r)
{
    gw_router_entry(r->m.route)->handle(r);
}
