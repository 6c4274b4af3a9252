/* /healthz, /readyz, /metrics (see probes.h). */
#include "probes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "metrics.h"
#include "stream.h"

static void answer_plain(struct gw_request *r, unsigned int status, const char *text)
{
    r->content_type = "text/plain; charset=utf-8";
    char *body = strdup(text);
    gw_respond(r, status, body, body ? strlen(body) : 0);
}

void gw_probe_healthz(struct gw_request *r)
{
    answer_plain(r, 200, "ok\n");
}

void gw_probe_readyz(struct gw_request *r)
{
    struct gw *gw = r->gw;
    const char *why = "";
    char text[320];
    if (!llmq_redis_async_ready(gw->redis) || !llmq_redis_async_ready(gw->events)) {
        const struct llmq_redis_async *down =
            llmq_redis_async_ready(gw->redis) ? gw->events : gw->redis;
        why = llmq_redis_async_last_error(down);
        snprintf(text, sizeof(text), "redis not connected%s%s\n", why[0] ? ": " : "", why);
    } else if (!gw_streams_ready(gw->streams, &why)) {
        /* streamed calls need it: without it they would get 503s */
        snprintf(text, sizeof(text), "stream relay not subscribed to redis%s%s\n",
                 why[0] ? ": " : "", why);
    } else {
        answer_plain(r, 200, "ready\n");
        return;
    }
    answer_plain(r, 503, text);
}

void gw_probe_metrics(struct gw_request *r)
{
    size_t len = 0;
    char *text = gw_metrics_text(r->gw, &len);
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
    gw_respond(r, text ? 200 : 500, text, len);
}
