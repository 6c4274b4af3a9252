/* The gateway's lease in Redis (lua/gw_lease.lua, keys.h P gw:lease:<id>).
 *
 * Each gateway process has an id ("gw-<24 hex>", new at every start) and
 * keeps P gw:lease:<id> alive for --lease-ms, renewing it every third of that
 * with one script call, whatever number of calls wait on it. What it holds
 * lives as long as the lease: its waiting sync calls (their jobs carry the
 * lease; dispatch cancels, unsent, a job whose lease is gone, so a killed
 * gateway's callers cost nothing) and the batches it is creating. The same
 * call hands it batches left half-created by gateways whose lease is gone:
 * each is told to on_orphan (the gateway passes batches.h
 * gw_batches_recover, which finishes or rolls them back). Runs on the
 * gateway's loop; renews at once whenever the command connection is ready. */
#ifndef LLMQ_GW_LEASE_H
#define LLMQ_GW_LEASE_H

#include "gateway.h"

struct gw_lease;

/* A batch this gateway now holds: id, and its status when handed over. */
typedef void gw_lease_orphan_fn(struct gw *gw, const char *id, const char *status);

/* Starts renewing gw's lease (gw->id set); on_orphan is told every batch
 * handed over. NULL when out of memory. */
struct gw_lease *gw_lease_new(struct gw *gw, gw_lease_orphan_fn *on_orphan);
/* Stops renewing; the lease is left to lapse (a stopping gateway cancels its
 * calls itself). NULL is a no-op. */
void gw_lease_free(struct gw_lease *l);

/* The command connection became ready: renew now. */
void gw_lease_renew(struct gw_lease *l);

#endif
