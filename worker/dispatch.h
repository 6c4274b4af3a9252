/* Dispatch: one account's asking for jobs (dispatch.c; docs/DESIGN.md §3.2).
 * It owns the account's two Redis connections (commands and the blocking
 * wake-up read), asks the dispatch script for up to the free slots' worth of
 * jobs, hands each granted job to call.h, and decides when to ask again.
 * Everything runs on the worker's loop thread. */
#ifndef LLMQ_WORKER_DISPATCH_H
#define LLMQ_WORKER_DISPATCH_H

struct worker_account;

/* Connects account a (its cfg, prefix and worker set) and starts asking for
 * jobs once Redis answers; subscribes a to freed slots (job_slot.h). */
void llmq_worker_account_start(struct worker_account *a);

/* Stops a's timers and frees its connections (their callbacks run now). */
void llmq_worker_account_stop(struct worker_account *a);

/* Asks for jobs on the next loop turn (coalesced: once per turn). */
void llmq_worker_dispatch_soon(struct worker_account *a);

/* Stops a's timers of the next dispatch (the drain: no new work). */
void llmq_worker_dispatch_halt(struct worker_account *a);

/* 1 while a expects work: a delayed job is due, a dispatch is in flight, or
 * the limiter's wait is armed (for --exit-when-idle-ms); else 0. */
int llmq_worker_dispatch_waiting(const struct worker_account *a);

#endif
