/* A call's response cache options from its headers (docs/cache.md):
 *   x-llmq-cache: use | refresh | off
 *   x-llmq-cache-ttl: N   (seconds a stored answer lives, 1..30 days)
 *   x-llmq-cache-store-truncated: true | false  (a cut-off answer may be
 *                         stored and served)
 * and, where a header is absent, its gateway key's defaults (struct gw_key
 * cache, cache_ttl_s: llmq keys create --cache, --cache-ttl-s).
 * Read on the loop thread while the request's connection is MHD's. */
#ifndef GW_CACHE_OPTS_H
#define GW_CACHE_OPTS_H

#include "http.h"
#include "jobs/job.h"
#include "key_policy.h"
#include "llmq/llmq.h"

/* Sets o->cache and o->cache_ttl_s from r's headers and key (o->cache
 * points at a static string or into r->key: it lives as long as r). Returns 0, or -1 after
 * answering r with a 400 naming the header that is wrong. */
int gw_cache_opts(struct gw_request *r, struct llmq_job_options *o);

/* A Batch line's job j that asks nothing of the cache (LLMQ_JOB_CACHE_DEFAULT)
 * takes the mode and TTL of key, the key creating its batch, when it has
 * a default (its "off": no cache); else it stays default (the account's
 * default decides in Redis). A line's own mode is left alone. */
void gw_cache_key_default(const struct gw_key *key, struct llmq_job *j);

#endif
