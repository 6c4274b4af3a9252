/* How one delivery of a job ends, as decided by the call (call.c,
 * stream_call.c): the settle mode and the values job_settle.lua needs with
 * it (struct worker_settle, a member of struct worker_job). settle_request.h
 * turns it, with the job's identity, into the script's arguments and the
 * spool's lines.
 *
 * Pure values and functions (no I/O, no clock): any thread. */
#ifndef LLMQ_WORKER_SETTLE_OUTCOME_H
#define LLMQ_WORKER_SETTLE_OUTCOME_H

#include <stdint.h>

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
/* What the response cache may do with a done job's answer (struct
 * worker_settle nostore; lua/job_settle.lua ARGV[27]). */
enum {
    LLMQ_WORKER_NOSTORE_NO = 0,  /* store it (a job that uses the cache) */
    LLMQ_WORKER_NOSTORE_ALL = 1, /* never: partial (a stream that broke off or was left) */
    LLMQ_WORKER_NOSTORE_CUT = 2, /* cut off at its token limit (openai/cut_off.h): stored
                                    only for a job that asked (store_truncated) */
};

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
     * (lua/lib/endpoints.lua): ok | fail | limit | auth | quota | "" */
    char outcome[8];
    int64_t latency_ms; /* the call's, -1 when none was measured */
    /* The call's lateness after its lifetime check (llmq_http_response
     * late_ms), which the model's (endpoint's) arrival guard learns from;
     * -1 when none was measured */
    int64_t late_ms;
    /* done: what the response cache may do with the answer:
     * LLMQ_WORKER_NOSTORE_* (lua/job_settle.lua ARGV[27]) */
    int nostore;
    /* The status label of the attempt's metrics ("200", "timeout",
     * "not_sent"), chosen when its outcome is counted
     * (llmq_worker_count_outcome); a dead letter is counted under it once
     * its settle wrote it; the settle's status (the job's list of calls) */
    char status_label[32];
};

/* Sets s up for a job just dispatched: nothing decided, no header seen. */
void llmq_worker_settle_init(struct worker_settle *s);

struct llmq_usage;
/* Records the prompt, cached and output tokens of usage u (borrowed) in s,
 * for spend budgets and counters, when u reports prompt tokens; else leaves
 * them -1 (the settle then keeps the dollar charge). Every path that settles
 * a call on its usage (a response, a stream) calls it. */
void llmq_worker_settle_usage(struct worker_settle *s, const struct llmq_usage *u);

#endif
