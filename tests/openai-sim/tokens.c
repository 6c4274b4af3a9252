/* Token rules of openai-sim: deterministic, documented, and cheap.
 *
 * Prompt tokens: ceil(B / 4), where B is the total byte length of every JSON
 * string value (not object keys) found anywhere under the request fields
 * "messages", "input", "prompt", "instructions" and "tools"; an integer under
 * "input" or "prompt" (a pre-tokenized prompt) counts 4 bytes, one token.
 * Example: {"messages":[{"role":"user","content":"hello"}]} has "user" and
 * "hello", B = 9, so 3 prompt tokens.
 *
 * Completion tokens, per choice: a value in [lo, hi] chosen by a hash of the
 * request body, the choice index and --seed, where [lo, hi] is
 * --completion-tokens (default 16..64) capped at the request's max tokens
 * (max_completion_tokens, max_tokens or max_output_tokens). The same body
 * under the same seed always receives the same completion. */
#include <openssl/sha.h>
#include <string.h>

#include "api.h"

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

int64_t sim_prompt_tokens(const json_t *root)
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

uint64_t sim_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
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
        int64_t c = lo + (int64_t)(sim_rand(&st) % (uint64_t)(hi - lo + 1));
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
