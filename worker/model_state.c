/* The per (account, model) table; the contract is in model_state.h. A list
 * searched linearly: an account serves a handful of models. */
#include "model_state.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "worker.h"

struct worker_model *llmq_worker_model(struct worker_account *a, const char *model)
{
    int n = 0;
    if (model == NULL)
        return NULL;
    for (struct worker_model *m = a->models; m != NULL; m = m->next, n++)
        if (strcmp(m->name, model) == 0)
            return m;
    if (n >= WORKER_MODELS_MAX || strlen(model) >= sizeof(((struct worker_model *)0)->name))
        return NULL;
    struct worker_model *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->acct = a;
    memcpy(m->name, model, strlen(model) + 1);
    m->calib_written_ms = -1;
    m->headers_sent_ms = -1;
    m->next = a->models;
    a->models = m;
    return m;
}

void llmq_worker_models_free(struct worker_account *a)
{
    while (a->models != NULL) {
        struct worker_model *m = a->models;
        a->models = m->next;
        ev_timer_stop(a->w->loop, &m->calib_timer);
        if (m->calib_pending.n > 0)
            LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL,
                         "calibration: %lld samples of %s not written (redis away at exit)",
                         m->calib_pending.n, m->name);
        free(m);
    }
}
