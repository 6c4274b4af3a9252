/* Exactly one half-open probe: when an endpoint's cooling ends, one request
 * goes to it and nothing else until that request's answer comes back.
 *
 * One endpoint of a model, cooled after one failure (its server is not up:
 * connection refused), 20 jobs waiting, three workers of one slot each (so
 * each dispatch call grants at most one job, and the idle workers ask again
 * while the probe is out: a probe that only one dispatch call knew of would
 * be granted again by the next). Once the endpoint is cooling its server
 * comes up; its first answer takes 3 s more than the others (openai-sim
 * --slow-first 1), far longer than the workers take to ask again. Checks:
 * of the arrivals at the server before that first answer went out, there is
 * exactly one (the probe); then every job is done, nothing is dead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"
#include "job_fields.h"

#define JOBS 20
#define WORKERS 3

/* One arrival of the sim's access log: when it was admitted and how long
 * its answer took (both at the sim). */
struct arrival {
    long long t_ms, latency_ms;
};

/* The arrivals of the sim access log at path (count in *n); returns new. */
static struct arrival *arrivals_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    size_t cap = 256;
    struct arrival *v = malloc(cap * sizeof(*v));
    assert_non_null(v);
    *n = 0;
    char line[4096];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        if (o == NULL)
            continue;
        if (*n == cap)
            v = realloc(v, (cap *= 2) * sizeof(*v));
        assert_non_null(v);
        v[*n].t_ms = json_integer_value(json_object_get(o, "t_ms"));
        v[*n].latency_ms = json_integer_value(json_object_get(o, "latency_ms"));
        (*n)++;
        json_decref(o);
    }
    if (f != NULL)
        fclose(f);
    return v;
}

/* Endpoint name's state in `llmq endpoints list --json` into st. */
static void ep_state_of(const char *account, const char *name, char *st, size_t n)
{
    struct cli_run r = ep_cli(account, 0, "endpoints", "list", "--json", NULL);
    json_t *o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    size_t i;
    json_t *e;
    st[0] = '\0';
    json_array_foreach(json_object_get(o, "endpoints"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            snprintf(st, n, "%s", json_string_value(json_object_get(e, "state")));
    }
    json_decref(o);
    cli_free(&r);
}

static void test_one_probe_until_it_answers(void **state)
{
    (void)state;
    char account[64], jobs[128], logs[WORKERS][128], store[1][96];
    llmq_test_unique_name(account, sizeof(account), "epprobe");
    struct ep_sim ep;
    ep_init(&ep, 0);
    ep.sim.port = llmq_test_free_port(); /* nothing listens there yet */
    const char *health[] = {
        "--fail-threshold", "1", "--cooldown-ms", "1000", "--cooldown-max-ms", "2000", NULL};
    ep_add(account, &ep, "/v1", health);
    ep_limit(account, &ep, "gpt-4o-mini", 10000, 60000);

    snprintf(jobs, sizeof(jobs), "/tmp/llmq-epprobe-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "p", JOBS, "gpt-4o-mini", 20, NULL);
    /* attempts to spare: the refused calls before the server is up count */
    const char *args[6 + 2 + 1] = {"--concurrency",       "1",   "--max-attempts", "20",
                                   "--exit-when-idle-ms", "2500"};
    ep_key_args(&ep, 1, args, 6, store);
    worker_enqueue(account, jobs); /* first: the workers exit once idle */
    pid_t pids[WORKERS];
    worker_start_n(account, &ep.sim, "epprobe", WORKERS, logs, pids, args);

    /* The first refused call cools it; then its server comes up, once no
     * job is running: every call granted before the cooling has ended
     * (refused), and whatever reaches the server is a probe. */
    char st[32], prefix[128];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    redisContext *c = llmq_test_redis_connect();
    long long deadline = llmq_test_now_ms() + 30000;
    int cooling = 0, running = 0;
    do {
        usleep(20000);
        ep_state_of(account, ep.name, st, sizeof(st));
        cooling = strcmp(st, "cooling") == 0 || strcmp(st, "probing") == 0;
        running = 0;
        for (int i = 0; cooling && i < JOBS; i++) {
            char id[32];
            snprintf(id, sizeof(id), "p-%d", i);
            char *v = llmq_test_job_field(c, prefix, id, "state");
            running += v != NULL && strcmp(v, "running") == 0;
            free(v);
        }
    } while (!(cooling && running == 0) && llmq_test_now_ms() < deadline);
    redisFree(c);
    printf("# endpoint %s, %d job(s) running, before its server is up\n", st, running);
    assert_true(cooling);
    assert_int_equal(running, 0);
    const char *slow_first[] = {"--latency-ms", "20", "--slow-first", "1", "--slow-ms",
                                "3000",         NULL};
    ep_sim_restart(&ep, ep.sim.port, NULL, slow_first);

    worker_wait_n(pids, WORKERS, 90000);
    ep_assert_results(account, "p", JOBS, JOBS); /* and nothing dead */
    ep_sim_stop(&ep);
    size_t n;
    struct arrival *a = arrivals_read(ep.sim.log_file, &n);
    assert_true(n >= JOBS);
    /* the probe: the first answer the server admitted, the slow one */
    size_t first = 0;
    for (size_t i = 1; i < n; i++)
        if (a[i].latency_ms > a[first].latency_ms)
            first = i;
    long long answered = a[first].t_ms + a[first].latency_ms;
    int before = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(a[i].t_ms >= a[first].t_ms); /* admitted first */
        before += a[i].t_ms < answered;
    }
    printf("# %zu arrivals; the probe took %lld ms; arrivals before its answer: %d\n", n,
           a[first].latency_ms, before);
    assert_true(a[first].latency_ms >= 3000); /* it was the slow one */
    assert_int_equal(before, 1);
    free(a);
    unlink(jobs);
    for (int i = 0; i < WORKERS; i++)
        unlink(logs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_probe_until_it_answers),
    };
    return cmocka_run_group_tests_name("endpoints_half_open", tests, NULL, NULL);
}
