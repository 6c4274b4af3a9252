/* The shared hierarchical RPM/TPM limiter.
 *
 * A request names a path of buckets — account+model (hard, mirrors OpenAI's
 * limit), then optionally tenant and user (a user of its tenant: its bucket
 * is the tenant's, common/limiter/path.h) — and is admitted only when it fits
 * every bucket on the path, decided by one atomic script on Redis with Redis's
 * clock. A grant carries a reservation handle: settle it with the real token
 * usage, or refund it when the request was not served.
 *
 * Two clients share one reply format and semantics:
 *   struct llmq_limiter   synchronous (CLIs, services that want an inline
 *                         allow/deny); one connection, not thread-safe: use one
 *                         per thread.
 *   struct llmq_alimiter  asynchronous on a libev loop (hiredis async); every
 *                         callback runs exactly once, never before the call
 *                         that submitted it returns.
 * When Redis cannot be reached the config's policy decides: fail-closed
 * (LLMQ_EREDIS) or fail-open (a local limiter holding local_share of each limit
 * last seen from Redis; a path never seen is admitted). */
#ifndef LLMQ_LIMITER_H
#define LLMQ_LIMITER_H

#include <stddef.h>
#include <stdint.h>

#include "llmq/error.h"
#include "llmq/priority.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ev_loop;

#define LLMQ_NAME_MAX 200

/* A path of buckets. tenant and user are empty strings when absent. */
struct llmq_path {
    char account[LLMQ_NAME_MAX + 1];
    char model[LLMQ_NAME_MAX + 1];
    char tenant[LLMQ_NAME_MAX + 1];
    char user[LLMQ_NAME_MAX + 1];
};

/* Fills *out from its parts (borrowed; tenant and user may be NULL or "").
 * Every given part must be a valid name: 1..200 bytes, no whitespace or
 * control characters, no '/', '|', '{', '}'. Returns LLMQ_EINVAL naming the
 * bad part otherwise. */
enum llmq_rc llmq_path_init(struct llmq_path *out, const char *account, const char *model,
                            const char *tenant, const char *user, struct llmq_error *err);

/* Parses "ACCOUNT/MODEL[/TENANT[/USER]]" (a user without a tenant: an empty
 * tenant part, "acct/gpt-4o//bob"). Returns LLMQ_EINVAL with the reason. */
enum llmq_rc llmq_path_parse(const char *text, struct llmq_path *out, struct llmq_error *err);

enum llmq_decision {
    LLMQ_GRANTED = 0,
    LLMQ_DENIED,     /* retry after wait_ms */
    LLMQ_NEVER_FITS, /* cost exceeds a hard bucket's whole limit */
};

/* Fits a handle whose three buckets have the longest names (a user bucket is
 * "<model>/t/<tenant>/u/<user>"): "<id>|<cost>|<ms>" and "|<mode><bucket>" each. */
#define LLMQ_RESERVATION_MAX 1400

struct llmq_grant {
    enum llmq_decision decision;
    /* LLMQ_GRANTED: the handle to settle or refund (opaque text), its id, and
     * the admission time (Redis TIME, ms since the epoch). */
    char reservation[LLMQ_RESERVATION_MAX];
    int64_t reservation_id;
    int64_t at_ms;
    /* LLMQ_DENIED: exact ms until the request would fit (if nothing else is
     * admitted meanwhile), and the bucket that binds longest. */
    int64_t wait_ms;
    /* LLMQ_DENIED / LLMQ_NEVER_FITS: which bucket, why ("requests", "tokens",
     * "pause") and its level ("model", "tenant", "user"). */
    char bucket[3 * LLMQ_NAME_MAX + 8];
    char reason[16];
    char level[16];
    /* LLMQ_NEVER_FITS: the cost asked for and the bucket's whole limit. */
    int64_t cost;
    int64_t limit;
    /* 1 when decided by the local fail-open limiter, Redis being unreachable. */
    int local;
};

enum llmq_fail_policy { LLMQ_FAIL_CLOSED = 0, LLMQ_FAIL_OPEN };

struct llmq_limiter_config {
    const char *redis_url; /* borrowed for the call; NULL: $LLMQ_REDIS_URL or default */
    int timeout_ms;        /* connect and command timeout; 0: 2000 */
    enum llmq_fail_policy on_redis_down;
    double local_share;   /* fail-open share of each limit (0,1]; 0: 1.0 */
    int reconnect_min_ms; /* backoff between reconnects; 0: 100 */
    int reconnect_max_ms; /* 0: 5000 */
};

/* ---- synchronous client ---- */

struct llmq_limiter;

/* Returns a new limiter (free with llmq_limiter_free). Connects at once; when
 * that fails, a fail-closed limiter returns NULL with err, a fail-open one is
 * returned anyway and keeps trying to reconnect (backed off) on later calls. */
struct llmq_limiter *llmq_limiter_new(const struct llmq_limiter_config *cfg,
                                      struct llmq_error *err);
void llmq_limiter_free(struct llmq_limiter *lim);

/* Asks to admit a request of cost_tokens on path at priority prio. On LLMQ_OK
 * *out holds the decision (granted, denied with wait, or never fits). Returns
 * LLMQ_EREDIS when Redis is unreachable and the policy is fail-closed,
 * LLMQ_EINVAL for a bad argument, LLMQ_ESCRIPT for a script error. */
enum llmq_rc llmq_limiter_acquire(struct llmq_limiter *lim, const struct llmq_path *path,
                                  int64_t cost_tokens, enum llmq_priority prio,
                                  struct llmq_grant *out, struct llmq_error *err);

/* Most requests one acquire_many call decides. */
#define LLMQ_ACQUIRE_MAX_BATCH 256

/* Decides n (1..LLMQ_ACQUIRE_MAX_BATCH) requests of costs[i] on one path in
 * one round trip, in order, stopping at the first that is not granted. out
 * must hold n grants; *decided receives how many were filled: the grants, plus
 * the stopping decision (denied or never fits) when there is one. */
enum llmq_rc llmq_limiter_acquire_many(struct llmq_limiter *lim, const struct llmq_path *path,
                                       const int64_t *costs, size_t n, enum llmq_priority prio,
                                       struct llmq_grant *out, size_t *decided,
                                       struct llmq_error *err);

/* Settles a grant with the request's real usage, actual_tokens, in each
 * bucket it was admitted to, by that bucket's ledger: by default (the API
 * counts a request at admission and keeps the count for its window) the
 * charge is raised to actual_tokens when they exceed it and never lowered;
 * a bucket set with `llmq limits set ... --settle usage` has its charge
 * replaced by actual_tokens (either direction). reservation is
 * grant.reservation (borrowed). Call at most once per grant. */
enum llmq_rc llmq_limiter_settle(struct llmq_limiter *lim, const char *reservation,
                                 int64_t actual_tokens, struct llmq_error *err);

/* Gives a grant's request and tokens back. At most once, instead of settle. */
enum llmq_rc llmq_limiter_refund(struct llmq_limiter *lim, const char *reservation,
                                 struct llmq_error *err);

/* Pauses bucket (e.g. "gpt-4o", "gpt-4o/t/acme") of account for ms: every
 * acquire through it is denied until then. *until_ms (may be NULL) receives
 * the pause's end in Redis time. */
enum llmq_rc llmq_limiter_pause(struct llmq_limiter *lim, const char *account, const char *bucket,
                                int64_t ms, int64_t *until_ms, struct llmq_error *err);

/* ---- asynchronous client (libev + hiredis async) ---- */

struct llmq_alimiter;

/* Result of an async call: rc as the sync call would return; grant is set
 * (borrowed for the call) for acquire when rc is LLMQ_OK; err (borrowed)
 * explains a failure. */
typedef void llmq_alimiter_cb(void *privdata, enum llmq_rc rc, const struct llmq_grant *grant,
                              const struct llmq_error *err);

/* Returns a new async limiter on loop (borrowed; must outlive it). It connects
 * in the background and reconnects with backoff and jitter after a failure. */
struct llmq_alimiter *llmq_alimiter_new(struct ev_loop *loop, const struct llmq_limiter_config *cfg,
                                        struct llmq_error *err);

/* Disconnects; pending callbacks run with LLMQ_ECLOSED before it returns. */
void llmq_alimiter_free(struct llmq_alimiter *al);

/* 1 when connected to Redis and the scripts answered. */
int llmq_alimiter_ready(const struct llmq_alimiter *al);

/* Async forms of the calls above. They copy what they need from their
 * arguments. Return LLMQ_OK when cb will run (exactly once, later), or an
 * error when it will not. */
enum llmq_rc llmq_alimiter_acquire(struct llmq_alimiter *al, const struct llmq_path *path,
                                   int64_t cost_tokens, enum llmq_priority prio,
                                   llmq_alimiter_cb *cb, void *privdata);
enum llmq_rc llmq_alimiter_settle(struct llmq_alimiter *al, const char *reservation,
                                  int64_t actual_tokens, llmq_alimiter_cb *cb, void *privdata);
enum llmq_rc llmq_alimiter_refund(struct llmq_alimiter *al, const char *reservation,
                                  llmq_alimiter_cb *cb, void *privdata);
enum llmq_rc llmq_alimiter_pause(struct llmq_alimiter *al, const char *account, const char *bucket,
                                 int64_t ms, llmq_alimiter_cb *cb, void *privdata);

#ifdef __cplusplus
}
#endif
#endif
