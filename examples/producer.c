/* A producer in a few lines: enqueue requests with llmq, then wait for their
 * results. Uses only the public API (llmq/llmq.h).
 *
 * usage: producer [JOB_ID_PREFIX [WAIT_MS]]
 *   LLMQ_REDIS_URL (default redis://127.0.0.1:6379/0), LLMQ_ACCOUNT (default
 *   "default"). Enqueues three chat requests with ids PREFIX-1..3 (default
 *   prefix "example"); running it twice enqueues nothing new, since ids are
 *   idempotency keys. Then waits up to WAIT_MS (default 0: no wait) and prints
 *   each Batch output line as it arrives.
 * Exit: 0 all done, 1 error, 2 some jobs still running at the deadline,
 *   3 some job was dead-lettered. */
#include <llmq/llmq.h>
#include <stdio.h>
#include <stdlib.h>

#define N_JOBS 3

struct tally {
    int done;
    int dead;
};

static void on_result(const struct llmq_result *r, void *userdata)
{
    struct tally *t = userdata;
    t->done++;
    t->dead += r->dead;
    printf("%s\n", r->line); /* r->line is borrowed: copy it to keep it */
}

int main(int argc, char **argv)
{
    const char *prefix = argc > 1 ? argv[1] : "example";
    long long wait_ms = argc > 2 ? strtoll(argv[2], NULL, 10) : 0;
    struct llmq_error err = {0};
    struct llmq_producer *p = NULL;
    if (llmq_producer_open(NULL, &p, &err) != LLMQ_OK) {
        fprintf(stderr, "producer: %s\n", err.msg);
        return 1;
    }
    static const char *const questions[N_JOBS] = {
        "What is a token bucket?", "Name three prime numbers.", "Say hello in French."};
    char ids[N_JOBS][64], bodies[N_JOBS][256];
    struct llmq_request reqs[N_JOBS];
    struct llmq_enqueue_result res[N_JOBS];
    for (int i = 0; i < N_JOBS; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%s-%d", prefix, i + 1);
        snprintf(bodies[i], sizeof(bodies[i]),
                 "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":"
                 "\"%s\"}],\"max_completion_tokens\":64}",
                 questions[i]);
        reqs[i] = (struct llmq_request){.url = "/v1/chat/completions",
                                        .body = bodies[i],
                                        .options = {.job_id = ids[i], .max_attempts = 3}};
    }
    if (llmq_producer_enqueue_many(p, reqs, N_JOBS, res, &err) != LLMQ_OK) {
        fprintf(stderr, "producer: %s\n", err.msg);
        llmq_producer_close(p);
        return 1;
    }
    for (int i = 0; i < N_JOBS; i++)
        fprintf(stderr, "%s %s (cost %lld tokens)\n", res[i].job_id,
                res[i].rc == LLMQ_OK ? "enqueued" : res[i].state, res[i].cost_tokens);
    int code = 0;
    if (wait_ms > 0) {
        const char *wait_ids[N_JOBS] = {ids[0], ids[1], ids[2]};
        struct tally t = {0};
        enum llmq_rc rc =
            llmq_producer_wait(p, wait_ids, N_JOBS, wait_ms, on_result, &t, NULL, &err);
        if (rc != LLMQ_OK)
            fprintf(stderr, "producer: %s\n", err.msg);
        code = rc == LLMQ_ETIMEOUT ? 2 : rc != LLMQ_OK ? 1 : t.dead > 0 ? 3 : 0;
    }
    llmq_producer_close(p);
    return code;
}
