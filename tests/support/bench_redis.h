/* What the C benchmarks that drive the Lua scripts straight (bench_sched,
 * bench_spend) share: Redis's own CPU clock, pipelined replies, the jobs a
 * dispatch granted, and settling them done. A benchmark has nothing to
 * recover: every helper prints what failed (named by the program) and exits 1.
 * Single-threaded; c is borrowed. */
#ifndef LLMQ_BENCH_REDIS_H
#define LLMQ_BENCH_REDIS_H

#include <hiredis/hiredis.h>

#include "llmq/error.h"

/* Prints "<program>: what: <c's error or "bad reply">" and exits 1. */
void llmq_bench_die(const char *what, redisContext *c);

/* Redis CPU seconds so far (INFO cpu: used_cpu_user + used_cpu_sys). */
double llmq_bench_redis_cpu_s(redisContext *c);

/* Reads n pipelined replies; an error reply (named what) exits. */
void llmq_bench_drain(redisContext *c, int n, const char *what);

/* lua/enqueue.lua's values per job. */
#define LLMQ_BENCH_ENQUEUE_FIELDS 12

/* Writes the enqueue values of job id (a normal-priority chat job of
 * "bench-model", cost 100, of tenant; both borrowed) into out. */
void llmq_bench_enqueue_fields(const char *id, const char *tenant,
                               const char *out[LLMQ_BENCH_ENQUEUE_FIELDS]);

/* One job a dispatch granted: what settling it needs. */
struct llmq_bench_grant {
    char eid[64], id[64], handle[256];
};

/* Appends the jobs granted in dispatch reply r (lua/dispatch.lua: [5..])
 * to g[*got..max), counting them in *got. */
void llmq_bench_grants_read(const redisReply *r, struct llmq_bench_grant *g, int *got, int max);

/* Appends one job_settle call ending g[0..n) done (80 tokens; usage as for
 * llmq_bench_settle_done), as a worker settles the deliveries of a loop
 * turn in one call; read its reply with llmq_bench_drain. */
enum llmq_rc llmq_bench_settle_append(redisContext *c, const char *P,
                                      const struct llmq_bench_grant *g, int n, const char *model,
                                      const char *const usage[3]);

/* Settles g[0..n) done (80 tokens; usage in/cached/out tokens as text, "-1"
 * none) of model, one delivery a call, depth calls in flight; returns the
 * Redis CPU seconds it took. */
double llmq_bench_settle_done(redisContext *c, const char *P, const struct llmq_bench_grant *g,
                              int n, const char *model, const char *const usage[3], int depth);

#endif
