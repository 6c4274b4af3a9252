/* The settle request: what ends one delivery of a job (lua/job_settle.lua),
 * as one type, one mode enum and one field table.
 *
 * A job's outcome (struct worker_settle, filled by call.c) plus the job's
 * identity (priority, stream entry, id, reservation handle, model) is sent
 * to Redis as the job_settle script's arguments and, when Redis cannot take
 * it before the worker stops, written to the spool (spool.h) as one JSON
 * object per line and read back by the next start. One table in
 * settle_request.c lists every field once — its name (the spool's JSON key
 * and the name job_settle.lua's ARGV header gives it), its type, where it
 * lives in struct worker_job, and its ARGV position — and drives all three:
 * llmq_worker_settle_argv, llmq_worker_settle_to_json and
 * llmq_worker_settle_from_json. A new field is one row there and one line
 * in the script's ARGV header (tests/unit/worker/test_settle_request.c
 * checks they agree).
 *
 * All functions are pure (no I/O, no clock): any thread, no callbacks. */
#ifndef LLMQ_WORKER_SETTLE_REQUEST_H
#define LLMQ_WORKER_SETTLE_REQUEST_H

#include <jansson.h>
#include <stdint.h>

struct worker_job;

/* How a delivery ends (ARGV[1] of job_settle.lua). */
enum worker_settle_mode {
    WORKER_SETTLE_UNSET = 0, /* not decided yet: nothing can be sent */
    WORKER_SETTLE_DONE,      /* a result: settle to the usage, store it */
    WORKER_SETTLE_RETRY,     /* requeue in delayed */
    WORKER_SETTLE_DEAD,      /* dead-letter */
    WORKER_SETTLE_HANDBACK,  /* back untried, the attempt uncounted */
    WORKER_SETTLE_AUTHPAUSE, /* as handback, and the account is paused */
    WORKER_SETTLE_MODE_COUNT
};

/* The script's name of mode ("done", ...), or NULL for UNSET/out of range. */
const char *llmq_worker_settle_mode_name(enum worker_settle_mode mode);

/* The mode named name (NULL-safe); WORKER_SETTLE_UNSET when none is. */
enum worker_settle_mode llmq_worker_settle_mode_parse(const char *name);

/* A delivery's outcome, decided by call.c from the response. */
struct worker_settle {
    enum worker_settle_mode mode;
    int64_t actual_tokens; /* done/dead: usage to settle to; -1: refund */
    char *line;            /* Batch output line (done/dead), owned; NULL none */
    char reason[256];      /* dead, retry */
    int64_t delay_ms;      /* retry: due this long after now */
    int refund;            /* retry: 0|1, give the reservation back */
    int64_t pause_ms;      /* pause the account+model bucket (0: none) */
    /* x-ratelimit-* headers of the response (-1: not sent), for the
     * bucket to learn from. */
    int64_t rem_req, rem_tok, reset_req_ms, reset_tok_ms, lim_req, lim_tok;
    /* done: the usage's prompt tokens, those of them cached, and output
     * tokens (-1: not reported), which spend budgets price */
    int64_t in_tokens, cached_tokens, out_tokens;
    /* What the call says about its endpoint, for the shared health
     * (lua/lib/47_endpoints.lua): ok | fail | limit | auth | quota | "" */
    char outcome[8];
    int64_t latency_ms; /* the call's, -1 when none was measured */
};

/* Sets s up for a job just dispatched: nothing decided, no header seen. */
void llmq_worker_settle_init(struct worker_settle *s);

struct llmq_usage;
/* Records the prompt, cached and output tokens of usage u (borrowed) in s,
 * for spend budgets and counters, when u reports prompt tokens; else leaves
 * them -1 (the settle then keeps the dollar charge). Every path that settles
 * a call on its usage (a response, a stream) calls it. */
void llmq_worker_settle_usage(struct worker_settle *s, const struct llmq_usage *u);

/* KEYS[1] (the account prefix) and ARGV[1..25] of job_settle.lua. */
#define LLMQ_WORKER_SETTLE_ARGC 26

struct worker_settle_argv {
    const char *argv[LLMQ_WORKER_SETTLE_ARGC];
    char numbers[LLMQ_WORKER_SETTLE_ARGC][24]; /* storage of the integer ones */
};

/* Fills out with job's settle arguments, starting with prefix (KEYS[1]);
 * key_id is this run's key fingerprint (ARGV of authpause). The strings are
 * borrowed from job, prefix, key_id and out: keep them while out is used.
 * Returns the argument count (LLMQ_WORKER_SETTLE_ARGC), or -1 when job's
 * mode is not decided. */
int llmq_worker_settle_argv(const struct worker_job *job, const char *prefix, const char *key_id,
                            struct worker_settle_argv *out);

/* The field name job_settle.lua's ARGV[index] carries (1-based), or NULL. */
const char *llmq_worker_settle_argv_name(int index);

/* The spool's JSON object for job (returns new; NULL without memory), with
 * mode written in place of the job's own (the spool writes an authpause as
 * a handback). Fields the spool does not keep (the key fingerprint) are
 * left out; a NULL line is left out. */
json_t *llmq_worker_settle_to_json(const struct worker_job *job, enum worker_settle_mode mode);

/* Fills job (zeroed by the caller; its strings become its own) from spool
 * object o (borrowed). Members that are missing take their defaults (-1 for
 * header values and actual tokens, "" for handle and model, 0 else).
 * Returns 0, or -1 when the mode, prio, eid or id is missing or does not
 * fit, or memory ran out (job's strings are then still owned by job: free
 * it). */
int llmq_worker_settle_from_json(struct worker_job *job, const json_t *o);

#endif
