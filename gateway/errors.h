/* OpenAI's error shape, {"error": {"message", "type", "param", "code"}}, and
 * the statuses llmq-gateway answers with. One place builds every error body
 * so they all have the same four members. */
#ifndef LLMQ_GW_ERRORS_H
#define LLMQ_GW_ERRORS_H

#include <stddef.h>

#define GW_ERROR_MSG_MAX 512

/* An error to answer with; strings are static or in msg. */
struct gw_error {
    unsigned int status; /* HTTP status */
    const char *type;    /* "invalid_request_error", "server_error", ... */
    const char *param;   /* NULL: null */
    const char *code;    /* NULL: null */
    char msg[GW_ERROR_MSG_MAX];
};

/* Fills e; returns -1 so decoders can `return gw_error_set(...)`. */
int gw_error_set(struct gw_error *e, unsigned int status, const char *type, const char *param,
                 const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The JSON body of e: a new string (free with free) of *len bytes, or NULL
 * when memory runs out. */
char *gw_error_body(const struct gw_error *e, size_t *len);

#endif
