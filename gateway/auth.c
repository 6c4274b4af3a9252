/* Gateway keys at request time (see auth.h). */
#include "auth.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "request_step.h"
#include "jobs/job.h"
#include "base/log.h"
#include "redis/keys.h"
#include "redis/redis.h"

/* A field of the key's hash, "" when absent. */
static const char *field(const redisReply *h, const char *name)
{
    const char *v = llmq_redis_field(h, name);
    return v != NULL ? v : "";
}

/* The key's cache default from its field cache ("<mode> <ttl_s>", written
 * by llmq keys create --cache): none when absent or not of that form. */
static void key_cache(struct gw_key *key, const char *v)
{
    char mode[8] = "";
    long long ttl = 0;
    enum llmq_job_cache m;
    key->cache[0] = '\0';
    key->cache_ttl_s = 0;
    if (sscanf(v, "%7s %lld", mode, &ttl) == 2 && llmq_job_cache_parse(mode, &m, NULL) == LLMQ_OK &&
        ttl >= 0 && ttl <= LLMQ_JOB_CACHE_TTL_S_MAX) {
        snprintf(key->cache, sizeof(key->cache), "%s", mode);
        key->cache_ttl_s = ttl;
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
    } else if (field(k, "role")[0] != '\0') {
        /* a dashboard key (llmq keys create --role): it logs into /dashboard
         * and runs nothing, so a key pasted into a browser cannot spend */
        gw_respond_errorf(r, 403, "invalid_request_error", NULL, "dashboard_key",
                          "This is a dashboard key (role %s): it opens /dashboard and cannot "
                          "call the API. Use a key made without --role.",
                          strcmp(field(k, "role"), "admin") == 0 ? "admin" : "viewer");
    } else {
        struct gw_key *key = &r->key;
        snprintf(key->hash, sizeof(key->hash), "%s", r->auth_hash);
        snprintf(key->tenant, sizeof(key->tenant), "%s", field(k, "tenant"));
        snprintf(key->user, sizeof(key->user), "%s", field(k, "user"));
        snprintf(key->models, sizeof(key->models), "%s", field(k, "models"));
        snprintf(key->endpoints, sizeof(key->endpoints), "%s", field(k, "endpoints"));
        if (llmq_priority_parse(field(k, "priority"), &key->priority) != 0)
            key->priority = LLMQ_PRIORITY_HIGH;
        key_cache(key, field(k, "cache"));
        if ((key->tenant[0] && !llmq_name_valid(key->tenant)) ||
            (key->user[0] && !llmq_name_valid(key->user))) {
            LLMQ_LOG(LLMQ_LOG_WARN, "gateway key %.16s has an invalid tenant or user", key->hash);
            gw_respond_errorf(r, 401, "invalid_request_error", NULL, "invalid_api_key",
                              "This API key is misconfigured; ask for a new one.");
        } else if (!r->gone) {
            void (*then)(struct gw_request *) = r->key_then;
            r->key_then = NULL;
            then(r);
        }
    }
}

void gw_auth_check(struct gw_request *r, void (*then)(struct gw_request *r))
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
    char key[LLMQ_KEY_FIXED_MAX + sizeof(r->auth_hash)];
    if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_GW_KEY, r->auth_hash, NULL) != LLMQ_OK) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "key name too long");
        return;
    }
    r->key_then = then;
    gw_request_command(r, on_key, "HGETALL %s", key);
}
