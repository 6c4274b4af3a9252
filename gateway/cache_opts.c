/* The response cache headers of a call, over its key's defaults
 * (cache_opts.h). */
#include "cache_opts.h"

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/parse_int.h"
#include "jobs/job.h"

int gw_cache_opts(struct gw_request *r, struct llmq_job_options *o)
{
    /* the key's defaults (llmq keys create --cache), which the headers override */
    if (r->key.cache[0] != '\0')
        o->cache = r->key.cache;
    if (r->key.cache_ttl_s > 0)
        o->cache_ttl_s = r->key.cache_ttl_s;
    if (r->conn == NULL)
        return 0;
    const char *mode = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "x-llmq-cache");
    const char *ttl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "x-llmq-cache-ttl");
    const char *trunc =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "x-llmq-cache-store-truncated");
    if (trunc != NULL) {
        if (strcmp(trunc, "true") != 0 && strcmp(trunc, "false") != 0) {
            gw_respond_errorf(r, 400, "invalid_request_error", NULL, "invalid_cache_header",
                              "x-llmq-cache-store-truncated must be true or false");
            return -1;
        }
        o->cache_store_truncated = strcmp(trunc, "true") == 0;
    }
    if (mode != NULL) {
        enum llmq_job_cache m;
        if (llmq_job_cache_parse(mode, &m, NULL) != LLMQ_OK) {
            gw_respond_errorf(r, 400, "invalid_request_error", NULL, "invalid_cache_header",
                              "x-llmq-cache must be use, refresh or off");
            return -1;
        }
        o->cache = m == LLMQ_JOB_CACHE_USE       ? "use"
                   : m == LLMQ_JOB_CACHE_REFRESH ? "refresh"
                                                 : "off";
    }
    if (ttl != NULL) {
        int64_t s = 0;
        if (llmq_parse_int64(ttl, 1, LLMQ_JOB_CACHE_TTL_S_MAX, &s) != 0) {
            gw_respond_errorf(r, 400, "invalid_request_error", NULL, "invalid_cache_header",
                              "x-llmq-cache-ttl must be whole seconds in 1..%lld",
                              LLMQ_JOB_CACHE_TTL_S_MAX);
            return -1;
        }
        o->cache_ttl_s = s;
    }
    return 0;
}

void gw_cache_key_default(const struct gw_key *key, struct llmq_job *j)
{
    enum llmq_job_cache m;
    if (j->cache != LLMQ_JOB_CACHE_DEFAULT || key->cache[0] == '\0' ||
        llmq_job_cache_parse(key->cache, &m, NULL) != LLMQ_OK)
        return;
    j->cache = m;
    if (m != LLMQ_JOB_CACHE_OFF && j->cache_ttl_s <= 0)
        j->cache_ttl_s = key->cache_ttl_s > 0 ? key->cache_ttl_s : LLMQ_JOB_CACHE_TTL_S_DEFAULT;
}
