/* Ends a delivery with the job_settle script (lua/job_settle.lua): one
 * atomic step that acknowledges the stream entry, stores the result or
 * requeues or dead-letters the job, settles or refunds the reservation, and
 * teaches the model bucket from the response headers. A settle whose reply
 * is lost with the connection is kept and sent again when Redis is back:
 * a result, once the API returned it, is never dropped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "redis/script.h"
#include "spool.h"
#include "worker.h"

static void keep_for_retry(struct worker_job *job)
{
    job->next = job->acct->settle_retry;
    job->acct->settle_retry = job;
}

static void on_settled(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_job *job = privdata;
    if (r == NULL) {
        keep_for_retry(job);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR)
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, job->acct->cfg->name, job->id, "settle failed: %s", r->str);
    else
        LLMQ_LOG_JOB(LLMQ_LOG_DEBUG, job->acct->cfg->name, job->id, "settled: %s%s%s",
                     llmq_worker_settle_mode_name(job->settle.mode),
                     job->settle.reason[0] ? " " : "", job->settle.reason);
    llmq_worker_spool_answered(job);
    llmq_worker_job_release(job);
}

void llmq_worker_settle(struct worker_job *job)
{
    struct worker_account *a = job->acct;
    struct worker_settle_argv args;
    int argc = llmq_worker_settle_argv(job, a->prefix, a->cfg->key_id, &args);
    if (argc < 0) {
        /* A flow ended a job without deciding how: a bug, not a request
         * to send or to spool. Its stream entry stays pending and is
         * reclaimed after the visibility timeout. */
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, job->id, "settle without a mode: not sent");
        llmq_worker_job_release(job);
        return;
    }
    redisAsyncContext *ac = llmq_redis_async_context(a->cmd);
    if (ac == NULL || llmq_script_run_async(ac, LLMQ_SCRIPT_JOB_SETTLE, 1, argc, args.argv, NULL,
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
