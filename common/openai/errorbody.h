/* Classifying an OpenAI / Azure OpenAI error response: status + body → kind.
 *
 * Pure code: the body is borrowed, nothing is kept. Bodies look like
 *   {"error":{"message":"...","type":"requests","param":null,"code":"rate_limit_exceeded"}}
 *   {"error":{"code":"429","message":"Requests to the ... Please retry after 1 second."}}  (Azure)
 *   {"error":{"message":"...","type":"insufficient_quota","code":"insufficient_quota"}}
 * but a proxy may send HTML or nothing: the kind then follows the status
 * alone and the strings stay empty. Strings are copied, truncated to their
 * buffers, with control bytes replaced by '?' so they are safe to log. */
#ifndef LLMQ_ERRORBODY_H
#define LLMQ_ERRORBODY_H

#include <stddef.h>

enum llmq_errorbody_kind {
    LLMQ_ERRORBODY_OK = 0,             /* 1xx/2xx/3xx: not an error response */
    LLMQ_ERRORBODY_RATE_LIMIT,         /* 429 (rate_limit_exceeded, Azure "429", or no code) */
    LLMQ_ERRORBODY_INSUFFICIENT_QUOTA, /* 429 with code/type insufficient_quota or
                                          billing_hard_limit_reached: retrying will not help */
    LLMQ_ERRORBODY_SERVER,             /* 5xx */
    LLMQ_ERRORBODY_CLIENT,             /* other 4xx, and statuses outside 100..599 */
};

#define LLMQ_ERRORBODY_CODE_MAX 64
#define LLMQ_ERRORBODY_MSG_MAX 256

struct llmq_errorbody {
    enum llmq_errorbody_kind kind;
    int status;
    int retryable; /* 1 for RATE_LIMIT, SERVER, 408 and 409 (OpenAI's "retry these") */
    int parsed;    /* 1 when the body was JSON with an "error" object */
    char code[LLMQ_ERRORBODY_CODE_MAX];   /* error.code (string, or integer as text), or "" */
    char type[LLMQ_ERRORBODY_CODE_MAX];   /* error.type, or "" */
    char param[LLMQ_ERRORBODY_CODE_MAX];  /* error.param, or "" */
    char message[LLMQ_ERRORBODY_MSG_MAX]; /* error.message, or "" */
};

/* Classifies status and body[0..len) (borrowed; may be NULL when len is 0)
 * into *out (always fully written). */
void llmq_errorbody_classify(int status, const char *body, size_t len, struct llmq_errorbody *out);

/* Static lower-case name of a kind ("rate_limit", "insufficient_quota", ...). */
const char *llmq_errorbody_kind_name(enum llmq_errorbody_kind kind);

#endif
