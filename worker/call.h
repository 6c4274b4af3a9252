/* One job's call to the API (call.c; docs/DESIGN.md §3.3-3.5): sends it,
 * classifies the outcome (classify.h), decides its settle, counts it and
 * hands it to job_settle.h. A job flows one way: dispatch -> call ->
 * classify -> settle -> release. Loop thread only. */
#ifndef LLMQ_WORKER_CALL_H
#define LLMQ_WORKER_CALL_H

struct llmq_worker;
struct worker_job;

/* Sends job (takes it: the worker owns it from now on, until its settle is
 * answered). */
void llmq_worker_call(struct llmq_worker *w, struct worker_job *job);

/* body (a JSON object's text, borrowed) with its "model" set to model:
 * returns new text, or NULL when body is no JSON object (or memory ran
 * out). */
char *llmq_worker_body_with_model(const char *body, const char *model);

#endif
