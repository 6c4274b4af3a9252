/* Helpers of the endpoint tests (endpoints_*.c): several openai-sim
 * processes, each one endpoint of an account with its own key and limits,
 * and workers that hold those keys (--endpoint-key NAME=ENV). Header-only
 * (static inline): each test is its own executable. */
#ifndef LLMQ_TEST_ENDPOINTS_SUPPORT_H
#define LLMQ_TEST_ENDPOINTS_SUPPORT_H

#include <stdarg.h>

#include "worker_support.h"

#define EP_MAX 8

/* One endpoint of a test: its name, sim and the key the sim asks for (in
 * the environment variable env of the workers). */
struct ep_sim {
    char name[32];
    char env[48];
    char key[64];
    struct sim_proc sim;
    int running;
};

/* Runs the llmq CLI for account with the NULL-ended words after "llmq";
 * asserts exit 0 unless expect_fail; returns the result (free it). */
static inline struct cli_run ep_cli(const char *account, int expect_status, ...)
{
    const char *argv[40] = {"llmq"};
    int argc = 1;
    va_list ap;
    va_start(ap, expect_status);
    const char *w;
    while (argc < 39 && (w = va_arg(ap, const char *)) != NULL)
        argv[argc++] = w;
    va_end(ap);
    argv[argc] = NULL;
    struct cli_run r = cli_run(account, argv);
    if (r.status != expect_status)
        fprintf(stderr, "llmq %s %s: exit %d: %s%s\n", argv[1], argc > 2 ? argv[2] : "", r.status,
                r.out, r.err);
    assert_int_equal(r.status, expect_status);
    return r;
}

/* Names endpoint i ("ep<i>"), its key and its key's environment variable,
 * and sets that variable here (workers inherit it). */
static inline void ep_init(struct ep_sim *e, int i)
{
    memset(e, 0, sizeof(*e));
    snprintf(e->name, sizeof(e->name), "ep%d", i);
    snprintf(e->env, sizeof(e->env), "LLMQ_TEST_EP%d_KEY", i);
    snprintf(e->key, sizeof(e->key), "test-endpoint-%d-%d-not-real", i, (int)getpid());
    setenv(e->env, e->key, 1);
}

/* Starts e's sim with --api-key (so a wrong key is a 401) and args
 * (NULL-ended). */
static inline void ep_sim_start(struct ep_sim *e, const char *const *args)
{
    const char *argv[40] = {"--api-key", e->key};
    int n = 2;
    for (int i = 0; args != NULL && args[i] != NULL && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    assert_int_equal(sim_proc_start(&e->sim, argv), 0);
    e->running = 1;
}

/* Starts e's sim again on the port it had (or on port, when e never ran:
 * port > 0), key key (NULL: e's own) and args (NULL-ended); stops the
 * running one first. Its access log is a new file (e->sim.log_file). */
static inline void ep_sim_restart(struct ep_sim *e, int port, const char *key,
                                  const char *const *args)
{
    if (e->running)
        assert_int_equal(sim_proc_stop(&e->sim), 0);
    e->running = 0;
    if (port <= 0)
        port = e->sim.port;
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *argv[40] = {"--api-key", key ? key : e->key, "--port", port_s};
    int n = 4;
    for (int i = 0; args != NULL && args[i] != NULL && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    assert_int_equal(sim_proc_start(&e->sim, argv), 0);
    assert_int_equal(e->sim.port, port);
    e->running = 1;
}

/* Stops e's sim: its port refuses connections from now on. */
static inline void ep_sim_stop(struct ep_sim *e)
{
    if (e->running)
        assert_int_equal(sim_proc_stop(&e->sim), 0);
    e->running = 0;
}

/* `llmq endpoints add` of e pointing at its sim (base_url_path: "/v1", or
 * "" for an Azure resource URL), with extra words (NULL-ended, up to 8). */
static inline void ep_add(const char *account, const struct ep_sim *e, const char *base_url_path,
                          const char *const *extra)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", e->sim.port, base_url_path);
    const char *x[8] = {NULL};
    for (int i = 0; extra != NULL && extra[i] != NULL && i < 8; i++)
        x[i] = extra[i];
    struct cli_run r = ep_cli(account, 0, "endpoints", "add", e->name, "--base-url", url, x[0],
                              x[1], x[2], x[3], x[4], x[5], x[6], x[7], NULL);
    cli_free(&r);
}

/* `llmq limits set model --endpoint e --rpm rpm --period-ms period_ms`. */
static inline void ep_limit(const char *account, const struct ep_sim *e, const char *model, int rpm,
                            long long period_ms)
{
    char rpm_s[24], period_s[24];
    snprintf(rpm_s, sizeof(rpm_s), "%d", rpm);
    snprintf(period_s, sizeof(period_s), "%lld", period_ms);
    struct cli_run r = ep_cli(account, 0, "limits", "set", model, "--endpoint", e->name, "--rpm",
                              rpm_s, "--period-ms", period_s, NULL);
    cli_free(&r);
}

/* The workers' flags for the keys of eps[0..n) into args (from index at),
 * NULL-ended; args must hold at + 2n + 1. The strings live in store. */
static inline int ep_key_args(const struct ep_sim *eps, int n, const char **args, int at,
                              char (*store)[96])
{
    for (int i = 0; i < n; i++) {
        snprintf(store[i], 96, "%.31s=%.47s", eps[i].name, eps[i].env);
        args[at++] = "--endpoint-key";
        args[at++] = store[i];
    }
    args[at] = NULL;
    return at;
}

/* Access-log entries of e's sim (sorted by time); count in *n. */
static inline struct sim_entry *ep_log(const struct ep_sim *e, size_t *n)
{
    struct sim_entry *v = sim_log_read(e->sim.log_file, n);
    sim_log_sort(v, *n);
    return v;
}

/* The most arrivals of e inside any window of period_ms (every arrival
 * counts: answered or refused). */
static inline size_t ep_max_in_window(const struct sim_entry *e, size_t n, long long period_ms)
{
    size_t best = 0;
    for (size_t i = 0, j = 0; i < n; i++) {
        while (e[i].t_ms - e[j].t_ms >= period_ms)
            j++;
        if (i - j + 1 > best)
            best = i - j + 1;
    }
    return best;
}

/* Asserts every job "<prefix>-<i>" (i < jobs) of account has a result, the
 * events stream names ended jobs (each job of the account once) and none
 * is dead. */
static inline void ep_assert_results(const char *account, const char *prefix, int jobs, int ended)
{
    redisContext *c = llmq_test_redis_connect();
    char P[128], key[256];
    snprintf(P, sizeof(P), "llmq:{%s}:", account);
    int missing = 0;
    for (int i = 0; i < jobs; i++) {
        snprintf(key, sizeof(key), "%sres:%s-%d", P, prefix, i);
        redisReply *r = redisCommand(c, "EXISTS %s", key);
        missing += !(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        if (r)
            freeReplyObject(r);
    }
    assert_int_equal(missing, 0);
    assert_int_equal(worker_event_jobs(c, P), ended);
    redisReply *r = redisCommand(c, "XLEN %sdead", P);
    assert_non_null(r);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    redisFree(c);
}

#endif
