/* Dispatch reply decoding; see dispatch_reply.h. */
#include "dispatch_reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new copy of a string reply, or NULL when e is not one. */
static char *dup_str(const redisReply *e)
{
    if (e == NULL || (e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS))
        return NULL;
    char *s = malloc(e->len + 1);
    if (s != NULL) {
        memcpy(s, e->str, e->len);
        s[e->len] = '\0';
    }
    return s;
}

/* Copies a short string reply into buf; -1 when it is not one or too long. */
static int copy_str(const redisReply *e, char *buf, size_t n)
{
    if (e == NULL || e->type != REDIS_REPLY_STRING || e->len >= n)
        return -1;
    memcpy(buf, e->str, e->len);
    buf[e->len] = '\0';
    return 0;
}

/* An integer reply (or a decimal string reply) into *out; -1 otherwise. */
static int int_of(const redisReply *e, int64_t *out)
{
    if (e == NULL)
        return -1;
    if (e->type == REDIS_REPLY_INTEGER) {
        *out = e->integer;
        return 0;
    }
    if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > 20)
        return -1;
    char buf[24], *end = NULL;
    memcpy(buf, e->str, e->len);
    buf[e->len] = '\0';
    *out = strtoll(buf, &end, 10);
    return *end == '\0' ? 0 : -1;
}

int llmq_dispatch_head_decode(const redisReply *r, struct llmq_dispatch_head *out)
{
    memset(out, 0, sizeof(*out));
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 4 ||
        int_of(r->element[0], &out->wait_ms) != 0 ||
        int_of(r->element[1], &out->next_due_ms) != 0 ||
        copy_str(r->element[2], out->wake_id, sizeof(out->wake_id)) != 0)
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
    memset(j, 0, sizeof(*j));
}

int llmq_dispatch_job_decode(const redisReply *r, size_t i, struct llmq_dispatch_job *out)
{
    memset(out, 0, sizeof(*out));
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || 4 + i >= r->elements)
        return -1;
    const redisReply *e = r->element[4 + i];
    int64_t attempts, max_attempts;
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 11 ||
        copy_str(e->element[0], out->eid, sizeof(out->eid)) != 0 ||
        copy_str(e->element[1], out->prio, sizeof(out->prio)) != 0 ||
        int_of(e->element[7], &attempts) != 0 || int_of(e->element[8], &out->cost) != 0 ||
        int_of(e->element[9], &max_attempts) != 0 ||
        int_of(e->element[10], &out->est_prompt_tokens) != 0 || attempts < 0 ||
        attempts > 1000000 || max_attempts < 0 || max_attempts > 1000000 || out->cost < 0)
        return -1;
    out->attempts = (int)attempts;
    out->max_attempts = (int)max_attempts;
    out->id = dup_str(e->element[2]);
    out->handle = dup_str(e->element[3]);
    out->url_path = dup_str(e->element[4]);
    out->body = dup_str(e->element[5]);
    out->model = dup_str(e->element[6]);
    if (!out->id || !out->handle || !out->url_path || !out->body || !out->model ||
        out->id[0] == '\0' || out->model[0] == '\0' || out->url_path[0] != '/') {
        llmq_dispatch_job_clear(out);
        return -1;
    }
    return 0;
}
