/* Jobs in hand and their slots; the contract is in job_slot.h. The in-hand
 * count (w->in_hand) changes only here. */
#include "job_slot.h"

#include <stdlib.h>

#include "base/clock.h"
#include "worker.h"

struct worker_job *llmq_worker_job_new(struct worker_account *a)
{
    struct worker_job *job = calloc(1, sizeof(*job));
    if (job == NULL)
        return NULL;
    job->acct = a;
    job->est_prompt_tokens = -1;
    llmq_worker_settle_init(&job->settle);
    return job;
}

void llmq_worker_job_hold(struct worker_job *job)
{
    struct worker_account *a = job->acct;
    job->held_prev = NULL;
    job->held_next = a->held;
    if (a->held != NULL)
        a->held->held_prev = job;
    a->held = job;
    a->w->in_hand++;
}

void llmq_worker_job_take_spooled(struct worker_job *job)
{
    job->acct->w->in_hand++;
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
    free(job->settle.line);
    free(job->endpoint);
    free(job->base_url);
    free(job->api_version);
    free(job->deployment);
    free(job->asked_model);
    free(job->lease);
    free(job);
}

void llmq_worker_job_release(struct worker_job *job)
{
    struct llmq_worker *w = job->acct->w;
    llmq_worker_job_free(job);
    w->in_hand--;
    w->last_busy_ms = llmq_monotonic_ms();
    for (int i = 0; i < w->n_accounts; i++)
        llmq_worker_dispatch_soon(&w->accounts[i]);
    llmq_worker_check_done(w);
}
