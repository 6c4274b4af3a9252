/* Calibration samples of the prompt-token estimate (jobs/calibration.h),
 * summed in the worker and written as ONE calib_add script call
 * (lua/calib_add.lua) per (account, model):
 *   - when CALIB_WRITE_EVERY_MS have passed since that model's last write
 *     (its timer; a model written longer ago than that, or never, writes on
 *     the next loop turn, so a lone sample shows in `llmq status` at once);
 *   - at once when CALIB_WRITE_SAMPLES samples are pending;
 *   - when the worker drains, however it stops (SIGTERM, --exit-when-idle-ms,
 *     the end of a batch run): recover.c's llmq_worker_check_done ends the
 *     loop only once llmq_worker_calib_flush reports nothing pending or in
 *     flight, so nothing counted is lost on a clean exit.
 * What a crash (SIGKILL, OOM) loses: each model's samples since its last
 * write, at most the last CALIB_WRITE_EVERY_MS of them (and fewer than
 * CALIB_WRITE_SAMPLES). While Redis is away the sums stay pending and the
 * write is tried again every CALIB_WRITE_EVERY_MS; a write whose reply is
 * lost with the connection is logged (it may or may not have been applied),
 * and what is pending when the worker exits with Redis away is logged as
 * not written. Before, each sample was one EVAL of its own: a round trip,
 * a SHA-1 of the script text and 7 HINCRBY per job.
 * One loop thread; the entries are model_state.h's. */
#ifndef LLMQ_WORKER_CALIB_BATCH_H
#define LLMQ_WORKER_CALIB_BATCH_H

#include <stdint.h>

#define CALIB_WRITE_EVERY_MS 1000
#define CALIB_WRITE_SAMPLES 256

struct worker_account;
struct worker_model;

/* ms from now_ms until a model last written at written_ms (-1: never)
 * should write its pending samples; 0: now. Pure. */
int64_t llmq_worker_calib_delay_ms(int64_t written_ms, int64_t now_ms);

/* Records one sample of account a's model (borrowed): estimated_tokens is
 * what enqueue's llmq_cost_prompt_tokens returned, actual_tokens the
 * response's usage.prompt_tokens (both >= 0; a negative one is ignored).
 * Sends the write or arms its timer as above. */
void llmq_worker_calib_add(struct worker_account *a, const char *model, int64_t estimated_tokens,
                           int64_t actual_tokens);

/* Sends m's pending samples now (its timer's action). Redis away: keeps
 * them and tries again in CALIB_WRITE_EVERY_MS. */
void llmq_worker_calib_write(struct worker_model *m);

/* The exit flush: sends every pending sum of a now. Returns how many of a's
 * writes are still unanswered (0: nothing left to wait for; with Redis away
 * the pending sums cannot be sent and do not count). A reply runs
 * llmq_worker_check_done while the worker drains. */
int llmq_worker_calib_flush(struct worker_account *a);

#endif
