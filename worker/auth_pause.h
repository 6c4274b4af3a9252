/* The account pause after the API refused the key (auth_pause.c, whose file
 * comment says who does what). Loop thread only. */
#ifndef LLMQ_WORKER_AUTH_PAUSE_H
#define LLMQ_WORKER_AUTH_PAUSE_H

#include <hiredis/async.h>

struct worker_account;

/* A call got status (401/403) with detail (the error code or message, may be
 * NULL; borrowed): logs loudly once per pause. */
void llmq_worker_auth_refused(struct worker_account *a, long status, const char *detail);

/* Dispatch replied LLMQ_AUTH_PAUSED (why: its text, borrowed). */
void llmq_worker_auth_paused_reply(struct worker_account *a, const char *why);

/* Why a is paused (borrowed, for logs and /readyz; never the key), or NULL
 * while it is not. */
const char *llmq_worker_auth_pause_why(const struct worker_account *a);

/* Dispatch answered normally: the pause, if any, is over. */
void llmq_worker_auth_ok(struct worker_account *a);

/* Once per process, on a ready command connection ac: lifts a pause that
 * names another key than this worker's. */
void llmq_worker_auth_resume_check(struct worker_account *a, redisAsyncContext *ac);

#endif
