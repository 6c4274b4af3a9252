/* Calibration of the prompt-token estimate: per (account, model), how far the
 * estimate (llmq_cost_prompt_tokens) was from OpenAI's usage.prompt_tokens.
 *
 * Key (one per account, in the account's slot):
 *   P calib   HASH  for each model M, integer fields
 *             M|n      samples
 *             M|est    sum of estimated prompt tokens
 *             M|act    sum of actual prompt tokens (usage.prompt_tokens)
 *             M|abs    sum of |actual - estimated|
 *             M|under  samples where estimated < actual
 *             M|rel    sum of (actual - estimated) / actual, in basis points
 *             M|rel2   sum of the squares of the same (basis points squared)
 * (Model names never contain '|', see llmq_name_valid.) Writers only
 * HINCRBY, so any number of workers may record at once; a Lua script (such
 * as the settle script) may HINCRBY the same fields itself with the values
 * llmq_calib_increments() computes.
 *
 * Writing: llmq_calib_record_cmd() fills the argv of ONE command (EVAL of a
 * three-line script doing the HINCRBYs) that a worker appends to its own
 * async or pipelined command stream. Reading: llmq_calib_read() (sync, for
 * `llmq status`). */
#ifndef LLMQ_CALIBRATION_H
#define LLMQ_CALIBRATION_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "redis/keys.h"
#include "llmq/error.h"

#define LLMQ_CALIB_FIELDS 6 /* n est act abs under rel rel2: n is always 1 */
#define LLMQ_CALIB_ARGC (5 + 2 * (LLMQ_CALIB_FIELDS + 1))

/* The values one sample adds to each field. */
struct llmq_calib_increments {
    long long n, est, act, abs, under, rel_bp, rel2_bp;
};

/* Computes the increments of one sample (estimated, actual >= 0 tokens). */
void llmq_calib_increments(long long estimated_tokens, long long actual_tokens,
                           struct llmq_calib_increments *out);

/* One ready-to-send command: pass argc, argv, argvlen to redisCommandArgv,
 * redisAppendCommandArgv or redisAsyncCommandArgv (hiredis copies them when
 * it formats the command, so the struct may live on the stack). Reply: an
 * integer, or an error reply. */
struct llmq_calib_cmd {
    int argc;
    const char *argv[LLMQ_CALIB_ARGC];
    size_t argvlen[LLMQ_CALIB_ARGC];
    char key[LLMQ_KEY_FIXED_MAX];
    char model[201];
    char num[LLMQ_CALIB_FIELDS + 1][24];
};

/* Fills *cmd to record one sample for (account, model) (both borrowed, valid
 * names). estimated_tokens is what llmq_cost_prompt_tokens() returned for the
 * request, actual_tokens the response's usage.prompt_tokens. Returns LLMQ_OK,
 * or LLMQ_EINVAL for an invalid name or a negative count. */
enum llmq_rc llmq_calib_record_cmd(struct llmq_calib_cmd *cmd, const char *account,
                                   const char *model, long long estimated_tokens,
                                   long long actual_tokens, struct llmq_error *err);

/* Error statistics of one model. Percentages are of actual tokens; positive
 * means the estimate was low (the reservation too small). */
struct llmq_calib_stats {
    char model[201];
    long long samples;
    long long est_tokens;       /* sum */
    long long actual_tokens;    /* sum */
    long long abs_error_tokens; /* sum of |actual - estimated| */
    long long under_samples;    /* estimated < actual */
    double bias_pct;            /* (sum actual - sum estimated) / sum actual */
    double mean_abs_pct;        /* sum |error| / sum actual */
    double mean_rel_pct;        /* mean of per-sample (actual - est) / actual */
    double stddev_rel_pct;      /* standard deviation of the same */
};

/* Reads every model's statistics for account (borrowed) over the sync
 * connection c (borrowed). Returns LLMQ_OK with a new array in *out (free()
 * it; NULL when *n is 0) sorted by model, LLMQ_EINVAL for a bad account
 * name, LLMQ_EREDIS, or LLMQ_ENOMEM. */
enum llmq_rc llmq_calib_read(redisContext *c, const char *account, struct llmq_calib_stats **out,
                             size_t *n, struct llmq_error *err);

/* Deletes account's calibration data (after a tokenizer change, say). */
enum llmq_rc llmq_calib_reset(redisContext *c, const char *account, struct llmq_error *err);

/* The margin (percent) that covers the observed under-estimates: the mean
 * relative error plus two standard deviations, rounded up, at least
 * floor_pct and at most 100; floor_pct while s has fewer than min_samples
 * samples (or s is NULL). For a cost model whose margin follows calibration. */
int llmq_calib_margin_pct(const struct llmq_calib_stats *s, int floor_pct, long long min_samples);

#endif
