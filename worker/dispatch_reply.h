/* Decoding the dispatch script's reply (lua/dispatch.lua), the one place
 * where data that came from Redis streams and job hashes enters the worker.
 * Pure: no I/O; everything in a reply is checked, so a hostile or broken
 * reply is an error, never a crash. Fuzzed by tests/fuzz/fuzz_dispatch_reply.c. */
#ifndef LLMQ_DISPATCH_REPLY_H
#define LLMQ_DISPATCH_REPLY_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* The reply's head: everything but the granted jobs. */
struct llmq_dispatch_head {
    int64_t wait_ms;     /* > 0: exact ms until the first blocked key may run */
    int64_t next_due_ms; /* ms until the earliest delayed job; -1 none; 0 call again */
    char wake_id[64];    /* newest entry id of the wake stream, for the wake-up read */
    size_t n_jobs;       /* granted jobs: reply elements 4 .. 4 + n_jobs */
};

/* One granted job. Strings are new (NUL-terminated): the caller owns them
 * and frees them with llmq_dispatch_job_clear, or takes them. */
struct llmq_dispatch_job {
    char eid[64];
    char prio[8];
    char *id, *handle, *url_path, *model;
    char *body;                 /* the JSON text, unpacked from its stored form (jobs/job_pack.h) */
    int attempts, max_attempts; /* max_attempts 0: the worker's default */
    int64_t cost, est_prompt_tokens;
    int64_t lifetime_ms; /* send it only this long after asking (0: no bound) */
    int64_t guard_ms;    /* the model's arrival guard in force; -1: no window bucket */
    /* The endpoint that runs it (docs/DESIGN.md §3.9; all "" for the
     * implicit endpoint and for a reply without them): its name, base URL,
     * Azure api-version ("" OpenAI style) and deployment of the model; and
     * asked_model, the model the job asked for when a fallback model (model)
     * serves it, else "". */
    char *endpoint, *base_url, *api_version, *deployment, *asked_model;
    /* The gateway whose caller waits for it (job field lease; "" none):
     * where a streamed answer is relayed (stream_call.h). */
    char *lease;
};

/* Decodes r's head into *out. Returns 0, or -1 when r is not a dispatch
 * reply (an error reply, or the wrong shape). */
int llmq_dispatch_head_decode(const redisReply *r, struct llmq_dispatch_head *out);

/* Decodes granted job i (0 .. head.n_jobs) of r into *out. Returns 0, or -1
 * when that element is malformed (then *out holds nothing to free). */
int llmq_dispatch_job_decode(const redisReply *r, size_t i, struct llmq_dispatch_job *out);

/* Frees the strings of j and clears it; j may be cleared already. */
void llmq_dispatch_job_clear(struct llmq_dispatch_job *j);

#endif
