/* A gateway key's restrictions, decided in one place (see key_policy.h). */
#include "key_policy.h"

#include <stdlib.h>
#include <string.h>

#include "llmq/priority.h"

/* 1 when model is one of the comma-separated names of list, exactly. */
static int model_listed(const char *list, const char *model)
{
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == strlen(model) && strncmp(p, model, len) == 0)
            return 1;
        p += len;
        if (*p == '\0')
            return 0;
    }
}

/* Where dispatch serves p: 0 first (high). */
static int serving_rank(enum llmq_priority p)
{
    for (int i = 0; i < LLMQ_PRIORITY_COUNT; i++)
        if (llmq_priority_by_rank(i) == p)
            return i;
    return LLMQ_PRIORITY_COUNT;
}

enum gw_key_verdict gw_key_policy_decide(const struct gw_key *k, struct gw_job_terms *t,
                                         struct gw_error *e)
{
    const char *model = t->model != NULL ? t->model : "";
    if (k->models[0] != '\0' && !model_listed(k->models, model)) {
        gw_error_set(e, 404, "invalid_request_error", "model", "model_not_found",
                     "The model `%s` does not exist or you do not have access to it.", model);
        return GW_KEY_REFUSES;
    }
    if (k->tenant[0] != '\0')
        t->tenant = k->tenant;
    if (k->user[0] != '\0')
        t->user = k->user;
    if (serving_rank(t->priority) < serving_rank(k->priority))
        t->priority = k->priority;
    return GW_KEY_ALLOWS;
}

/* 1 when the decision pinned a name to another value than the job's (a pin
 * is never NULL; an unpinned name is the job's own pointer). */
static int changed(const char *had, const char *now)
{
    return now != had && (had == NULL || strcmp(had, now) != 0);
}

void gw_key_policy_fallback(const struct gw_key *k, struct llmq_job *j, int owned)
{
    if (k->models[0] == '\0')
        return;
    j->fallback_only = 1;
    if (j->fallback_model != NULL && !model_listed(k->models, j->fallback_model)) {
        if (owned)
            free(j->fallback_model);
        j->fallback_model = NULL;
        memset(&j->fallback_cost, 0, sizeof(j->fallback_cost));
    }
}

enum gw_key_verdict gw_key_policy_apply(const struct gw_key *k, struct llmq_job *j,
                                        struct gw_error *e)
{
    struct gw_job_terms t = {j->model, j->tenant, j->user, j->priority};
    enum gw_key_verdict v = gw_key_policy_decide(k, &t, e);
    if (v != GW_KEY_ALLOWS)
        return v;
    int new_tenant = changed(j->tenant, t.tenant), new_user = changed(j->user, t.user);
    char *tenant = new_tenant ? strdup(t.tenant) : NULL;
    char *user = new_user ? strdup(t.user) : NULL;
    char *pin = k->endpoints[0] ? strdup(k->endpoints) : NULL;
    if ((new_tenant && tenant == NULL) || (new_user && user == NULL) ||
        (k->endpoints[0] && pin == NULL)) {
        free(tenant);
        free(user);
        free(pin);
        gw_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return GW_KEY_NO_MEMORY;
    }
    if (new_tenant) {
        free(j->tenant);
        j->tenant = tenant;
    }
    if (new_user) {
        free(j->user);
        j->user = user;
    }
    if (pin != NULL) {
        free(j->endpoints);
        j->endpoints = pin;
    }
    j->priority = t.priority;
    return GW_KEY_ALLOWS;
}
