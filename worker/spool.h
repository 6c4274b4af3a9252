/* The spool: settles Redis could not take, kept across a restart.
 *
 * A settle whose Redis call fails (connection down, reply lost) stays in
 * memory with its account's settles waiting for Redis (job_settle.h) and is
 * resent when Redis is back. When the worker stops while Redis is still away, those settles
 * are written by llmq_worker_spool_write to one file per account and
 * process, <spool_dir>/spool-{<account>}-<consumer>.jsonl (mode 0600, written
 * to a temporary name, fsynced, renamed): one JSON object per line holding
 * the job_settle arguments (mode, prio, stream entry, job id, reservation
 * handle, tokens, output line, reason, delays, header values) — never an API
 * key. The next worker serving the account (any consumer name) claims every
 * such file at start (llmq_worker_spool_load: rename to
 * <file>.replay-<consumer>, atomic, so two workers never both take one),
 * queues its settles to be sent once Redis answers, and deletes the claimed
 * file when all of them are answered (their slots freed, job_slot.h), or when it spools them again
 * at its own exit. Replaying is safe however often it happens: job_settle stores one result per job
 * id and settles a reservation once.
 *
 * All of this is blocking file I/O, done only before the loop runs (load) and
 * after it ended (write). */
#ifndef LLMQ_WORKER_SPOOL_H
#define LLMQ_WORKER_SPOOL_H

struct worker_account;
struct worker_job;

/* Claims and loads the spool files of a's account from the configured
 * directory into a's settles waiting for Redis (each counts as a job in hand until
 * answered). Returns the number of settles loaded; problems are logged. */
int llmq_worker_spool_load(struct worker_account *a);

/* Writes a's settles waiting for Redis to a's spool file (the list is left as it is) and
 * deletes the files claimed at start. Returns the number of settles written,
 * or -1 when they could not be written (logged: they are lost). */
int llmq_worker_spool_write(struct worker_account *a);

/* Frees the spool state of a (claimed file names). NULL-safe. */
void llmq_worker_spool_free(struct worker_account *a);

#endif
