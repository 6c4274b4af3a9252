/* Dispatch reply decoding; see dispatch_reply.h. */
#include "dispatch_reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job_pack.h"
#include "redis/reply_read.h"

int llmq_dispatch_head_decode(const redisReply *r, struct llmq_dispatch_head *out)
{
    memset(out, 0, sizeof(*out));
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 4 ||
        llmq_reply_int(r->element[0], &out->wait_ms) != 0 ||
        llmq_reply_int(r->element[1], &out->next_due_ms) != 0 ||
        llmq_reply_copy(r->element[2], out->wake_id, sizeof(out->wake_id)) != 0)
        return -1;
    out->n_jobs = r->elements - 4;
    return 0;
}

void llmq_dispatch_job_clear(struct llmq_dispatch_job *j)
{
    free(j->id);
    free(j->handle);
    free(j->url_path);
    free(j->body);
    free(j->model);
    free(j->endpoint);
    free(j->base_url);
    free(j->api_version);
    free(j->deployment);
    free(j->asked_model);
    free(j->lease);
    memset(j, 0, sizeof(*j));
}

int llmq_dispatch_job_decode(const redisReply *r, size_t i, struct llmq_dispatch_job *out)
{
    memset(out, 0, sizeof(*out));
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || 4 + i >= r->elements)
        return -1;
    const redisReply *e = r->element[4 + i];
    int64_t attempts, max_attempts;
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 13 ||
        llmq_reply_copy(e->element[0], out->eid, sizeof(out->eid)) != 0 ||
        llmq_reply_copy(e->element[1], out->prio, sizeof(out->prio)) != 0 ||
        llmq_reply_int(e->element[7], &attempts) != 0 ||
        llmq_reply_int(e->element[8], &out->cost) != 0 ||
        llmq_reply_int(e->element[9], &max_attempts) != 0 ||
        llmq_reply_int(e->element[10], &out->est_prompt_tokens) != 0 ||
        llmq_reply_int(e->element[11], &out->lifetime_ms) != 0 ||
        llmq_reply_int(e->element[12], &out->guard_ms) != 0 || attempts < 0 || attempts > 1000000 ||
        max_attempts < 0 || max_attempts > 1000000 || out->cost < 0 || out->lifetime_ms < 0 ||
        out->lifetime_ms > 3600000 || out->guard_ms < -1 || out->guard_ms > 3600000)
        return -1;
    out->attempts = (int)attempts;
    out->max_attempts = (int)max_attempts;
    out->id = llmq_reply_dup(e->element[2]);
    out->handle = llmq_reply_dup(e->element[3]);
    out->url_path = llmq_reply_dup(e->element[4]);
    /* the body as stored: packed or its text (jobs/job_pack.h) */
    size_t body_len = 0;
    if (e->element[5]->type == REDIS_REPLY_STRING)
        llmq_job_unpack(e->element[5]->str, e->element[5]->len, LLMQ_JOB_PACK_TEXT_MAX, &out->body,
                        &body_len, NULL);
    out->model = llmq_reply_dup(e->element[6]);
    if (!out->id || !out->handle || !out->url_path || !out->body || !out->model ||
        out->id[0] == '\0' || out->model[0] == '\0' || out->url_path[0] != '/') {
        llmq_dispatch_job_clear(out);
        return -1;
    }
    /* The endpoint's five elements, when the reply has them (this version's
     * script always sends them). */
    char **ep[5] = {&out->endpoint, &out->base_url, &out->api_version, &out->deployment,
                    &out->asked_model};
    for (size_t k = 0; k < 5; k++) {
        *ep[k] = e->elements >= 18 ? llmq_reply_dup(e->element[13 + k]) : strdup("");
        if (*ep[k] == NULL) {
            llmq_dispatch_job_clear(out);
            return -1;
        }
    }
    out->lease = e->elements >= 19 ? llmq_reply_dup(e->element[18]) : strdup("");
    if (out->lease == NULL) {
        llmq_dispatch_job_clear(out);
        return -1;
    }
    /* A named endpoint comes with an http(s) base URL; Redis is trusted
     * no further than that. */
    if (out->endpoint[0] != '\0' && strncmp(out->base_url, "http://", 7) != 0 &&
        strncmp(out->base_url, "https://", 8) != 0) {
        llmq_dispatch_job_clear(out);
        return -1;
    }
    return 0;
}
