/* Offload inside llmq-worker: the steps of the provider batches made of jobs
 * that may wait (docs/DESIGN.md §3.10; the policy is `llmq offload`, the
 * scripts lua/pbatch_*.lua).
 *
 * Per account, one batch at a time per worker, on the worker's loop: ask
 * lua/pbatch_next.lua for a step to take (a batch whose poll is due or whose
 * worker's lease ran out, else a new batch of staged jobs), then take it:
 * build the input file from the jobs' bodies, upload it (Files API), create
 * the batch (Batches API, metadata llmq_batch_id), poll it, download its
 * output and error files and settle every line into its job. Each provider
 * call is recorded in Redis before and after (lua/pbatch_step.lua), so a
 * worker that dies mid-step is taken over when its lease ends, and the
 * taker first asks the provider whether the call was made (a file named
 * "<id>.jsonl", a batch whose metadata names the id): nothing is submitted
 * twice and no job is lost.
 *
 * A batch belongs to one endpoint (pbatch_target.h): the implicit one, run
 * only by a worker that holds the account's key with an OpenAI-style base
 * URL (not with --azure-api-version), or a named one (`llmq endpoints`:
 * OpenAI, Azure OpenAI global batch, a compatible server), run only by a
 * worker that holds its key (--endpoint-key): pbatch_next hands a worker
 * only the batches of endpoints it names. Keys are sent as for live calls
 * and never stored. */
#ifndef LLMQ_WORKER_PBATCH_H
#define LLMQ_WORKER_PBATCH_H

struct worker_account;

/* Starts offload for account a (borrowed; its command connection is up or
 * coming): a timer asks for work from then on. A worker that can reach no
 * endpoint's Batch API (neither the account's key with an OpenAI-style
 * --base-url nor an --endpoint-key) does nothing. */
void llmq_worker_pbatch_start(struct worker_account *a);

/* Stops asking for new steps (drain): a step in flight ends where it is, its
 * lease then runs out and another worker takes the batch over. */
void llmq_worker_pbatch_stop(struct worker_account *a);

/* Frees a's offload state; call after the account's connections are closed
 * (their callbacks have run). NULL state is a no-op. */
void llmq_worker_pbatch_free(struct worker_account *a);

#endif
