/* Priorities of jobs (llmq.h) and of limiter requests (limiter.h): one type,
 * one spelling. Dispatch serves high first, then normal, then low; the limiter
 * lets low fill less of a bucket (docs/limiter.md "Priority headroom"). The names are
 * what Redis stores (queue stream q:<name>, the job hash's prio field) and
 * what the CLI and the scripts read; the list is written once in C
 * (common/base/priority.c) and once in Lua (JOBS_PRIORITIES, lua/lib/jobs.lua). */
#ifndef LLMQ_PRIORITY_H
#define LLMQ_PRIORITY_H

#ifdef __cplusplus
extern "C" {
#endif

/* Zero is normal, so a zero-initialised struct llmq_job_options means normal. */
enum llmq_priority {
    LLMQ_PRIORITY_NORMAL = 0,
    LLMQ_PRIORITY_HIGH,
    LLMQ_PRIORITY_LOW,
};
#define LLMQ_PRIORITY_COUNT 3

/* "high" | "normal" | "low" -> *out; returns 0, or -1 for anything else
 * (s may be NULL). */
int llmq_priority_parse(const char *s, enum llmq_priority *out);

/* Static name of p; "normal" for a value outside the enum. */
const char *llmq_priority_name(enum llmq_priority p);

/* The priority served rank-th (0 = first: high, normal, low), for loops over
 * the queues: for (int r = 0; r < LLMQ_PRIORITY_COUNT; r++). rank outside
 * 0..LLMQ_PRIORITY_COUNT-1 gives normal. */
enum llmq_priority llmq_priority_by_rank(int rank);

#ifdef __cplusplus
}
#endif

#endif
