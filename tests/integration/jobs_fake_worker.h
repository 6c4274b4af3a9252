/* A stand-in for the worker in the producer-side tests: takes jobs the way
 * the worker does (lua/dispatch.lua, which delivers them through the
 * priority streams' group "workers"), and ends them through
 * lua/job_finish.lua, then XACK (the entry stays until a trim, as the
 * worker leaves it).
 * Header-only so each test stays one executable. */
#ifndef LLMQ_TEST_JOBS_FAKE_WORKER_H
#define LLMQ_TEST_JOBS_FAKE_WORKER_H

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Takes up to max jobs through the dispatch script as the worker does
 * (polling every 10 ms up to block_ms for the first), ends them (every
 * dead_every-th as dead; 0: none) and acknowledges them. Returns the number
 * of jobs ended, -1 on error. */
static inline long fake_worker_run(redisContext *c, const char *prefix, long max, long block_ms,
                                   long dead_every)
{
    char max_s[24];
    snprintf(max_s, sizeof(max_s), "%ld", max < 256 ? max : 256);
    redisReply *r = NULL;
    for (long waited = 0;; waited += 10) {
        const char *argv[] = {prefix, "fake-worker", max_s};
        r = llmq_script_run(c, LLMQ_SCRIPT_DISPATCH, 1, 3, argv, NULL, NULL);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            fprintf(stderr, "dispatch: %s\n",
                    r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
            if (r != NULL)
                freeReplyObject(r);
            return -1;
        }
        if (r->elements > 4 || waited >= block_ms)
            break;
        freeReplyObject(r);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    static long seq;
    long ended = 0;
    for (size_t i = 4; i < r->elements; i++) {
        const redisReply *g = r->element[i];
        const char *eid = g->element[0]->str, *prio = g->element[1]->str, *id = g->element[2]->str;
        int dead = dead_every > 0 && ++seq % dead_every == 0;
        if (fake_worker_finish(c, prefix, id, dead) < 0) {
            freeReplyObject(r);
            return -1;
        }
        /* acknowledged, not deleted: the worker's settle leaves the entry
         * to the periodic trim (lua/lib/worker.lua worker_ack) */
        freeReplyObject(redisCommand(c, "XACK %sq:%s workers %s", prefix, prio, eid));
        ended++;
    }
    freeReplyObject(r);
    return ended;
}

#endif
