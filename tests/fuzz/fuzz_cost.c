/* Fuzzes the cost of a request (common/include/llmq/cost.h
 * llmq_cost_estimate): the first byte picks the endpoint and the charge
 * model, the rest is the JSON body. No input may yield a cost below the true
 * one: when the estimate succeeds, its total is at least the completion
 * reservation the API charges (the largest max-tokens field, else the default,
 * times the choices), computed here in 128-bit arithmetic from the raw JSON,
 * and at least the prompt tokens; under the exact charge model it is the sum of
 * its parts with nothing wrapped. A body whose counts are out of bounds must
 * be refused, not priced.
 *
 * Inputs are bounded (8 KiB): the tokenizer has its own target. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "llmq/cost.h"

#define MAX_INPUT 8192

static const char *const urls[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses",
                                   "/v1/embeddings", "/v1/other"};

/* The reply tokens the API may bill body for, from the raw JSON. */
static __int128 true_completion(const char *url, const json_t *body, long long def)
{
    if (strstr(url, "embeddings") != NULL)
        return 0;
    static const char *const max_fields[] = {"max_completion_tokens", "max_output_tokens",
                                             "max_tokens"};
    __int128 max = -1, choices = 1;
    for (size_t i = 0; i < 3; i++) {
        json_t *m = json_object_get(body, max_fields[i]);
        if (json_is_integer(m) && json_integer_value(m) > max)
            max = json_integer_value(m);
    }
    if (max < 0)
        max = def;
    json_t *n = json_object_get(body, "n"), *b = json_object_get(body, "best_of");
    if (json_is_integer(n) && json_integer_value(n) > choices)
        choices = json_integer_value(n);
    if (json_is_integer(b) && json_integer_value(b) > choices)
        choices = json_integer_value(b);
    return max * choices;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    uint8_t sel = fuzz_take_byte(&data, &size);
    const char *url = urls[(sel & 0x7f) % (sizeof(urls) / sizeof(urls[0]))];
    struct llmq_cost_options opt;
    llmq_cost_options_default(&opt);
    opt.charge_model = (sel & 0x80) ? LLMQ_CHARGE_CHARS : LLMQ_CHARGE_EXACT;
    json_t *body = json_loadb((const char *)data, size, 0, NULL);
    if (body == NULL)
        return 0;
    struct llmq_cost c;
    const char *param = NULL;
    enum llmq_rc checked = llmq_cost_check_params(body, &param, NULL);
    if (checked != LLMQ_OK && param == NULL)
        __builtin_trap(); /* a refusal names its field */
    enum llmq_rc rc = llmq_cost_estimate(url, body, &opt, &c, NULL);
    if (rc == LLMQ_OK) {
        __int128 completion = true_completion(url, body, opt.default_completion_tokens);
        if (checked != LLMQ_OK || c.completion_tokens != completion ||
            c.total_tokens < completion || c.total_tokens < c.prompt_tokens ||
            c.prompt_tokens < 0 || c.margin_tokens < 0)
            __builtin_trap();
        if (opt.charge_model == LLMQ_CHARGE_EXACT &&
            (__int128)c.prompt_tokens + c.completion_tokens + c.margin_tokens !=
                (__int128)c.total_tokens)
            __builtin_trap();
    }
    json_decref(body);
    return 0;
}
