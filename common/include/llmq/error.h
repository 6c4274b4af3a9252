/* llmq error codes and the caller-owned error detail every fallible call fills.
 *
 * Convention (whole library): a fallible function returns enum llmq_rc, LLMQ_OK
 * on success; when it fails and the caller passed a non-NULL struct llmq_error,
 * the struct receives the same code and a one-line message naming what was
 * wrong. The struct is plain data owned by the caller: nothing to free. */
#ifndef LLMQ_ERROR_H
#define LLMQ_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum llmq_rc {
    LLMQ_OK = 0,
    LLMQ_EINVAL,     /* bad argument, config or input */
    LLMQ_ENOMEM,     /* allocation failed */
    LLMQ_EREDIS,     /* Redis unreachable, or a connection/protocol error */
    LLMQ_ESCRIPT,    /* a script failed or replied in an unexpected shape */
    LLMQ_ENOTFOUND,  /* the named thing does not exist */
    LLMQ_ENEVERFITS, /* a cost larger than a bucket's whole limit */
    LLMQ_ETIMEOUT,   /* a wait ran out */
    LLMQ_EIO,        /* file or socket I/O */
    LLMQ_EDUPLICATE, /* the job id already exists */
    LLMQ_ETOOBIG,    /* over a size limit */
    LLMQ_ECLOSED,    /* the handle is closing or closed */
    LLMQ_EHTTP,      /* HTTP transport or protocol error */
    LLMQ_RC_COUNT
};

#define LLMQ_ERROR_MSG_MAX 256

struct llmq_error {
    enum llmq_rc rc;
    char msg[LLMQ_ERROR_MSG_MAX];
};

/* Returns a static, never-NULL description of rc. */
const char *llmq_strerror(enum llmq_rc rc);

/* Fills err (if not NULL) with rc and a printf-style message; returns rc so a
 * caller can write `return llmq_error_set(err, LLMQ_EINVAL, "...")`. */
enum llmq_rc llmq_error_set(struct llmq_error *err, enum llmq_rc rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears err (if not NULL) to LLMQ_OK and an empty message. */
void llmq_error_clear(struct llmq_error *err);

#ifdef __cplusplus
}
#endif
#endif
