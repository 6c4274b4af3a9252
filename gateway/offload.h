/* Work the gateway must not do on its loop: a task runs on a background
 * thread and its completion runs on the loop afterwards.
 *
 * Why: checking an uploaded Batch file line by line (files.c) or a batch's
 * input (batches.c) takes time in proportion to its size, up to seconds for
 * --max-file-bytes; on the loop, every other request would wait that long.
 *
 * Threads: gw_offload_new, _submit and _free are called on the loop's thread.
 * A task's work callback runs on the offload thread, one task at a time in
 * submission order; it may touch only what its task owns, never the loop, a
 * request's connection or Redis. Its done callback runs later on the loop's
 * thread (woken through an ev_async), exactly once.
 *
 * Ownership: a submitted task is borrowed until its done callback runs, which
 * may free it. gw_offload_free stops the thread after the task it is running
 * and, before it returns, runs the done callback of every task still due with
 * task->stopping set: its work may or may not have run, and the done
 * callback should only answer and clean up (the loop is ending). */
#ifndef LLMQ_GW_OFFLOAD_H
#define LLMQ_GW_OFFLOAD_H

#include "llmq/error.h"

struct ev_loop;
struct gw_offload;

struct gw_offload_task {
    void (*work)(struct gw_offload_task *t); /* offload thread */
    void (*done)(struct gw_offload_task *t); /* loop thread, after work or at stop */
    int stopping;                            /* 1: done runs from gw_offload_free */
    struct gw_offload_task *next;            /* the offload's queues */
};

/* Starts the offload thread for loop (borrowed). NULL with err on failure. */
struct gw_offload *gw_offload_new(struct ev_loop *loop, struct llmq_error *err);

/* Queues t (borrowed until its done callback); t->work and t->done set. */
void gw_offload_submit(struct gw_offload *o, struct gw_offload_task *t);

/* Tasks submitted and not yet done (for /metrics). */
int gw_offload_pending(const struct gw_offload *o);

/* Stops and joins the thread, runs every done callback still due (see
 * above) and frees. NULL is a no-op. */
void gw_offload_free(struct gw_offload *o);

#endif
