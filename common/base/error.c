/* Error codes, their messages, and filling a caller's struct llmq_error. */
#include "llmq/error.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const rc_names[LLMQ_RC_COUNT] = {
    [LLMQ_OK] = "ok",
    [LLMQ_EINVAL] = "invalid argument",
    [LLMQ_ENOMEM] = "out of memory",
    [LLMQ_EREDIS] = "redis error",
    [LLMQ_ESCRIPT] = "script error",
    [LLMQ_ENOTFOUND] = "not found",
    [LLMQ_ENEVERFITS] = "cost never fits the limit",
    [LLMQ_ETIMEOUT] = "timed out",
    [LLMQ_EIO] = "i/o error",
    [LLMQ_EDUPLICATE] = "duplicate",
    [LLMQ_ETOOBIG] = "too big",
    [LLMQ_ECLOSED] = "closed",
    [LLMQ_EHTTP] = "http error",
};

const char *llmq_strerror(enum llmq_rc rc)
{
    if ((int)rc < 0 || rc >= LLMQ_RC_COUNT || rc_names[rc] == NULL)
        return "unknown error";
    return rc_names[rc];
}

enum llmq_rc llmq_error_set(struct llmq_error *err, enum llmq_rc rc, const char *fmt, ...)
{
    if (err == NULL)
        return rc;
    err->rc = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return rc;
}

void llmq_error_clear(struct llmq_error *err)
{
    if (err == NULL)
        return;
    err->rc = LLMQ_OK;
    err->msg[0] = '\0';
}
