/* The gateway's shared state (see gateway.h): its identity and settings,
 * and the command connection every module sends through. */
#include "gateway.h"

#include <string.h>

#include "ids.h"
#include "jobs/job.h"
#include "redis/redis.h"

enum llmq_rc gw_init(struct gw *gw, const struct gw_config *cfg, struct ev_loop *loop,
                     struct llmq_error *err)
{
    memset(gw, 0, sizeof(*gw));
    gw->cfg = cfg;
    gw->loop = loop;
    gw->job_body_max = LLMQ_JOB_MAX_BODY_BYTES_DEFAULT;
    enum llmq_rc rc = llmq_redis_url_parse(cfg->redis_url, &gw->url, err);
    if (rc == LLMQ_OK)
        rc = llmq_account_prefix(cfg->account, gw->prefix, sizeof(gw->prefix), err);
    if (rc != LLMQ_OK)
        return rc;
    llmq_redis_url_route(&gw->url, cfg->account); /* a cluster: the account's node */
    gw_new_id("gw-", gw->id, sizeof(gw->id));
    return LLMQ_OK;
}

void gw_clear(struct gw *gw)
{
    explicit_bzero(&gw->url, sizeof(gw->url));
}

redisAsyncContext *gw_redis(struct gw *gw)
{
    return llmq_redis_async_context(gw->redis);
}
