/* Ending deliveries with the job_settle script (job_settle.c; docs/DESIGN.md
 * §3.4): the settles of one loop turn go together; one whose reply is lost
 * waits for Redis on its account's list (resent, or spooled at exit).
 * Loop thread only. */
#ifndef LLMQ_WORKER_JOB_SETTLE_H
#define LLMQ_WORKER_JOB_SETTLE_H

struct worker_account;
struct worker_job;

/* Sends job's settle (job->settle decided; takes job) with the others of
 * this loop turn: kept for a resend while Redis is away, released
 * (job_slot.h) once answered. */
void llmq_worker_settle(struct worker_job *job);

/* Resends settles that failed while Redis was away. */
void llmq_worker_settle_flush(struct worker_account *a);

/* How many of a's settles wait for Redis (0: none). */
int llmq_worker_settle_waiting(const struct worker_account *a);

/* The first of them (borrowed; the next is job->next), or NULL: for the
 * spool, which writes them at exit. */
const struct worker_job *llmq_worker_settle_waiting_first(const struct worker_account *a);

/* job (takes it), loaded from a spool file with its slot taken
 * (job_slot.h), waits with them for Redis. */
void llmq_worker_settle_keep(struct worker_job *job);

/* Frees a's settles still waiting (at exit, once the spool wrote them). */
void llmq_worker_settle_free(struct worker_account *a);

/* Sets up a's settle queue (before its first settle). */
void llmq_worker_settle_start(struct worker_account *a);

/* Stops a's settle timer; settles queued but not sent are kept with those
 * waiting for Redis (for the spool). */
void llmq_worker_settle_stop(struct worker_account *a);

#endif
