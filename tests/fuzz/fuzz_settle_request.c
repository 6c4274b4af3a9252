/* Fuzzes the reading of a spool line (worker/settle_request.c,
 * llmq_worker_settle_from_json): a spool file is the worker's own, but one
 * torn by a crash, a full disk or a hand edit must be refused line by line,
 * never crash the next start. Every accepted line must give a job whose
 * settle arguments are all set, and which writes and reads back the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "settle_request.h"
#include "worker.h"

static struct worker_job *read_job(const json_t *o)
{
    struct worker_job *job = calloc(1, sizeof(*job));
    if (job != NULL && llmq_worker_settle_from_json(job, o) != 0) {
        llmq_worker_job_free(job);
        return NULL;
    }
    return job;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *o = json_loadb((const char *)data, size, 0, NULL);
    struct worker_job *job = read_job(o);
    json_decref(o);
    if (job == NULL)
        return 0;
    struct worker_settle_argv args;
    if (job->id == NULL || job->handle == NULL || job->model == NULL ||
        strlen(job->prio) >= sizeof(job->prio) || strlen(job->eid) >= sizeof(job->eid) ||
        llmq_worker_settle_argv(job, "p", "k", &args) != LLMQ_WORKER_SETTLE_ARGC)
        __builtin_trap();
    for (int i = 0; i < LLMQ_WORKER_SETTLE_ARGC; i++)
        if (args.argv[i] == NULL)
            __builtin_trap();
    json_t *again = llmq_worker_settle_to_json(job, job->settle.mode);
    struct worker_job *back = again != NULL ? read_job(again) : NULL;
    json_decref(again);
    if (again != NULL && back == NULL)
        __builtin_trap(); /* what we write, we read */
    if (back != NULL && (back->settle.mode != job->settle.mode || strcmp(back->id, job->id) != 0 ||
                         strcmp(back->eid, job->eid) != 0 ||
                         back->settle.actual_tokens != job->settle.actual_tokens ||
                         (back->settle.line == NULL) != (job->settle.line == NULL)))
        __builtin_trap();
    llmq_worker_job_free(back);
    llmq_worker_job_free(job);
    return 0;
}
