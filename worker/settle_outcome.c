/* Settle modes by name, and a delivery's outcome set up and filled from a
 * usage; see settle_outcome.h. */
#include "settle_outcome.h"

#include <string.h>

#include "openai/usage.h"

static const char *const mode_names[WORKER_SETTLE_MODE_COUNT] = {
    [WORKER_SETTLE_DONE] = "done",           [WORKER_SETTLE_RETRY] = "retry",
    [WORKER_SETTLE_DEAD] = "dead",           [WORKER_SETTLE_HANDBACK] = "handback",
    [WORKER_SETTLE_AUTHPAUSE] = "authpause",
};

const char *llmq_worker_settle_mode_name(enum worker_settle_mode mode)
{
    return mode >= 0 && mode < WORKER_SETTLE_MODE_COUNT ? mode_names[mode] : NULL;
}

enum worker_settle_mode llmq_worker_settle_mode_parse(const char *name)
{
    for (int m = 0; name != NULL && m < WORKER_SETTLE_MODE_COUNT; m++)
        if (mode_names[m] != NULL && strcmp(name, mode_names[m]) == 0)
            return (enum worker_settle_mode)m;
    return WORKER_SETTLE_UNSET;
}

void llmq_worker_settle_init(struct worker_settle *s)
{
    memset(s, 0, sizeof(*s));
    s->rem_req = s->rem_tok = s->reset_req_ms = s->reset_tok_ms = -1;
    s->lim_req = s->lim_tok = -1;
    s->latency_ms = s->late_ms = -1;
    s->in_tokens = s->cached_tokens = s->out_tokens = -1;
}

void llmq_worker_settle_usage(struct worker_settle *s, const struct llmq_usage *u)
{
    if (u == NULL || !(u->present & LLMQ_USAGE_INPUT))
        return;
    s->in_tokens = u->input_tokens;
    s->cached_tokens = (u->present & LLMQ_USAGE_CACHED) ? u->cached_tokens : 0;
    s->out_tokens = (u->present & LLMQ_USAGE_OUTPUT) ? u->output_tokens : 0;
}
