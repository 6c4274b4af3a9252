/* Token usage out of OpenAI response bodies and SSE streams (see usage.h).
 *
 * Invariants: input is borrowed and read within [0, len); every jansson value
 * created here is released before returning; *out holds only counts that
 * were valid non-negative integers. An SSE stream is walked event by event
 * and only events whose data mentions "usage" are handed to the JSON parser,
 * so a long stream costs one scan, not one parse per chunk. */
#include "openai/usage.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 1000000000000000LL /* 10^15 */

static int get_count(json_t *obj, const char *key, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return 0;
    json_int_t n = json_integer_value(v);
    if (n < 0 || n > MAX_TOKENS)
        return 0;
    *out = (int64_t)n;
    return 1;
}

static void take(json_t *obj, const char *key, int64_t *dst, unsigned bit, unsigned *present)
{
    if (json_is_object(obj) && get_count(obj, key, dst))
        *present |= bit;
}

/* Reads one usage object. Returns 1 when at least one count was found. */
static int read_usage(json_t *u, struct llmq_usage *out)
{
    struct llmq_usage r;
    memset(&r, 0, sizeof(r));
    if (!json_is_object(u))
        return 0;
    take(u, "prompt_tokens", &r.input_tokens, LLMQ_USAGE_INPUT, &r.present);
    take(u, "input_tokens", &r.input_tokens, LLMQ_USAGE_INPUT, &r.present);
    take(u, "completion_tokens", &r.output_tokens, LLMQ_USAGE_OUTPUT, &r.present);
    take(u, "output_tokens", &r.output_tokens, LLMQ_USAGE_OUTPUT, &r.present);
    take(u, "total_tokens", &r.total_tokens, LLMQ_USAGE_TOTAL, &r.present);
    take(json_object_get(u, "prompt_tokens_details"), "cached_tokens", &r.cached_tokens,
         LLMQ_USAGE_CACHED, &r.present);
    take(json_object_get(u, "input_tokens_details"), "cached_tokens", &r.cached_tokens,
         LLMQ_USAGE_CACHED, &r.present);
    take(json_object_get(u, "completion_tokens_details"), "reasoning_tokens", &r.reasoning_tokens,
         LLMQ_USAGE_REASONING, &r.present);
    take(json_object_get(u, "output_tokens_details"), "reasoning_tokens", &r.reasoning_tokens,
         LLMQ_USAGE_REASONING, &r.present);
    if (!(r.present & (LLMQ_USAGE_INPUT | LLMQ_USAGE_OUTPUT | LLMQ_USAGE_TOTAL)))
        return 0;
    if (!(r.present & LLMQ_USAGE_TOTAL) && (r.present & LLMQ_USAGE_INPUT) &&
        (r.present & LLMQ_USAGE_OUTPUT)) {
        r.total_tokens = r.input_tokens + r.output_tokens;
        r.present |= LLMQ_USAGE_TOTAL | LLMQ_USAGE_TOTAL_DERIVED;
    }
    *out = r;
    return 1;
}

/* Finds usage in a parsed body: top-level "usage", "response.usage"
 * (Responses API stream events) or "response.body.usage" (Batch output). */
static int find_usage(json_t *root, struct llmq_usage *out)
{
    if (!json_is_object(root))
        return 0;
    if (read_usage(json_object_get(root, "usage"), out))
        return 1;
    json_t *resp = json_object_get(root, "response");
    if (!json_is_object(resp))
        return 0;
    if (read_usage(json_object_get(resp, "usage"), out))
        return 1;
    return read_usage(json_object_get(json_object_get(resp, "body"), "usage"), out);
}

enum llmq_rc llmq_usage_parse_json(const char *body, size_t len, struct llmq_usage *out)
{
    memset(out, 0, sizeof(*out));
    if (body == NULL)
        return LLMQ_EINVAL;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (root == NULL)
        return LLMQ_EINVAL;
    int found = find_usage(root, out);
    json_decref(root);
    return found ? LLMQ_OK : LLMQ_ENOTFOUND;
}

/* Appends the value of a "data:" line d[0..n) to the event buffer. */
static int event_append(char **buf, size_t *used, size_t *cap, const char *d, size_t n)
{
    size_t need = *used + n + 2;
    if (need > *cap) {
        size_t nc = *cap ? *cap : 256;
        while (nc < need)
            nc *= 2;
        char *nb = realloc(*buf, nc);
        if (nb == NULL)
            return -1;
        *buf = nb;
        *cap = nc;
    }
    if (*used > 0)
        (*buf)[(*used)++] = '\n'; /* SSE joins data lines with LF */
    memcpy(*buf + *used, d, n);
    *used += n;
    (*buf)[*used] = '\0';
    return 0;
}

/* Parses one complete event's data; updates *out when it carries usage. */
static void event_finish(const char *data, size_t n, struct llmq_usage *out, int *found)
{
    if (n == 0 || memmem(data, n, "\"usage\"", 7) == NULL)
        return;
    json_error_t jerr;
    json_t *root = json_loadb(data, n, 0, &jerr);
    if (root == NULL)
        return;
    struct llmq_usage u;
    if (find_usage(root, &u)) {
        *out = u;
        *found = 1;
    }
    json_decref(root);
}

enum llmq_rc llmq_usage_parse_sse(const char *text, size_t len, struct llmq_usage *out)
{
    memset(out, 0, sizeof(*out));
    if (text == NULL)
        return LLMQ_ENOTFOUND;
    char *buf = NULL;
    size_t used = 0, cap = 0, pos = 0;
    int found = 0;
    while (pos <= len) {
        const char *nl = pos < len ? memchr(text + pos, '\n', len - pos) : NULL;
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t l = end - pos;
        const char *line = text + pos;
        if (l > 0 && line[l - 1] == '\r')
            l--;
        if (l == 0) { /* blank line (or end of text): dispatch the event */
            event_finish(buf, used, out, &found);
            used = 0;
        } else if (l >= 5 && memcmp(line, "data:", 5) == 0) {
            size_t skip = (l > 5 && line[5] == ' ') ? 6 : 5;
            if (event_append(&buf, &used, &cap, line + skip, l - skip) != 0)
                break;
        }
        pos = end + 1;
    }
    event_finish(buf, used, out, &found); /* a stream cut after its last data line */
    free(buf);
    return found ? LLMQ_OK : LLMQ_ENOTFOUND;
}

enum llmq_rc llmq_usage_parse(const char *body, size_t len, struct llmq_usage *out)
{
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    if (i < len && body[i] != '{' && body[i] != '[')
        return llmq_usage_parse_sse(body + i, len - i, out);
    return llmq_usage_parse_json(body, len, out);
}
