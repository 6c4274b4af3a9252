/* /metrics of llmq-gateway (metrics.c): the Prometheus text of gw->stats. */
#ifndef LLMQ_GW_METRICS_H
#define LLMQ_GW_METRICS_H

#include <stddef.h>

struct gw;

/* The Prometheus text format 0.0.4: a new string (free with free) of *len
 * bytes, or NULL when out of memory. */
char *gw_metrics_text(struct gw *gw, size_t *len);

#endif
