/* Request cost estimation.
 *
 * Until the exact tokenizer lands, prompt tokens are estimated from characters:
 * ceil(chars / 4) over the text the request sends (OpenAI's own rule of thumb
 * and its admission charge), counted over every string value of the prompt
 * fields. Both charge models use it for now. */
#include "llmq/cost.h"

#include <string.h>

void llmq_cost_options_default(struct llmq_cost_options *opt)
{
    opt->charge_model = LLMQ_CHARGE_EXACT;
    opt->margin_pct = 10;
    opt->default_completion_tokens = 1024;
}

/* Sum of the byte lengths of every string inside v. */
static long long text_bytes(const json_t *v)
{
    long long n = 0;
    size_t i;
    const char *k;
    json_t *x;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return (long long)json_string_length(v);
    case JSON_ARRAY:
        json_array_foreach(v, i, x) n += text_bytes(x);
        return n;
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, k, x) n += text_bytes(x);
        return n;
    default:
        return 0;
    }
}

static long long completion_reservation(const char *url_path, const json_t *body,
                                        const struct llmq_cost_options *opt)
{
    if (strstr(url_path, "embeddings") != NULL)
        return 0;
    long long max = opt->default_completion_tokens;
    const char *fields[] = {"max_completion_tokens", "max_output_tokens", "max_tokens"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        json_t *m = json_object_get(body, fields[i]);
        if (json_is_integer(m) && json_integer_value(m) >= 0) {
            max = json_integer_value(m);
            break;
        }
    }
    json_t *n = json_object_get(body, "n");
    long long choices = json_is_integer(n) && json_integer_value(n) > 0 ? json_integer_value(n) : 1;
    return max * choices;
}

enum llmq_rc llmq_cost_estimate(const char *url_path, const json_t *body,
                                const struct llmq_cost_options *opt, struct llmq_cost *out,
                                struct llmq_error *err)
{
    struct llmq_cost_options defaults;
    if (opt == NULL) {
        llmq_cost_options_default(&defaults);
        opt = &defaults;
    }
    if (url_path == NULL || !json_is_object(body))
        return llmq_error_set(err, LLMQ_EINVAL, "cost: request body must be a JSON object");
    const char *prompt_fields[] = {"messages", "input", "prompt", "tools", "functions",
                                   "instructions"};
    long long bytes = 0;
    for (size_t i = 0; i < sizeof(prompt_fields) / sizeof(prompt_fields[0]); i++) {
        json_t *f = json_object_get(body, prompt_fields[i]);
        if (f != NULL)
            bytes += text_bytes(f);
    }
    out->prompt_tokens = (bytes + 3) / 4;
    out->completion_tokens = completion_reservation(url_path, body, opt);
    long long base = out->prompt_tokens + out->completion_tokens;
    out->margin_tokens = (base * opt->margin_pct + 99) / 100;
    out->total_tokens = base + out->margin_tokens;
    return LLMQ_OK;
}
