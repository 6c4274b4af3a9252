/* Helpers of the scheduler tests that call the scripts directly on the
 * test's Redis (enqueue, dispatch, job_settle), so that what they assert is
 * the limiter's and the scheduler's decisions, never a time: `llmq limits
 * set`, one job in, one dispatch call's grants. Header-only (static inline):
 * each test is its own executable. Every helper asserts success. */
#ifndef LLMQ_TEST_SCHED_SUPPORT_H
#define LLMQ_TEST_SCHED_SUPPORT_H

#include "redis/script.h"
#include "worker_support.h"

/* `llmq limits set model` with args (NULL-ended, after the model). */
static inline void sched_limits_set(const struct script_account *a, const char *model,
                                    const char *const *args)
{
    const char *argv[16] = {"llmq", "limits", "set", model};
    int n = 4;
    for (int i = 0; args[i] != NULL && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    struct cli_run r = cli_run(a->name, argv);
    if (r.status != 0)
        fprintf(stderr, "limits set: %s\n", r.err);
    assert_int_equal(r.status, 0);
    cli_free(&r);
}

/* Runs script id with argv (argv[0]: the prefix, its one key); returns the
 * reply (free it), failing the test on an error reply. */
static inline redisReply *sched_run(const struct script_account *a, enum llmq_script_id id,
                                    int argc, const char **argv)
{
    redisReply *r = llmq_script_run(a->c, id, 1, argc, argv, NULL, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("script error: %s", r->str);
    return r;
}

/* Enqueues chat job id of cost tokens for model at priority prio, of
 * tenant and user ('' none), as lua/enqueue.lua is called by every producer. */
static inline void sched_enqueue(const struct script_account *a, const char *id, const char *prio,
                                 const char *model, const char *cost, const char *tenant,
                                 const char *user)
{
    const char *argv[] = {a->P, id,  prio, model, "/v1/chat/completions", "{}", cost, tenant, user,
                          "0",  "0", "0",  "1"};
    freeReplyObject(sched_run(a, LLMQ_SCRIPT_ENQUEUE, 13, argv));
}

/* One job a dispatch call granted: its stream entry, id, reservation
 * handle and priority. */
struct sched_grant {
    char eid[64], id[64], handle[256], prio[8];
};

/* One dispatch call for up to max (1..16) jobs: fills g (may be NULL) in
 * the reply's order, returns how many were granted; wake (may be NULL): the
 * wake stream's newest id it reported. */
static inline int sched_dispatch(const struct script_account *a, int max, struct sched_grant *g,
                                 char *wake, size_t wake_sz)
{
    char max_s[8];
    snprintf(max_s, sizeof(max_s), "%d", max);
    const char *argv[] = {a->P, "test-consumer", max_s};
    redisReply *r = sched_run(a, LLMQ_SCRIPT_DISPATCH, 3, argv);
    assert_true(r->type == REDIS_REPLY_ARRAY && r->elements >= 4);
    if (wake != NULL)
        snprintf(wake, wake_sz, "%s", r->element[2]->str);
    int n = (int)r->elements - 4;
    assert_true(n <= max);
    for (int i = 0; i < n && g != NULL; i++) {
        redisReply *j = r->element[4 + i];
        snprintf(g[i].eid, sizeof(g[i].eid), "%s", j->element[0]->str);
        snprintf(g[i].prio, sizeof(g[i].prio), "%s", j->element[1]->str);
        snprintf(g[i].id, sizeof(g[i].id), "%s", j->element[2]->str);
        snprintf(g[i].handle, sizeof(g[i].handle), "%s", j->element[3]->str);
    }
    freeReplyObject(r);
    return n;
}

#endif
