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
 * HINCRBY, so any number of workers may add at once.
 *
 * Writing: a worker sums its samples in memory (llmq_calib_sum_add, the one
 * place of the arithmetic) and adds the sums of one model with ONE call of
 * the calib_add script (lua/calib_add.lua), whose arguments
 * llmq_calib_add_argv() fills; worker/calib_batch.c decides when. Reading:
 * llmq_calib_read() (sync, for `llmq status`). */
#ifndef LLMQ_CALIBRATION_H
#define LLMQ_CALIBRATION_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "redis/keys.h"
#include "llmq/error.h"

#define LLMQ_CALIB_FIELDS 6 /* est act abs under rel rel2, after n */
/* KEYS[1] and ARGV of lua/calib_add.lua: prefix, model, the 7 sums. */
#define LLMQ_CALIB_ADD_ARGC (2 + LLMQ_CALIB_FIELDS + 1)

/* The values samples add to each field: one sample's (llmq_calib_increments,
 * n = 1) or the sum of several (llmq_calib_sum_add). */
struct llmq_calib_increments {
    long long n, est, act, abs, under, rel_bp, rel2_bp;
};

/* Computes the increments of one sample (estimated, actual >= 0 tokens). */
void llmq_calib_increments(long long estimated_tokens, long long actual_tokens,
                           struct llmq_calib_increments *out);

/* Adds one sample (llmq_calib_increments) to *sum (zero it to start).
 * Returns LLMQ_OK, or LLMQ_EINVAL (sum untouched) for a negative count. */
enum llmq_rc llmq_calib_sum_add(struct llmq_calib_increments *sum, long long estimated_tokens,
                                long long actual_tokens);

/* The arguments of one calib_add call: pass LLMQ_SCRIPT_CALIB_ADD, nkeys 1,
 * LLMQ_CALIB_ADD_ARGC and argv to llmq_script_run, llmq_script_append or
 * llmq_script_run_async (they copy the arguments when they format the
 * command, so the struct may live on the stack). Reply: the model's sample
 * count after the add, or an error reply. */
struct llmq_calib_add_argv {
    const char *argv[LLMQ_CALIB_ADD_ARGC];
    char prefix[LLMQ_KEY_PREFIX_MAX];
    char model[201];
    char num[LLMQ_CALIB_FIELDS + 1][24];
};

/* Fills *out to add sum (borrowed; sum->n > 0 samples) to (account, model)
 * (both borrowed, valid names). Returns LLMQ_OK, or LLMQ_EINVAL for an
 * invalid name or an empty sum. */
enum llmq_rc llmq_calib_add_argv(struct llmq_calib_add_argv *out, const char *account,
                                 const char *model, const struct llmq_calib_increments *sum,
                                 struct llmq_error *err);

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
