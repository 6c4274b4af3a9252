/* The Redis key layout: the one place it is written down.
 *
 * Every key of an account starts with the prefix P = "llmq:{ACCOUNT}:" (see
 * llmq_account_prefix), so one account lives in one Redis Cluster slot and each
 * script touches one slot. Scripts get P as KEYS[1] and derive the rest, since
 * the buckets and jobs a script touches are only known inside it.
 *
 * Names (account, model, tenant, user, job id) never contain whitespace, '/',
 * '|', '{' or '}' (llmq_name_valid), so the separators below are unambiguous.
 *
 * Limiter
 *   P limit:<bucket>   HASH  requests, tokens, period_ms, mode (window|gcra),
 *                            burst_requests, burst_tokens, soft (0|1)
 *   P policy           HASH  headroom_low, headroom_normal, headroom_high (percent),
 *                            soft_threshold (percent)
 *   P bs:<bucket>      HASH  bucket state: tok (tokens in the window), pause (until,
 *                            ms), rtat/ttat (GCRA), learned_* (from OpenAI headers)
 *   P bw:<bucket>      ZSET  sliding-window log: member "<resid>:<tokens>",
 *                            score = admission time (ms, Redis TIME)
 *   P seq              STRING reservation id counter
 *   Buckets: "<model>" (account+model, hard), "<model>/t/<tenant>",
 *   "<model>/u/<user>"; a tenant or user without its own limit uses the limit
 *   of "<model>/t/*" or "<model>/u/*" when one is set, with its own state.
 *
 * Jobs
 *   P job:<id>         HASH  id, model, url, body (JSON text), cost (tokens), prio
 *                            (high|normal|low), tenant, user, deadline_ms (unix ms,
 *                            0 = none), max_attempts, attempts, enq_ms, state
 *                            (queued|delayed|running|done|dead), last_error
 *   P q:<prio>         STREAM entries {id: <job id>}; consumer group "workers"
 *   P delayed          ZSET  member job id, score = due time (unix ms)
 *   P res:<id>         STRING the Batch output line (JSON) of a finished job
 *   P events           STREAM {id, state: done|dead} as jobs finish, for waiters
 *   P dead             STREAM {id, reason, error, ts}: dead-lettered jobs
 */
#ifndef LLMQ_KEYS_H
#define LLMQ_KEYS_H

#define LLMQ_KEY_PREFIX_MAX 256
#define LLMQ_GROUP "workers"

#endif
