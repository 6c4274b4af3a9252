/* The retry delay the worker logs is the delay that happens: measured at the
 * server (openai-sim's access log, admission times) between the attempts of
 * a job that gets a 500 each time, against the "retry ... in D ms" lines of
 * the worker's JSON log. The worker is blocked on its wake-up read when the
 * retry is settled; it must still wake when the delayed job is due (the
 * dispatch reply's earliest due time bounds its sleep). The bound
 * gap <= D + 300 ms is a correctness bound (the bug made gaps ~5 s), not a
 * performance threshold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define MAX_RETRIES 8

/* The delays (ms) logged for job id, in order; returns how many. */
static int logged_delays(const char *log, const char *id, long long *delays)
{
    FILE *f = fopen(log, "r");
    char line[8192];
    int n = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL && n < MAX_RETRIES) {
        json_t *o = json_loads(line, 0, NULL);
        const char *job = json_string_value(json_object_get(o, "job"));
        const char *msg = json_string_value(json_object_get(o, "msg"));
        long long d;
        int attempt, of;
        if (job != NULL && msg != NULL && strcmp(job, id) == 0 &&
            sscanf(msg, "retry (attempt %d of %d) in %lld ms", &attempt, &of, &d) == 3)
            delays[n++] = d;
        json_decref(o);
    }
    if (f != NULL)
        fclose(f);
    return n;
}

static void test_retry_gap_is_the_logged_delay(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], id[64];
    llmq_test_unique_name(account, sizeof(account), "rtime");
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-rtime-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-rtime-%d.log", (int)getpid());
    struct sim_proc sim;
    const char *sim_args[] = {"--fail-500", "100", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    worker_write_jobs(jobs, "rt", 1, "gpt-4o-mini", 20, "{\"max_attempts\":4}");
    worker_enqueue(account, jobs);
    /* Backoff ceilings 1 s, 2 s, 2 s: every delay well below the 5 s the
     * wake-up read blocks. */
    const char *args[] = {"--log-format",
                          "json",
                          "--backoff-base-ms",
                          "1000",
                          "--backoff-cap-ms",
                          "2000",
                          "--exit-when-idle-ms",
                          "1500",
                          NULL};
    assert_int_equal(worker_wait(worker_start(account, &sim, log, args), 120000), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    snprintf(id, sizeof(id), "rt-0");
    long long delays[MAX_RETRIES];
    int nd = logged_delays(log, id, delays);
    size_t n = 0;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    long long t[MAX_RETRIES + 1];
    int nt = 0;
    for (size_t i = 0; i < n && nt <= MAX_RETRIES; i++)
        if (strcmp(e[i].job, id) == 0) {
            assert_int_equal(e[i].status, 500);
            t[nt++] = e[i].t_ms;
        }
    free(e);
    assert_int_equal(nt, 4); /* every attempt reached the API */
    assert_int_equal(nd, 3); /* three retries logged, the fourth attempt dead-lettered */
    for (int i = 0; i < nd; i++) {
        long long gap = t[i + 1] - t[i];
        print_message("retry %d: logged %lld ms, gap at the server %lld ms\n", i + 1, delays[i],
                      gap);
        assert_true(gap <= delays[i] + 300);
        assert_true(gap + 20 >= delays[i]); /* never sooner than logged */
    }
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_gap_is_the_logged_delay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
