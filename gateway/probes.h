/* The routes without a key (probes.c): GET /healthz, /readyz and /metrics,
 * served on the API port and on --metrics-listen. Each answers at once. */
#ifndef LLMQ_GW_PROBES_H
#define LLMQ_GW_PROBES_H

struct gw_request;

void gw_probe_healthz(struct gw_request *r); /* 200 "ok" while the process runs */
void gw_probe_readyz(struct gw_request *r);  /* 200 while both Redis connections are up */
void gw_probe_metrics(struct gw_request *r); /* the Prometheus text (metrics.h) */

#endif
