/* llmq_jobs_dead_total (and the summary's "dead") counts the dead letters
 * the settle wrote, not the worker's decisions. Three jobs whose calls all
 * end in a 404 (a model the API does not know), each decided dead:
 *   - a plain job: dead-lettered (an entry of P dead), counted;
 *   - a gateway's synchronous call (job field lease, its lease alive): its
 *     caller was answered, so the settle keeps it out of P dead — not counted;
 *   - a job another delivery ended while this worker's call was under way
 *     (ended here with the job_finish script, as a reclaiming worker's settle
 *     would): the settle writes nothing — not counted.
 * Before the count moved to the settle's reply, the scrape said 3 while
 * P dead held 1. The API answers after 6 s, so the third job is ended while
 * its call is in flight (waited for by its state, not by time). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "jobs/job.h"
#include "jobs/job_store.h"
#include "worker_support.h"

#define DEADLINE_MS 120000
#define LEASE "gw-deadcount-test"

static void push_one(redisContext *c, const char *prefix, const char *id,
                     const struct llmq_job_gate *gate)
{
    char line[512];
    int len = snprintf(line, sizeof(line),
                       "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                       "\"body\":{\"model\":\"gpt-4o-mini\",\"max_tokens\":8,\"messages\":[{"
                       "\"role\":\"user\",\"content\":\"hi\"}]},"
                       "\"llmq\":{\"max_attempts\":1}}",
                       id);
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_job job;
    struct llmq_job_outcome out;
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_from_line(line, (size_t)len, &d, &job, &err), LLMQ_OK);
    if (llmq_job_store_push_gated(c, prefix, gate, &job, 1, &out, &err) != LLMQ_OK)
        fail_msg("push %s: %s", id, err.msg);
    assert_true(out.created);
    llmq_job_clear(&job);
}

/* The job's state field ("" when its hash has none). */
static void job_state(redisContext *c, const char *prefix, const char *id, char *buf, size_t n)
{
    redisReply *r = redisCommand(c, "HGET %sjob:%s state", prefix, id);
    snprintf(buf, n, "%s", r != NULL && r->type == REDIS_REPLY_STRING ? r->str : "");
    if (r != NULL)
        freeReplyObject(r);
}

static int has_result(redisContext *c, const char *prefix, const char *id)
{
    return llmq_test_redis_int(c, "EXISTS %sres:%s", prefix, id) == 1;
}

static void test_dead_counted_when_written(void **state)
{
    (void)state;
    char account[64], prefix[128], log[128], port_s[16];
    llmq_test_unique_name(account, sizeof(account), "deadcount");
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    snprintf(log, sizeof(log), "/tmp/llmq-deadcount-%d.log", (int)getpid());
    redisContext *c = llmq_test_redis_connect();
    struct llmq_error err = {0};
    assert_int_equal(llmq_job_store_prepare(c, prefix, &err), LLMQ_OK);
    struct sim_proc sim;
    const char *sim_args[] = {"--reset", "100", "--latency-ms", "6000", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);

    /* the gateway's lease, alive for the whole test */
    redisReply *x = redisCommand(c, "SET %sgw:lease:%s 1 PX 600000", prefix, LEASE);
    assert_true(x != NULL && x->type != REDIS_REPLY_ERROR);
    freeReplyObject(x);
    push_one(c, prefix, "plain", NULL);
    const struct llmq_job_gate sync_gate = {.lease = LEASE};
    push_one(c, prefix, "sync", &sync_gate);
    push_one(c, prefix, "gone", NULL);

    int port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *args[] = {"--max-attempts", "1", "--metrics-port", port_s, "--metrics-host",
                          "127.0.0.1",      NULL};
    pid_t w = worker_start(account, &sim, log, args);

    /* "gone" ends elsewhere while its call is in flight */
    long long deadline = llmq_test_now_ms() + DEADLINE_MS;
    char st[32] = "";
    while (llmq_test_now_ms() < deadline) {
        job_state(c, prefix, "gone", st, sizeof(st));
        if (strcmp(st, "running") == 0 || has_result(c, prefix, "gone"))
            break;
        usleep(20000);
    }
    assert_string_equal(st, "running");
    const char *fin[] = {prefix, "gone", "cancelled", "", "cancelled"};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_JOB_FINISH, 1, 5, fin, NULL, &err);
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1); /* it ended now, its call still under way */
    freeReplyObject(r);

    /* every call answered and settled: nothing pending, all three ended */
    double dispatched = -1, dead = -1;
    long long pending = -1;
    while (llmq_test_now_ms() < deadline) {
        struct worker_page pg = worker_http_get(port, "/metrics");
        dispatched = pg.body != NULL
                         ? worker_metric_sum(pg.body, "llmq_jobs_dispatched_total", account)
                         : -1;
        dead = pg.body != NULL ? worker_metric_sum(pg.body, "llmq_jobs_dead_total", account) : -1;
        free(pg.body);
        pending = worker_pending(c, prefix, "normal");
        if (dispatched == 3 && pending == 0 && has_result(c, prefix, "plain") &&
            has_result(c, prefix, "sync"))
            break;
        usleep(50000);
    }
    long long letters = llmq_test_redis_int(c, "XLEN %sdead", prefix);
    print_message("dispatched %g, pending %lld; llmq_jobs_dead_total %g, entries of P dead %lld\n",
                  dispatched, pending, dead, letters);
    assert_true(dispatched == 3);
    assert_int_equal(pending, 0);
    assert_int_equal(letters, 1);
    assert_true(dead == 1);

    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 60000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);
    /* the API saw all three */
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    free(e);
    assert_int_equal(n, 3);
    /* the log says what became of each, and the summary counts one */
    assert_int_equal(worker_log_count(log, "job=plain dead-lettered: "), 1);
    assert_int_equal(worker_log_count(log, "job=sync ended dead, kept out of the dead letters"), 1);
    assert_int_equal(
        worker_log_count(log, "job=gone not dead-lettered: the job had ended meanwhile"), 1);
    assert_int_equal(worker_log_count(log, "dead 1,"), 1);
    unlink(log);
    redisFree(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dead_counted_when_written),
    };
    return cmocka_run_group_tests_name("worker_dead_letter_count", tests, NULL, NULL);
}
