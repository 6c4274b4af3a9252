/* What an answered call makes of its job's settle (call_decide.c;
 * docs/DESIGN.md §3.3-3.5): its classification (classify.h) decides the
 * settle mode, the tokens, the retry's delay, the result line
 * (result_line.h) and what is logged. Used for every answer the relay
 * did not decide: a whole answer (call.c) and a stream that did not reach
 * a client (stream_call.c, with its assembled answer). Loop thread only. */
#ifndef LLMQ_WORKER_CALL_DECIDE_H
#define LLMQ_WORKER_CALL_DECIDE_H

#include <stddef.h>
#include <stdint.h>

struct llmq_call_class;
struct llmq_http_response;
struct llmq_worker;
struct worker_job;

/* Decides job->settle from c, the classification of resp (both borrowed),
 * whose answer for the result line is body[0..body_len) (borrowed: the
 * response's body, or a collected stream's assembled answer). */
void llmq_worker_call_decide(struct llmq_worker *w, struct worker_job *job,
                             const struct llmq_http_response *resp, const struct llmq_call_class *c,
                             const char *body, size_t body_len);

/* Sets job up to retry after reason (borrowed), hint_ms (the server's
 * retry hint, -1: none) as the backoff's floor, or, out of attempts, to
 * die with line_if_dead (taken; NULL: an error line saying
 * attempts_exhausted) as its result line; refund: the reservation is given
 * back. */
void llmq_worker_plan_retry(struct llmq_worker *w, struct worker_job *job, const char *reason,
                            int64_t hint_ms, int refund, char *line_if_dead);

#endif
