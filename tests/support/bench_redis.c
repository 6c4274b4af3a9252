/* The benchmarks' Redis helpers (bench_redis.h). */
#include "bench_redis.h"

#include <errno.h> /* program_invocation_short_name (the project builds with _GNU_SOURCE) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/script.h"

void llmq_bench_die(const char *what, redisContext *c)
{
    fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
            c && c->err ? c->errstr : "bad reply");
    exit(1);
}

double llmq_bench_redis_cpu_s(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO cpu");
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        llmq_bench_die("INFO cpu", c);
    double user = 0, sys = 0;
    const char *u = strstr(r->str, "used_cpu_user:"), *s = strstr(r->str, "used_cpu_sys:");
    if (u != NULL)
        user = strtod(u + strlen("used_cpu_user:"), NULL);
    if (s != NULL)
        sys = strtod(s + strlen("used_cpu_sys:"), NULL);
    freeReplyObject(r);
    return user + sys;
}

void llmq_bench_drain(redisContext *c, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL)
            llmq_bench_die(what, c);
        if (r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, r->str);
            exit(1);
        }
        freeReplyObject(r);
    }
}

void llmq_bench_enqueue_fields(const char *id, const char *tenant,
                               const char *out[LLMQ_BENCH_ENQUEUE_FIELDS])
{
    /* id, priority, model, url, body, cost, tenant, user, deadline, ttl,
     * max attempts, estimated prompt tokens */
    const char *f[LLMQ_BENCH_ENQUEUE_FIELDS] = {id,
                                                "normal",
                                                "bench-model",
                                                "/v1/chat/completions",
                                                "{\"model\":\"bench-model\"}",
                                                "100",
                                                tenant,
                                                "",
                                                "0",
                                                "0",
                                                "0",
                                                "60"};
    memcpy(out, f, sizeof(f));
}

void llmq_bench_grants_read(const redisReply *r, struct llmq_bench_grant *g, int *got, int max)
{
    for (size_t e = 4; e < r->elements && *got < max; e++) {
        const redisReply *j = r->element[e];
        struct llmq_bench_grant *o = &g[(*got)++];
        snprintf(o->eid, sizeof(o->eid), "%s", j->element[0]->str);
        snprintf(o->id, sizeof(o->id), "%s", j->element[2]->str);
        snprintf(o->handle, sizeof(o->handle), "%s", j->element[3]->str);
    }
}

enum llmq_rc llmq_bench_settle_append(redisContext *c, const char *P,
                                      const struct llmq_bench_grant *g, int n, const char *model,
                                      const char *const usage[3])
{
    enum { VALUES = 28 }; /* lua/job_settle.lua's values per delivery, after P */
    const char **argv = malloc(sizeof(*argv) * (size_t)(1 + n * VALUES));
    if (argv == NULL)
        return LLMQ_ENOMEM;
    argv[0] = P;
    for (int i = 0; i < n; i++) {
        const char *one[VALUES] = {
            "done",   "normal", g[i].eid, g[i].id, g[i].handle, "80",     "{\"id\":\"x\"}",
            "",       "0",      "0",      model,   "0",         "-1",     "-1",
            "-1",     "-1",     "-1",     "-1",    "",          usage[0], usage[1],
            usage[2], "",       "",       "-1",    "-1",        "0",      "200"};
        memcpy(argv + 1 + i * VALUES, one, sizeof(one));
    }
    enum llmq_rc rc = llmq_script_append(c, LLMQ_SCRIPT_JOB_SETTLE, 1, 1 + n * VALUES, argv, NULL);
    free(argv);
    return rc;
}

double llmq_bench_settle_done(redisContext *c, const char *P, const struct llmq_bench_grant *g,
                              int n, const char *model, const char *const usage[3], int depth)
{
    double cpu0 = llmq_bench_redis_cpu_s(c);
    int inflight = 0;
    for (int i = 0; i < n; i++) {
        if (llmq_bench_settle_append(c, P, &g[i], 1, model, usage) != LLMQ_OK)
            llmq_bench_die("append settle", c);
        if (++inflight == depth) {
            llmq_bench_drain(c, inflight, "settle");
            inflight = 0;
        }
    }
    llmq_bench_drain(c, inflight, "settle");
    return llmq_bench_redis_cpu_s(c) - cpu0;
}
