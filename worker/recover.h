/* Recovery and shutdown (recover.c; docs/DESIGN.md §3.6): keeps this
 * worker's deliveries alive, reclaims silent workers' jobs, drains on
 * SIGTERM/SIGINT and --exit-when-idle-ms. Loop thread only. */
#ifndef LLMQ_WORKER_RECOVER_H
#define LLMQ_WORKER_RECOVER_H

struct llmq_worker;

/* Starts the signal handlers and the recover and idle timers, and
 * subscribes the drain's end to freed slots (job_slot.h). */
void llmq_worker_recover_start(struct llmq_worker *w);

/* Stops asking for work; calls in flight get the grace period. */
void llmq_worker_begin_drain(struct llmq_worker *w);

/* Something the drain waits for ended (a slot, a calibration write): stops
 * the loop when draining and nothing is left. */
void llmq_worker_check_done(struct llmq_worker *w);

#endif
