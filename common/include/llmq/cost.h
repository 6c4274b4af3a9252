/* The cost of a request: tokens charged against TPM at admission.
 *
 * cost = estimated prompt tokens + reserved completion tokens
 *        (max_completion_tokens / max_tokens × n, or a default) + a margin.
 * The limiter reserves this cost and the worker settles it to the real
 * `usage` after the response. */
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
    LLMQ_CHARGE_CHARS,     /* OpenAI's admission rule: characters / 4 */
};

struct llmq_cost_options {
    enum llmq_charge_model charge_model;
    int margin_pct;                       /* default 10 */
    long long default_completion_tokens;  /* when the body sets no max; default 1024 */
};

struct llmq_cost {
    long long prompt_tokens;
    long long completion_tokens; /* reserved for the reply */
    long long margin_tokens;
    long long total_tokens;      /* what the limiter is charged */
};

/* Fills *opt with the defaults above. */
void llmq_cost_options_default(struct llmq_cost_options *opt);

/* Estimates the cost of one request. url_path is the Batch `url`
 * ("/v1/chat/completions", ...; borrowed), body the request body (borrowed).
 * opt may be NULL for defaults. Returns LLMQ_OK, or LLMQ_EINVAL naming what in
 * the body could not be read. */
enum llmq_rc llmq_cost_estimate(const char *url_path, const json_t *body,
                                const struct llmq_cost_options *opt, struct llmq_cost *out,
                                struct llmq_error *err);

#ifdef __cplusplus
}
#endif
#endif
