/* A stand-in for the worker in the producer-side tests: takes jobs from an
 * account's queue streams the way the worker does (XREADGROUP, group
 * "workers"), and ends them through lua/job_finish.lua, then XACK + XDEL.
 * Header-only so each test stays one executable. */
#ifndef LLMQ_TEST_JOBS_FAKE_WORKER_H
#define LLMQ_TEST_JOBS_FAKE_WORKER_H

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job.h"
#include "jobs/job_store.h"
#include "redis/script.h"

/* Ends job id with a 200 reply (dead = 0) or as dead with a 400 (dead = 1).
 * Returns the script's reply integer (1 ended now, 0 had ended), -1 on error. */
static inline long long fake_worker_finish(redisContext *c, const char *prefix, const char *id,
                                           int dead)
{
    char body[256];
    snprintf(body, sizeof(body),
             dead
                 ? "{\"error\":{\"message\":\"bad request\",\"type\":\"invalid_request_error\"}}"
                 : "{\"id\":\"chatcmpl-%s\",\"object\":\"chat.completion\",\"choices\":[{\"index\":"
                   "0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}],\"usage\":{"
                   "\"prompt_tokens\":5,\"completion_tokens\":1,\"total_tokens\":6}}",
             id);
    struct llmq_job_output o = {.custom_id = id,
                                .status_code = dead ? 400 : 200,
                                .request_id = "req_test",
                                .body = body,
                                .body_len = strlen(body),
                                .error_code = dead ? "http_400" : NULL,
                                .error_message = dead ? "bad request" : NULL};
    char *line = llmq_job_output_encode(&o, NULL);
    if (line == NULL)
        return -1;
    const char *argv[] = {prefix, id, dead ? "dead" : "done", line, dead ? "http_400" : ""};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_JOB_FINISH, 1, 5, argv, NULL, NULL);
    free(line);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r != NULL && r->type == REDIS_REPLY_ERROR)
        fprintf(stderr, "job_finish: %s\n", r->str);
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/* Takes up to max jobs (blocking up to block_ms for the first), marks them
 * running, ends them (every dead_every-th as dead; 0: none) and acknowledges
 * them. Returns the number of jobs ended, -1 on error. */
static inline long fake_worker_run(redisContext *c, const char *prefix, long max, long block_ms,
                                   long dead_every)
{
    /* the group may not exist yet when the producer has not run: as the worker
     * must, create it (idempotent) */
    if (llmq_job_store_prepare(c, prefix, NULL) != LLMQ_OK)
        return -1;
    redisReply *r = redisCommand(c,
                                 "XREADGROUP GROUP workers fake-worker COUNT %ld BLOCK %ld STREAMS "
                                 "%sq:high %sq:normal %sq:low > > >",
                                 max, block_ms, prefix, prefix, prefix);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "XREADGROUP: %s\n", r ? r->str : c->errstr);
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    static long seq;
    long ended = 0;
    for (size_t s = 0; r->type == REDIS_REPLY_ARRAY && s < r->elements; s++) {
        const redisReply *stream = r->element[s];
        const char *key = stream->element[0]->str;
        const redisReply *entries = stream->element[1];
        for (size_t i = 0; i < entries->elements; i++) {
            const redisReply *e = entries->element[i];
            const char *id = e->element[1]->element[1]->str;
            int dead = dead_every > 0 && ++seq % dead_every == 0;
            freeReplyObject(redisCommand(c, "HSET %sjob:%s state running", prefix, id));
            freeReplyObject(redisCommand(c, "HINCRBY %sjob:%s attempts 1", prefix, id));
            if (fake_worker_finish(c, prefix, id, dead) < 0) {
                freeReplyObject(r);
                return -1;
            }
            freeReplyObject(redisCommand(c, "XACK %s workers %s", key, e->element[0]->str));
            freeReplyObject(redisCommand(c, "XDEL %s %s", key, e->element[0]->str));
            ended++;
        }
    }
    freeReplyObject(r);
    return ended;
}

#endif
