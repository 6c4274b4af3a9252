/* Jobs in hand and their slots; the contract is in job_slot.h. The in-hand
 * count (slots->in_hand) changes only here. A leaf: what a freed slot means
 * to the rest of the worker is its subscribers' business. */
#include "job_slot.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"

#define TO(phase) (1u << (phase))

/* The transitions allowed, one row per phase it leaves (job_slot.h). */
static const unsigned next_phases[WORKER_JOB_PHASE_COUNT] = {
    [WORKER_JOB_NEW] = TO(WORKER_JOB_HELD) | TO(WORKER_JOB_WAITING),
    [WORKER_JOB_HELD] = TO(WORKER_JOB_CALLING) | TO(WORKER_JOB_DECIDED),
    [WORKER_JOB_CALLING] = TO(WORKER_JOB_DECIDED),
    [WORKER_JOB_DECIDED] = TO(WORKER_JOB_SETTLING) | TO(WORKER_JOB_RELEASED),
    [WORKER_JOB_SETTLING] = TO(WORKER_JOB_RELEASED) | TO(WORKER_JOB_WAITING),
    [WORKER_JOB_WAITING] = TO(WORKER_JOB_SETTLING),
    [WORKER_JOB_RELEASED] = 0,
};

static const char *const phase_names[WORKER_JOB_PHASE_COUNT] = {
    [WORKER_JOB_NEW] = "new",           [WORKER_JOB_HELD] = "held",
    [WORKER_JOB_CALLING] = "calling",   [WORKER_JOB_DECIDED] = "decided",
    [WORKER_JOB_SETTLING] = "settling", [WORKER_JOB_WAITING] = "waiting",
    [WORKER_JOB_RELEASED] = "released",
};

const char *llmq_worker_job_phase_name(enum worker_job_phase phase)
{
    return phase >= 0 && phase < WORKER_JOB_PHASE_COUNT ? phase_names[phase] : "?";
}

int llmq_worker_job_phase_allowed(enum worker_job_phase from, enum worker_job_phase to)
{
    if (from < 0 || from >= WORKER_JOB_PHASE_COUNT || to < 0 || to >= WORKER_JOB_PHASE_COUNT)
        return 0;
    return (next_phases[from] & TO(to)) != 0;
}

void llmq_worker_job_set_phase(struct worker_job *job, enum worker_job_phase to)
{
    if (!llmq_worker_job_phase_allowed(job->phase, to)) {
        LLMQ_LOG(LLMQ_LOG_ERROR, "job %s: phase %s -> %s is not allowed (a bug)",
                 job->id != NULL ? job->id : "?", llmq_worker_job_phase_name(job->phase),
                 llmq_worker_job_phase_name(to));
        assert(!"a job phase transition the table does not allow");
    }
    job->phase = to;
}

void llmq_worker_slots_init(struct worker_slots *s)
{
    memset(s, 0, sizeof(*s));
    s->last_busy_ms = llmq_monotonic_ms();
}

int llmq_worker_slot_freed_subscribe(struct worker_slots *s, worker_slot_freed_fn *fn, void *ctx)
{
    if (s->n_freed >= WORKER_SLOT_SUBSCRIBERS_MAX)
        return -1;
    s->freed[s->n_freed].fn = fn;
    s->freed[s->n_freed].ctx = ctx;
    s->n_freed++;
    return 0;
}

struct worker_job *llmq_worker_job_new(struct worker_slots *s, struct worker_account *a)
{
    struct worker_job *job = calloc(1, sizeof(*job));
    if (job == NULL)
        return NULL;
    job->slots = s;
    job->acct = a;
    job->est_prompt_tokens = -1;
    llmq_worker_settle_init(&job->settle);
    return job;
}

void llmq_worker_job_hold(struct worker_job *job)
{
    struct worker_slots *s = job->slots;
    job->held_prev = NULL;
    job->held_next = s->held;
    if (s->held != NULL)
        s->held->held_prev = job;
    s->held = job;
    s->in_hand++;
    llmq_worker_job_set_phase(job, WORKER_JOB_HELD);
    s->last_busy_ms = llmq_monotonic_ms();
}

void llmq_worker_job_take_spooled(struct worker_job *job)
{
    job->slots->in_hand++;
    llmq_worker_job_set_phase(job, WORKER_JOB_WAITING);
}

void llmq_worker_job_free(struct worker_job *job)
{
    if (job == NULL)
        return;
    if (job->held_prev != NULL)
        job->held_prev->held_next = job->held_next;
    else if (job->slots != NULL && job->slots->held == job)
        job->slots->held = job->held_next;
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
    struct worker_slots *s = job->slots;
    llmq_worker_job_set_phase(job, WORKER_JOB_RELEASED);
    if (s == NULL) { /* never took a slot: memory only */
        llmq_worker_job_free(job);
        return;
    }
    s->in_hand--;
    s->last_busy_ms = llmq_monotonic_ms();
    for (int i = 0; i < s->n_freed; i++)
        s->freed[i].fn(s->freed[i].ctx, job);
    llmq_worker_job_free(job);
}
