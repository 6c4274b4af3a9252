/* Streamed calls teach their endpoint's health and latency as whole calls
 * do. Three endpoints of one model (spillover): ep0 (tier 1) breaks every
 * stream off half-way with an error event after it reached the client; ep2
 * (tier 1) refuses the workers' key (401); ep1 (tier 2) answers. Every job
 * is `stream: true` and relayed: a subscriber of the account's stream
 * channels stands in for the gateway whose lease the jobs name (as its
 * synchronous calls do), so the worker relays each answer as it comes. Checks: ep0 is cooling after
 * its threshold of broken streams (those jobs end dead with stream_error and are never sent again:
 * the client had half an answer), ep2 is disabled and says 401, ep1 answers the rest with its
 * latency and answers counted in the shared health (what the fastest routing ranks by), and every
 * job reached exactly one server once. (And enqueue does not warn that the model has no limit: its
 * endpoints have.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"
#include "jobs/job.h"
#include "jobs/job_store.h"
#include "redis/keys.h"

#define N_EP 3
#define JOBS 40
#define THRESHOLD 3
#define CONCURRENCY 2
#define RELAY_GATEWAY "test-relay-gw"

/* A process subscribed to every stream channel of account (what a gateway
 * holding the clients does); killed by the caller. Returns once Redis counts
 * the subscription. */
static pid_t relay_start(const char *account)
{
    char pattern[128];
    snprintf(pattern, sizeof(pattern), "llmq:{%s}:sse:*", account);
    redisContext *c = llmq_test_redis_connect();
    redisReply *r = redisCommand(c, "PUBSUB NUMPAT");
    long long before = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    freeReplyObject(r);
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        redisContext *s = llmq_test_redis_connect();
        redisReply *x = redisCommand(s, "PSUBSCRIBE %s", pattern);
        freeReplyObject(x);
        void *m = NULL;
        while (redisGetReply(s, &m) == REDIS_OK) {
            freeReplyObject(m);
            m = NULL;
        }
        _exit(0);
    }
    long long n = before;
    for (int i = 0; i < 500 && n <= before; i++) {
        usleep(10000);
        r = redisCommand(c, "PUBSUB NUMPAT");
        n = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
        freeReplyObject(r);
    }
    assert_true(n > before);
    redisFree(c);
    return pid;
}

/* Pushes the lines of path as a gateway's synchronous calls do: each job
 * names the gateway RELAY_GATEWAY by its lease (set here for the run), so
 * the worker relays its stream on that gateway's channel P sse:<id>, which
 * relay_start listens to (jobs without a lease, as `llmq enqueue` writes
 * them, are collected: nobody waits for their stream). */
static void push_relayed(const char *account, const char *path)
{
    char P[128], key[256];
    snprintf(P, sizeof(P), "llmq:{%s}:", account);
    redisContext *c = llmq_test_redis_connect();
    assert_int_equal(llmq_key(key, sizeof(key), P, LLMQ_KEY_GW_LEASE, RELAY_GATEWAY, NULL),
                     LLMQ_OK);
    redisReply *x = redisCommand(c, "SET %s 1 PX 600000", key);
    assert_non_null(x);
    freeReplyObject(x);
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_store_prepare(c, P, &err), LLMQ_OK);
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_job job[JOBS];
    struct llmq_job_outcome out[JOBS];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    size_t n = 0;
    while (n < JOBS && fgets(line, sizeof(line), f) != NULL) {
        assert_int_equal(llmq_job_from_line(line, strlen(line), &d, &job[n], &err), LLMQ_OK);
        n++;
    }
    fclose(f);
    assert_int_equal(n, JOBS);
    const struct llmq_job_gate gate = {.lease = RELAY_GATEWAY};
    enum llmq_rc rc = llmq_job_store_push_gated(c, P, &gate, job, n, out, &err);
    if (rc != LLMQ_OK)
        fail_msg("push: %s", err.msg);
    for (size_t i = 0; i < n; i++)
        llmq_job_clear(&job[i]);
    redisFree(c);
}

/* Endpoint name's entry of `llmq endpoints list --json` (new: json_decref
 * it). */
static json_t *ep_entry(const char *account, const char *name)
{
    struct cli_run r = ep_cli(account, 0, "endpoints", "list", "--json", NULL);
    json_t *o = json_loads(r.out, 0, NULL);
    cli_free(&r);
    assert_non_null(o);
    size_t i;
    json_t *e, *found = NULL;
    json_array_foreach(json_object_get(o, "endpoints"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            found = json_incref(e);
    }
    json_decref(o);
    assert_non_null(found);
    return found;
}

static long long ep_int(const json_t *e, const char *field)
{
    return (long long)json_integer_value(json_object_get(e, field));
}

static void test_streamed_calls_feed_endpoint_health(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], store[N_EP][96];
    llmq_test_unique_name(account, sizeof(account), "epstream");
    struct ep_sim eps[N_EP];
    /* streams spread over 300 ms: the first events reach the relay before
     * ep0 breaks its stream off */
    const char *breaking[] = {"--latency-ms", "300", "--stream-error", "100", NULL};
    const char *answering[] = {"--latency-ms", "60", NULL};
    const char *health[] = {
        "--fail-threshold", "3", "--fail-window-ms", "60000", "--cooldown-ms", "60000", NULL};
    const char *tier1[] = {
        "--tier", "1", "--fail-threshold", "3", "--fail-window-ms", "60000", "--cooldown-ms",
        "60000",  NULL};
    const char *tier2[] = {"--tier", "2", NULL};
    for (int i = 0; i < N_EP; i++)
        ep_init(&eps[i], i);
    ep_sim_start(&eps[0], breaking);
    ep_sim_start(&eps[1], answering);
    ep_sim_restart(&eps[2], llmq_test_free_port(), "test-some-other-key", answering);
    ep_add(account, &eps[0], "/v1", tier1);
    ep_add(account, &eps[1], "/v1", tier2);
    ep_add(account, &eps[2], "/v1", health);
    for (int i = 0; i < N_EP; i++)
        ep_limit(account, &eps[i], "gpt-4o-mini", 100000, 60000);
    struct cli_run r = ep_cli(account, 0, "endpoints", "routing", "gpt-4o-mini", "spillover", NULL);
    cli_free(&r);

    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epstream-%d.jsonl", (int)getpid());
    FILE *f = fopen(jobs, "w");
    assert_non_null(f);
    for (int i = 0; i < JOBS; i++)
        fprintf(f,
                "{\"custom_id\":\"s-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"gpt-4o-mini\",\"max_tokens\":20,\"stream\":true,"
                "\"messages\":[{\"role\":\"user\",\"content\":\"question %d\"}]},"
                "\"llmq\":{\"max_attempts\":1}}\n",
                i, i);
    fclose(f);
    pid_t relay = relay_start(account);
    char conc[16];
    snprintf(conc, sizeof(conc), "%d", CONCURRENCY);
    const char *args[6 + 2 * N_EP + 1] = {"--concurrency", conc, "--exit-when-idle-ms", "1500"};
    ep_key_args(eps, N_EP, args, 4, store);
    worker_log_path(log, "epstream", 0);
    pid_t pid = worker_start(account, &eps[0].sim, log, args);
    assert_true(worker_wait_log(log, "redis connected", 30000));
    push_relayed(account, jobs);
    assert_int_equal(worker_wait(pid, 60000), 0);
    kill(relay, SIGTERM);
    waitpid(relay, NULL, 0);
    /* the model's limits are its endpoints': no "runs unlimited" warning
     * (the same lines again: all already present, nothing runs twice) */
    r = ep_cli(account, 0, "enqueue", jobs, "--quiet", NULL);
    assert_null(strstr(r.err, "no limit"));
    cli_free(&r);

    /* every job was answered (or broken off) by exactly one server once, and
     * ended once; a 401 sent it on untried */
    int seen[JOBS] = {0};
    int requests[N_EP] = {0};
    for (int i = 0; i < N_EP; i++) {
        ep_sim_stop(&eps[i]);
        size_t n;
        struct sim_entry *e = ep_log(&eps[i], &n);
        for (size_t k = 0; k < n; k++) {
            int id = -1;
            if (e[k].status != 401 && sscanf(e[k].job, "s-%d", &id) == 1 && id >= 0 && id < JOBS)
                seen[id]++;
            requests[i]++;
        }
        free(e);
    }
    printf("# requests: ep0 (breaks streams) %d, ep1 %d, ep2 (401) %d\n", requests[0], requests[1],
           requests[2]);
    for (int i = 0; i < JOBS; i++)
        assert_int_equal(seen[i], 1);
    redisContext *c = llmq_test_redis_connect();
    char P[128];
    snprintf(P, sizeof(P), "llmq:{%s}:", account);
    assert_int_equal(worker_event_jobs(c, P), JOBS);
    /* the relayed jobs are gateway calls (a lease): one that ends dead is
     * counted sync_dead, not put in the dead list (its caller was answered) */
    redisReply *x = redisCommand(c, "XLEN %sdead", P);
    assert_non_null(x);
    assert_int_equal(x->integer, 0);
    freeReplyObject(x);
    x = redisCommand(c, "HGET %sstats sync_dead", P);
    assert_non_null(x);
    long long dead = x->type == REDIS_REPLY_STRING ? strtoll(x->str, NULL, 10) : 0;
    freeReplyObject(x);
    redisFree(c);

    /* ep0: cooled after THRESHOLD broken streams (plus what was in flight);
     * those jobs are dead, the rest answered */
    json_t *e0 = ep_entry(account, "ep0");
    printf("# ep0: %s (%s), %lld failures\n", json_string_value(json_object_get(e0, "state")),
           json_string_value(json_object_get(e0, "why")), ep_int(e0, "n_fail"));
    assert_string_equal(json_string_value(json_object_get(e0, "state")), "cooling");
    assert_true(ep_int(e0, "n_fail") >= THRESHOLD);
    assert_true(requests[0] >= THRESHOLD && requests[0] <= THRESHOLD + CONCURRENCY);
    assert_int_equal(dead, requests[0]);
    json_decref(e0);
    /* ep2: its 401 disabled it (a 401 comes before any event is relayed) */
    json_t *e2 = ep_entry(account, "ep2");
    assert_string_equal(json_string_value(json_object_get(e2, "state")), "disabled");
    assert_non_null(strstr(json_string_value(json_object_get(e2, "why")), "401"));
    assert_true(requests[2] >= 1 && requests[2] <= CONCURRENCY);
    json_decref(e2);
    /* ep1: every streamed answer counted, with its latency */
    json_t *e1 = ep_entry(account, "ep1");
    printf("# ep1: %lld answered, latency %lld ms\n", ep_int(e1, "n_ok"), ep_int(e1, "lat_ms"));
    assert_string_equal(json_string_value(json_object_get(e1, "state")), "ok");
    assert_int_equal(ep_int(e1, "n_ok"), requests[1]);
    assert_int_equal(requests[1], JOBS - dead);
    assert_true(ep_int(e1, "lat_ms") >= 60);
    json_decref(e1);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streamed_calls_feed_endpoint_health),
    };
    return cmocka_run_group_tests_name("endpoints_stream", tests, NULL, NULL);
}
