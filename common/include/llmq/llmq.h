/* llmq producer API: put OpenAI requests in the shared queue, get their results.
 *
 * A job is one OpenAI request in the Batch API's terms: a url ("/v1/chat/
 * completions", "/v1/embeddings", "/v1/responses", "/v1/completions") and a
 * JSON body naming a model. Workers run it when the account's shared RPM/TPM
 * budget allows; its result is the Batch output line
 *   {"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}
 * kept in Redis by job id.
 *
 * Threads: a struct llmq_producer is one Redis connection and may be used by
 * one thread at a time; use one handle per thread (handles are independent).
 * Errors: every fallible call returns enum llmq_rc (LLMQ_OK = 0) and fills the
 * optional caller-owned struct llmq_error; nothing aborts the process.
 * Ownership: arguments are borrowed for the call only; the only buffers the
 * library hands over are the result lines of llmq_producer_result, freed with
 * llmq_free. Lines given to a llmq_result_cb are borrowed for that call. */
#ifndef LLMQ_LLMQ_H
#define LLMQ_LLMQ_H

#include <stddef.h>

#include "llmq/error.h"
#include "llmq/priority.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest job id (a Batch custom_id), in bytes, without the NUL. */
#define LLMQ_JOB_ID_MAX 200

struct llmq_producer;

struct llmq_producer_options {
    const char *redis_url; /* redis://[user:password@]host:port/db; NULL: $LLMQ_REDIS_URL,
                              else redis://127.0.0.1:6379/0 */
    const char *account;   /* NULL: $LLMQ_ACCOUNT, else "default" */
    int timeout_ms;        /* connect and per-command timeout; 0: 5000 */
};

/* Per-job options; zero-initialised means: generated id, normal priority, no
 * tenant/user, no deadline, default attempts. */
struct llmq_job_options {
    const char *job_id; /* idempotency key (the Batch custom_id); NULL: a new id is
                           generated (and returned in llmq_enqueue_result.job_id) on
                           every call, so enqueueing the same request again, e.g. after
                           LLMQ_EREDIS, makes a second job: pass an id of your own
                           whenever a call may be repeated */
    enum llmq_priority priority;
    const char *tenant;            /* NULL: none */
    const char *user;              /* NULL: none */
    long long deadline_ms;         /* unix ms after which the job is not started; 0: none */
    long long ttl_ms;              /* deadline relative to enqueue time (Redis clock); 0: none */
    int max_attempts;              /* 1..100; 0: the default, 5 */
    const char *endpoints;         /* NULL: any endpoint of the model (`llmq endpoints`); else the
                                      endpoints the job may run on, comma-separated names
                                      ("azure-east,azure-west"; each 1..64 of A-Z a-z 0-9 . _ -) */
    const char *completion_window; /* NULL: the job runs live only; "24h": it may wait the
                                      provider's Batch window, so its model's offload policy
                                      may send it to the provider's Batch API at the batch
                                      price (`llmq offload`). Its deadline, if any, must be 24 h
                                      away or more (else LLMQ_EINVAL naming deadline_ms or
                                      ttl_ms); without one it gets 24 h. Not for stream: true */
    const char *cache;             /* NULL: the account's default for the model and tenant
                                      (`llmq cache set`; off when none). "use": answered from the response
                                      cache when the same request (its url and body, in
                                      canonical form) of the same tenant was answered
                                      before, or waits for an identical one in flight;
                                      its good answer is stored. "refresh": calls the API
                                      (or waits for an identical call in flight) and
                                      replaces the stored answer. "off": neither reads
                                      nor writes (docs/cache.md) */
    long long cache_ttl_s;         /* how long a stored answer lives, s; 0: one day (or the
                                      account's default's) */
    int cache_store_truncated;     /* 1: an answer cut off at its token limit
                                      (finish_reason "length") may be stored, and a stored
                                      one served; 0: never (docs/cache.md) */
};

/* One request of llmq_producer_enqueue_many. */
struct llmq_request {
    const char *url;  /* Batch url, e.g. "/v1/chat/completions" */
    const char *body; /* the request body as JSON text (an object with "model") */
    struct llmq_job_options options;
};

/* What happened to one request. */
struct llmq_enqueue_result {
    enum llmq_rc rc;                  /* LLMQ_OK: a new job; LLMQ_EDUPLICATE: the id is
                                         taken (nothing written); else the request is invalid */
    char job_id[LLMQ_JOB_ID_MAX + 1]; /* the job's id (generated when none was given) */
    char state[16];                   /* "queued" when new; the existing job's state
                                         (queued|delayed|running|done|dead) on duplicate */
    long long cost_tokens;            /* estimated cost charged at admission */
    char message[LLMQ_ERROR_MSG_MAX]; /* why, when the request is invalid */
};

/* Connects. opt may be NULL (all defaults). On LLMQ_OK *out is a new handle
 * (close with llmq_producer_close). Fails with LLMQ_EINVAL (bad URL or account)
 * or LLMQ_EREDIS. */
enum llmq_rc llmq_producer_open(const struct llmq_producer_options *opt, struct llmq_producer **out,
                                struct llmq_error *err);

/* Closes the connection and frees p (takes p). NULL is a no-op. */
void llmq_producer_close(struct llmq_producer *p);

/* The account this handle enqueues to (borrowed, lives as long as p). */
const char *llmq_producer_account(const struct llmq_producer *p);

/* Enqueues one job: validates url and body, estimates its cost, and adds it
 * unless its id already exists. opt may be NULL. Returns LLMQ_OK for a new job,
 * LLMQ_EDUPLICATE when the id is taken (res->state says by what), LLMQ_EINVAL
 * or LLMQ_ETOOBIG for an invalid request (err names the field: e.g. an n or
 * max_tokens out of its bounds, llmq/cost.h) (LLMQ_EINVAL also for one the account
 * refuses: a USD budget applies and its model has no price),
 * LLMQ_EREDIS/LLMQ_ESCRIPT on failure.
 * res (may be NULL) receives the details. */
enum llmq_rc llmq_producer_enqueue(struct llmq_producer *p, const char *url, const char *body,
                                   const struct llmq_job_options *opt,
                                   struct llmq_enqueue_result *res, struct llmq_error *err);

/* Enqueues n jobs in pipelined round trips. Every request is validated first:
 * when any is invalid nothing is written, its res[i].rc says why, and the call
 * returns LLMQ_EINVAL. Otherwise returns LLMQ_OK with res[i].rc LLMQ_OK or
 * LLMQ_EDUPLICATE for each request, or LLMQ_EREDIS/LLMQ_ESCRIPT when Redis
 * failed (some jobs may then have been written: enqueue them again, their
 * ids make that safe; requests without a job_id get new ids and run twice). res must hold n
 * entries. */
enum llmq_rc llmq_producer_enqueue_many(struct llmq_producer *p, const struct llmq_request *reqs,
                                        size_t n, struct llmq_enqueue_result *res,
                                        struct llmq_error *err);

/* The result of job_id: on LLMQ_OK *line is a new NUL-terminated Batch output
 * line (free with llmq_free) and *dead (may be NULL) is 1 when the job was
 * dead-lettered. LLMQ_ENOTFOUND when the job has no result (yet, or any more). */
enum llmq_rc llmq_producer_result(struct llmq_producer *p, const char *job_id, char **line,
                                  int *dead, struct llmq_error *err);

/* A result handed to a llmq_result_cb; every member borrowed for the call. */
struct llmq_result {
    const char *job_id;
    int dead;         /* 1: dead-lettered ("error" is set in the line) */
    const char *line; /* the Batch output line (JSON text) */
};

typedef void llmq_result_cb(const struct llmq_result *r, void *userdata);

/* Waits for the jobs ids[0..n) to end, calling cb (may be NULL) once per job
 * as its result arrives, those already ended first. timeout_ms < 0 waits for
 * ever; 0 only reports the jobs that have already ended. *n_done (may be
 * NULL) receives the number of jobs that ended. Returns LLMQ_OK when all
 * ended, LLMQ_ETIMEOUT when time ran out first, or LLMQ_EREDIS. Duplicate ids
 * are reported once. */
enum llmq_rc llmq_producer_wait(struct llmq_producer *p, const char *const *ids, size_t n,
                                long long timeout_ms, llmq_result_cb *cb, void *userdata,
                                size_t *n_done, struct llmq_error *err);

/* Frees a buffer the library returned (NULL is a no-op). */
void llmq_free(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
