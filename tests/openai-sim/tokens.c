/* Token rules of openai-sim: deterministic, documented, and cheap.
 *
 * Prompt tokens (--prompt-count tiktoken, the default) are counted as OpenAI
 * counts them, with the model's encoding (o200k_base or cl100k_base, chosen
 * by llmq/tokens.h's model table; the tokenizer is llmq's, which
 * tests/unit/test_tokenizer.c and bench_tokenizer.mjs check against tiktoken
 * itself). The framing is OpenAI's cookbook rule, implemented here on its own
 * (not llmq's cost.c, so the server does not share the client's mistakes):
 *   chat:       3 per message + the tokens of every string value in it (role,
 *               content or its text parts, name, tool_call_id, tool call
 *               names and arguments) + 1 per `name` + 3 priming the reply;
 *               an image part counts 85 (the low-detail price: the sim does
 *               not decode images); `tools` / `functions` count the tokens of
 *               their compact JSON text.
 *   responses:  `instructions` and a string `input` are a message each, input
 *               items are messages; + 3 priming; tools as in chat.
 *   embeddings: the tokens of each input string; a token array its length.
 *   completions: the same for `prompt`, without framing.
 * With --prompt-count bytes: ceil(B / 4), where B is the total byte length of
 * every JSON string value (not object keys) found anywhere under the request
 * fields "messages", "input", "prompt", "instructions" and "tools"; an integer
 * under "input" or "prompt" (a pre-tokenized prompt) counts 4 bytes, one token.
 * Example: {"messages":[{"role":"user","content":"hello"}]} has "user" and
 * "hello", B = 9, so 3 prompt tokens.
 *
 * Completion tokens, per choice: a value in [lo, hi] chosen by a hash of the
 * request body, the choice index and --seed, where [lo, hi] is
 * --completion-tokens (default 16..64) capped at the request's max tokens
 * (max_completion_tokens, max_tokens or max_output_tokens). The same body
 * under the same seed always receives the same completion. */
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "llmq/tokens.h"

static int64_t value_bytes(const json_t *v, int count_ints)
{
    int64_t n = 0;
    size_t i;
    const char *k;
    json_t *x;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return (int64_t)json_string_length(v);
    case JSON_INTEGER:
        return count_ints ? 4 : 0;
    case JSON_ARRAY:
        json_array_foreach(v, i, x) n += value_bytes(x, count_ints);
        return n;
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, k, x) n += value_bytes(x, count_ints);
        return n;
    default:
        return 0;
    }
}

static int64_t bytes_rule(const json_t *root)
{
    static const char *fields[] = {"messages", "input", "prompt", "instructions", "tools"};
    int64_t bytes = 0;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const json_t *v = json_object_get(root, fields[i]);
        if (v != NULL)
            bytes += value_bytes(v, i == 1 || i == 2);
    }
    return (bytes + 3) / 4;
}

/* A tiktoken count in progress: the first error sticks. */
struct tcount {
    enum llmq_encoding enc;
    int64_t tokens;
    int failed;
};

static void count_text(struct tcount *t, const char *s, size_t len)
{
    size_t n = 0;
    if (t->failed)
        return;
    if (llmq_tokens_count(t->enc, s, len, &n, NULL) != LLMQ_OK)
        t->failed = 1;
    t->tokens += (int64_t)n;
}

static int is_image_part(const json_t *v)
{
    const char *type = json_string_value(json_object_get(v, "type"));
    return type != NULL && (strcmp(type, "image_url") == 0 || strcmp(type, "input_image") == 0);
}

/* Every string value under v (object keys not counted); image parts 85;
 * names (a "name" key of a message or part) 1 more. */
static void count_strings(struct tcount *t, const json_t *v)
{
    size_t i;
    const char *k;
    json_t *x;
    switch (json_typeof(v)) {
    case JSON_STRING:
        count_text(t, json_string_value(v), json_string_length(v));
        break;
    case JSON_ARRAY:
        json_array_foreach(v, i, x) count_strings(t, x);
        break;
    case JSON_OBJECT:
        if (is_image_part(v)) {
            t->tokens += 85;
            break;
        }
        json_object_foreach((json_t *)v, k, x) count_strings(t, x);
        break;
    default:
        break;
    }
}

static void count_message(struct tcount *t, const json_t *msg)
{
    t->tokens += 3;
    if (json_is_object(msg) && json_object_get(msg, "name") != NULL)
        t->tokens += 1;
    count_strings(t, msg);
}

static void count_tools(struct tcount *t, const json_t *tools)
{
    if (tools == NULL || json_is_null(tools))
        return;
    char *text = json_dumps(tools, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text == NULL) {
        t->failed = 1;
        return;
    }
    count_text(t, text, strlen(text));
    free(text);
}

/* Embedding inputs: strings by their tokens, token arrays by their length. */
static void count_inputs(struct tcount *t, const json_t *in)
{
    size_t i;
    json_t *x;
    if (json_is_string(in)) {
        count_text(t, json_string_value(in), json_string_length(in));
    } else if (json_is_integer(in)) {
        t->tokens += 1;
    } else if (json_is_array(in)) {
        json_array_foreach(in, i, x) count_inputs(t, x);
    }
}

static void tiktoken_rule(struct tcount *t, enum sim_endpoint ep, const json_t *root)
{
    size_t i;
    json_t *x;
    if (ep == SIM_EP_EMBEDDINGS) {
        count_inputs(t, json_object_get(root, "input"));
        return;
    }
    if (ep == SIM_EP_COMPLETIONS) {
        count_inputs(t, json_object_get(root, "prompt")); /* no framing */
        return;
    }
    if (ep == SIM_EP_CHAT) {
        json_array_foreach(json_object_get(root, "messages"), i, x) count_message(t, x);
        count_tools(t, json_object_get(root, "functions"));
    } else {
        const json_t *instr = json_object_get(root, "instructions");
        const json_t *in = json_object_get(root, "input");
        if (json_is_string(instr))
            count_message(t, instr);
        if (json_is_string(in))
            count_message(t, in);
        else
            json_array_foreach(in, i, x) count_message(t, x);
    }
    count_tools(t, json_object_get(root, "tools"));
    t->tokens += 3;
}

int sim_prompt_tokens(const struct sim_config *cfg, enum sim_endpoint ep, const char *model,
                      const json_t *root, int64_t *out)
{
    if (cfg->prompt_count == SIM_COUNT_BYTES) {
        *out = bytes_rule(root);
        return 0;
    }
    struct tcount t = {llmq_tokens_encoding_for_model(model), 0, 0};
    tiktoken_rule(&t, ep, root);
    *out = t.tokens;
    return t.failed ? -1 : 0;
}

uint64_t sim_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

void sim_completion_tokens(const struct sim_config *cfg, struct sim_call *call)
{
    int64_t hi = cfg->completion_max, lo = cfg->completion_min;
    if (call->max_tokens > 0 && call->max_tokens < hi)
        hi = call->max_tokens;
    if (lo > hi)
        lo = hi;
    call->completion_total = 0;
    for (int i = 0; i < call->n; i++) {
        uint64_t st = call->hash ^ (cfg->seed * 0x2545f4914f6cdd1dULL) ^ (uint64_t)i;
        int64_t c = lo + (int64_t)(llmq_rng_next(&st) % (uint64_t)(hi - lo + 1));
        call->completion[i] = (int)c;
        call->completion_total += c;
    }
}

void sim_key_digest(const char *key, size_t n, char out[9], unsigned char sha[32])
{
    static const char hex[] = "0123456789abcdef";
    if (n == 0) {
        memset(sha, 0, 32);
        out[0] = '-';
        out[1] = '\0';
        return;
    }
    SHA256((const unsigned char *)key, n, sha);
    for (int i = 0; i < 4; i++) {
        out[2 * i] = hex[sha[i] >> 4];
        out[2 * i + 1] = hex[sha[i] & 15];
    }
    out[8] = '\0';
}
