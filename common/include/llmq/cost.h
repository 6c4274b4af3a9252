/* The cost of a request: tokens charged against TPM at admission.
 *
 * cost = prompt tokens + reserved completion tokens
 *        (max_completion_tokens / max_output_tokens / max_tokens × n, or a
 *        default) + a margin on what is estimated rather than counted.
 * The limiter reserves this cost and the worker settles it to the real
 * `usage` after the response.
 *
 * Two charge models (chosen per account):
 *  - LLMQ_CHARGE_EXACT counts prompt tokens as OpenAI bills them: the exact
 *    tiktoken encoding of the model (llmq/tokens.h), the chat format's
 *    per-message overhead (3 tokens a message, 1 more for a `name`, 3 to prime
 *    the reply, as OpenAI's cookbook counts them), images by OpenAI's tile and
 *    patch rules, and tool/function schemas by the cookbook's method (an
 *    approximation: exact on the cookbook's examples, see DESIGN notes in
 *    cost.c). total = prompt + completion + margin, the margin a share of
 *    the estimated part only (tool and response schemas, images whose size
 *    is not known): tokenized text and the completion reservation are what
 *    the API counts at admission, exactly.
 *  - LLMQ_CHARGE_CHARS follows OpenAI's own admission rule: it charges a
 *    request the maximum of its max_tokens and an estimate from its character
 *    count (characters / 4), and settles to real usage later. Here
 *    prompt_tokens = ceil(characters of the prompt text / 4), images still by
 *    the tile rule, and total = max(prompt + margin, completion), the
 *    margin on the characters' guess. Use it to
 *    mirror what OpenAI's own limiter will count. */
#ifndef LLMQ_COST_H
#define LLMQ_COST_H

#include <jansson.h>

#include "llmq/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How prompt tokens are counted. */
enum llmq_charge_model {
    LLMQ_CHARGE_EXACT = 0, /* tokenize the request as OpenAI counts it */
    LLMQ_CHARGE_CHARS,     /* OpenAI's admission rule: max(max_tokens, characters / 4) */
};

struct llmq_cost_options {
    enum llmq_charge_model charge_model;
    int margin_pct;                      /* default 10 */
    long long default_completion_tokens; /* when the body sets no max; default 1024 */
    /* Size assumed for an image given by a remote URL (not fetched) or whose
     * data: URL cannot be read; default 1024 × 1024 (765 tokens on gpt-4o at
     * high detail). */
    unsigned remote_image_width;
    unsigned remote_image_height;
};

struct llmq_cost {
    long long prompt_tokens;
    long long completion_tokens; /* reserved for the reply */
    long long estimated_tokens;  /* of prompt_tokens, those estimated rather than counted:
                                    the margin's base */
    long long margin_tokens;
    long long total_tokens; /* what the limiter is charged */
};

/* Bounds of the request fields that size the completion reservation, checked
 * before any cost is computed (llmq_cost_check_params). n and best_of are
 * OpenAI's own bounds (chat and completions: n 1..128; completions: best_of
 * 1..20). llmq has no table of each model's output limit, so max_tokens,
 * max_completion_tokens and max_output_tokens are bounded by 2^20 = 1,048,576,
 * above every OpenAI model's output limit and context window (the largest,
 * gpt-4.1's, is 1,047,576 tokens): the API refuses a value above its model's
 * limit anyway, and with these bounds no cost comes near overflowing. */
#define LLMQ_COST_MAX_N 128
#define LLMQ_COST_MAX_BEST_OF 20
#define LLMQ_COST_MAX_COMPLETION_TOKENS 1048576LL

/* Fills *opt with the defaults above. */
void llmq_cost_options_default(struct llmq_cost_options *opt);

/* Estimates the cost of one request. url_path is the Batch `url`
 * ("/v1/chat/completions", "/v1/responses", "/v1/embeddings",
 * "/v1/completions"; others count every string of the prompt fields;
 * borrowed), body the request body (borrowed); the model comes from
 * body["model"] (unknown or missing: o200k_base). opt may be NULL for
 * defaults. Returns LLMQ_OK; LLMQ_EINVAL naming what in the body could not be
 * read, a field out of its bounds (llmq_cost_check_params) or a count that
 * would overflow (never a cost below the true one); or a tokenizer error (LLMQ_ENOTFOUND when no
 * vocabulary file is found, LLMQ_ENOMEM). */
enum llmq_rc llmq_cost_estimate(const char *url_path, const json_t *body,
                                const struct llmq_cost_options *opt, struct llmq_cost *out,
                                struct llmq_error *err);

/* Checks the fields of body (borrowed) that feed its cost: max_tokens,
 * max_completion_tokens, max_output_tokens, n and best_of are each absent,
 * null, or an integer within the bounds above. Returns LLMQ_OK, or LLMQ_EINVAL
 * with a message in OpenAI's words and *param (may be NULL) the offending
 * field's name (static). llmq_cost_estimate calls it first. */
enum llmq_rc llmq_cost_check_params(const json_t *body, const char **param, struct llmq_error *err);

/* Prompt tokens of body as llmq_cost_estimate counts them under
 * LLMQ_CHARGE_EXACT (opt may be NULL; only its image defaults matter), into
 * *out_tokens: the number a worker records as the estimate beside the real
 * usage.prompt_tokens (see common/jobs/calibration.h). Returns as
 * llmq_cost_estimate. */
enum llmq_rc llmq_cost_prompt_tokens(const char *url_path, const json_t *body,
                                     const struct llmq_cost_options *opt, long long *out_tokens,
                                     struct llmq_error *err);

#ifdef __cplusplus
}
#endif
#endif
