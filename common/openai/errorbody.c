/* OpenAI error responses → a kind the worker acts on (see errorbody.h).
 *
 * Invariants: the body is borrowed; the parsed JSON is released before
 * returning; *out is fully written on every path, its strings always
 * NUL-terminated and free of control bytes. */
#include "openai/errorbody.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[] = {
    [LLMQ_ERRORBODY_OK] = "ok",
    [LLMQ_ERRORBODY_RATE_LIMIT] = "rate_limit",
    [LLMQ_ERRORBODY_INSUFFICIENT_QUOTA] = "insufficient_quota",
    [LLMQ_ERRORBODY_SERVER] = "server",
    [LLMQ_ERRORBODY_CLIENT] = "client",
};

const char *llmq_errorbody_kind_name(enum llmq_errorbody_kind kind)
{
    if ((int)kind < 0 || (size_t)kind >= sizeof(kind_names) / sizeof(kind_names[0]))
        return "unknown";
    return kind_names[kind];
}

/* Copies a JSON string or integer into dst[0..n), sanitised. */
static void copy_field(char *dst, size_t n, json_t *v)
{
    dst[0] = '\0';
    if (json_is_integer(v)) {
        snprintf(dst, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return;
    }
    if (!json_is_string(v))
        return;
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len >= n)
        len = n - 1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[len] = '\0';
    /* Do not end in the middle of a UTF-8 sequence after truncation. */
    size_t k = len;
    while (k > 0 && ((unsigned char)dst[k - 1] & 0xC0) == 0x80)
        k--;
    if (k > 0 && ((unsigned char)dst[k - 1] & 0xC0) == 0xC0) {
        unsigned char lead = (unsigned char)dst[k - 1];
        size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (len - (k - 1) < want)
            dst[k - 1] = '\0';
    }
}

static void read_body(const char *body, size_t len, struct llmq_errorbody *out)
{
    if (body == NULL || len == 0)
        return;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (root == NULL)
        return;
    json_t *e = json_object_get(root, "error");
    if (json_is_object(e)) {
        out->parsed = 1;
        copy_field(out->code, sizeof(out->code), json_object_get(e, "code"));
        copy_field(out->type, sizeof(out->type), json_object_get(e, "type"));
        copy_field(out->param, sizeof(out->param), json_object_get(e, "param"));
        copy_field(out->message, sizeof(out->message), json_object_get(e, "message"));
    } else if (json_is_string(e)) {
        /* Some proxies send {"error": "text"}. */
        out->parsed = 1;
        copy_field(out->message, sizeof(out->message), e);
    }
    json_decref(root);
}

static int is_quota(const struct llmq_errorbody *b)
{
    return strcmp(b->code, "insufficient_quota") == 0 ||
           strcmp(b->type, "insufficient_quota") == 0 ||
           strcmp(b->code, "billing_hard_limit_reached") == 0;
}

void llmq_errorbody_classify(int status, const char *body, size_t len, struct llmq_errorbody *out)
{
    memset(out, 0, sizeof(*out));
    out->status = status;
    if (status >= 100 && status < 400) {
        out->kind = LLMQ_ERRORBODY_OK;
        return;
    }
    read_body(body, len, out);
    if (status == 429) {
        out->kind = is_quota(out) ? LLMQ_ERRORBODY_INSUFFICIENT_QUOTA : LLMQ_ERRORBODY_RATE_LIMIT;
        out->retryable = out->kind == LLMQ_ERRORBODY_RATE_LIMIT;
    } else if (status >= 500 && status < 600) {
        out->kind = LLMQ_ERRORBODY_SERVER;
        out->retryable = 1;
    } else {
        out->kind = LLMQ_ERRORBODY_CLIENT;
        out->retryable = status == 408 || status == 409;
    }
}
