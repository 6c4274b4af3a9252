/* Ends a delivery with the job_settle script (lua/job_settle.lua): one
 * atomic step that acknowledges the stream entry, stores the result or
 * requeues or dead-letters the job, settles or refunds the reservation, and
 * teaches the model bucket from the response headers. A settle whose reply
 * is lost with the connection is kept and sent again when Redis is back:
 * a result, once the API returned it, is never dropped. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "redis/script.h"
#include "spool.h"
#include "worker.h"

void llmq_worker_job_hold(struct worker_job *job)
{
    struct worker_account *a = job->acct;
    job->held_prev = NULL;
    job->held_next = a->held;
    if (a->held != NULL)
        a->held->held_prev = job;
    a->held = job;
}

void llmq_worker_job_free(struct worker_job *job)
{
    if (job == NULL)
        return;
    if (job->held_prev != NULL)
        job->held_prev->held_next = job->held_next;
    else if (job->acct != NULL && job->acct->held == job)
        job->acct->held = job->held_next;
    if (job->held_next != NULL)
        job->held_next->held_prev = job->held_prev;
    free(job->id);
    free(job->handle);
    free(job->model);
    free(job->url_path);
    free(job->body);
    free(job->line);
    free(job);
}

static void keep_for_retry(struct worker_job *job)
{
    job->next = job->acct->settle_retry;
    job->acct->settle_retry = job;
}

static void on_settled(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_job *job = privdata;
    struct llmq_worker *w = job->acct->w;
    if (r == NULL) {
        keep_for_retry(job);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR)
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, job->acct->cfg->name, job->id, "settle failed: %s", r->str);
    else
        LLMQ_LOG_JOB(LLMQ_LOG_DEBUG, job->acct->cfg->name, job->id, "settled: %s%s%s", job->mode,
                     job->reason[0] ? " " : "", job->reason);
    llmq_worker_spool_answered(job);
    llmq_worker_job_free(job);
    w->inflight--;
    w->last_busy_ms = llmq_worker_now_ms(w);
    for (int i = 0; i < w->n_accounts; i++)
        llmq_worker_dispatch_soon(&w->accounts[i]);
    llmq_worker_check_done(w);
}

void llmq_worker_settle(struct worker_job *job)
{
    struct worker_account *a = job->acct;
    char actual[24], delay[24], pause[24], nums[6][24];
    snprintf(actual, sizeof(actual), "%" PRId64, job->actual_tokens);
    snprintf(delay, sizeof(delay), "%" PRId64, job->delay_ms);
    snprintf(pause, sizeof(pause), "%" PRId64, job->pause_ms);
    const int64_t hv[6] = {job->rem_req,      job->rem_tok, job->reset_req_ms,
                           job->reset_tok_ms, job->lim_req, job->lim_tok};
    for (int i = 0; i < 6; i++)
        snprintf(nums[i], sizeof(nums[i]), "%" PRId64, hv[i]);
    const char *argv[20] = {a->prefix,
                            job->mode,
                            job->prio,
                            job->eid,
                            job->id,
                            job->handle,
                            actual,
                            job->line ? job->line : "",
                            job->reason,
                            delay,
                            job->refund ? "1" : "0",
                            job->model,
                            pause,
                            nums[0],
                            nums[1],
                            nums[2],
                            nums[3],
                            nums[4],
                            nums[5],
                            a->cfg->key_id};
    redisAsyncContext *ac = llmq_redis_async_context(a->cmd);
    if (ac == NULL || llmq_script_run_async(ac, LLMQ_SCRIPT_JOB_SETTLE, 1, 20, argv, NULL,
                                            on_settled, job) != LLMQ_OK)
        keep_for_retry(job);
}

void llmq_worker_settle_flush(struct worker_account *a)
{
    struct worker_job *list = a->settle_retry;
    a->settle_retry = NULL;
    while (list != NULL) {
        struct worker_job *job = list;
        list = job->next;
        job->next = NULL;
        llmq_worker_settle(job);
    }
}
