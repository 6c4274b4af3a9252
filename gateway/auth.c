/* Gateway keys at request time: the presented key's SHA-256 (computed when
 * the request arrived; the key text itself is never kept, logged or sent to
 * Redis) names P gw:key:<sha256>; its fields say tenant, user, priority and
 * models (common/redis/keys.h). A missing, malformed, unknown or revoked key is a
 * 401 in OpenAI's shape. Every request looks its key up again, so a revoke
 * applies to the next request. */
#include <hiredis/async.h>
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "jobs/job.h"
#include "base/log.h"
#include "redis/redis.h"

/* A field of the key's hash, "" when absent. */
static const char *field(const redisReply *h, const char *name)
{
    const char *v = llmq_redis_field(h, name);
    return v != NULL ? v : "";
}

static void route(struct gw_request *r)
{
    switch (r->m.route) {
    case GW_ROUTE_CALL:
        gw_calls_handle(r);
        break;
    case GW_ROUTE_FILE_CREATE:
    case GW_ROUTE_FILE_LIST:
    case GW_ROUTE_FILE_GET:
    case GW_ROUTE_FILE_CONTENT:
    case GW_ROUTE_FILE_DELETE:
        gw_files_handle(r);
        break;
    default:
        gw_batches_handle(r);
        break;
    }
}

static void on_key(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *k = reply;
    if (k == NULL || k->type != REDIS_REPLY_ARRAY) {
        gw_respond_no_redis(r);
    } else if (k->elements == 0) {
        gw_respond_errorf(r, 401, "invalid_request_error", NULL, "invalid_api_key",
                          "Incorrect API key provided. Keys are made with `llmq keys create`; "
                          "a revoked key no longer works.");
    } else {
        struct gw_key *key = &r->key;
        snprintf(key->hash, sizeof(key->hash), "%s", r->auth_hash);
        snprintf(key->tenant, sizeof(key->tenant), "%s", field(k, "tenant"));
        snprintf(key->user, sizeof(key->user), "%s", field(k, "user"));
        snprintf(key->models, sizeof(key->models), "%s", field(k, "models"));
        snprintf(key->endpoints, sizeof(key->endpoints), "%s", field(k, "endpoints"));
        if (llmq_priority_parse(field(k, "priority"), &key->priority) != 0)
            key->priority = LLMQ_PRIORITY_HIGH;
        if ((key->tenant[0] && !llmq_name_valid(key->tenant)) ||
            (key->user[0] && !llmq_name_valid(key->user))) {
            LLMQ_LOG(LLMQ_LOG_WARN, "gateway key %.16s has an invalid tenant or user", key->hash);
            gw_respond_errorf(r, 401, "invalid_request_error", NULL, "invalid_api_key",
                              "This API key is misconfigured; ask for a new one.");
        } else if (!r->gone) {
            route(r);
        }
    }
    gw_request_release(r);
}

void gw_auth_then_handle(struct gw_request *r)
{
    if (r->auth_hash[0] == '\0') {
        gw_respond_errorf(
            r, 401, "invalid_request_error", NULL, r->auth_malformed ? "invalid_api_key" : NULL,
            r->auth_malformed ? "The Authorization header must be 'Bearer YOUR_KEY'."
                              : "You didn't provide an API key. You need to provide your API key "
                                "in an Authorization header using Bearer auth (i.e. "
                                "Authorization: Bearer YOUR_KEY).");
        return;
    }
    gw_request_command(r, on_key, "HGETALL %sgw:key:%s", r->gw->prefix, r->auth_hash);
}
