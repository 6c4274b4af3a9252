/* Cancel and deadlines of offloaded jobs, end to end: real Redis, a real
 * llmq-worker, openai-sim's Batch API held (--batch-hold: its batches make
 * no progress until the test sends SIGUSR2), so what happens while the
 * provider has a batch is decided by the test, not by timing
 * (docs/DESIGN.md §3.10).
 *   - `llmq offload cancel --job` of one job of a submitted provider batch:
 *     the job ends cancelled at once; the batch runs on; its line comes
 *     back in the output file and is ignored (no result stored, the job
 *     stays cancelled), the others' are stored;
 *   - `llmq offload cancel ID` of a provider batch: its jobs end cancelled
 *     and the batch is cancelled at the provider (cancelling → cancelled);
 *     cancelling every job of a batch one by one does the same;
 *   - a staged job whose deadline passes ends dead (reason expired, as a
 *     live job past its deadline) and joins no provider batch; offloaded
 *     jobs whose deadlines pass end the same way, and a batch left with
 *     none is cancelled at the provider; a job whose deadline passed while
 *     the provider ran it gets no result from its line when it comes back.
 * Deadlines are at least the 24 h window away at enqueue, so the test moves
 * a job's deadline_ms (and its entry in P pbd, the index the worker sweeps)
 * into the past: time passing, not a different path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include <sys/time.h>

#include "account.h"
#include "offload_support.h"

static long long wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void enqueue_ids(struct llmq_test_account *a, const char *const *ids, int n)
{
    const char *path = "/tmp/offload-cancel.jsonl";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"" MINI "\",\"messages\":[{\"role\":\"user\",\"content\":"
                "\"tell me about %s\"}]},\"llmq\":{\"completion_window\":\"24h\"}}\n",
                ids[i], ids[i]);
    fclose(f);
    worker_enqueue(a->name, path);
}

static const char *pb_field(struct llmq_test_account *a, const char *id, const char *name)
{
    static char v[512];
    redisReply *r = redisCommand(a->c, "HGET %spb:%s %s", a->prefix, id, name);
    snprintf(v, sizeof(v), "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    return v;
}

/* Waits until the account's provider batch number k (0: the first made)
 * exists and is in state; its llmq id into out. */
static void wait_batch(struct llmq_test_account *a, size_t k, const char *state, char out[64])
{
    for (;;) {
        redisReply *r = redisCommand(a->c, "ZRANGE %spbl 0 -1", a->prefix);
        int found = 0;
        if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > k) {
            snprintf(out, 64, "%s", r->element[k]->str);
            found = strcmp(pb_field(a, out, "state"), state) == 0;
        }
        freeReplyObject(r);
        if (found)
            return;
        usleep(50 * 1000);
    }
}

/* The provider's batch bid as the sim serves it (new). */
static json_t *sim_batch(const struct sim_proc *sim, const char *bid)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/batches/%s", bid);
    return offload_sim_list(sim, path);
}

/* The content of the sim's file fid (new string). */
static char *sim_file(const struct sim_proc *sim, const char *fid)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/files/%s/content", fid);
    const char *h[] = {"Authorization: Bearer " WORKER_TEST_KEY, NULL};
    struct sim_resp r;
    sim_http(sim, path, NULL, h, &r);
    assert_int_equal(r.status, 200);
    char *text = strdup(r.body ? r.body : "");
    sim_resp_free(&r);
    return text;
}

static struct cli_run offload_cli(struct llmq_test_account *a, const char *what, const char *id)
{
    const char *job[] = {"llmq", "offload", "cancel", "--job", id, NULL};
    const char *batch[] = {"llmq", "offload", "cancel", id, NULL};
    return cli_run(a->name, strcmp(what, "job") == 0 ? job : batch);
}

/* The error code of job id's result line ("" when it has none; static). */
static const char *result_code(struct llmq_test_account *a, const char *id, int *offloaded)
{
    static char code[64];
    code[0] = '\0';
    char *text = offload_result(a->c, a->prefix, id);
    assert_non_null(text);
    json_t *l = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(l);
    const char *c = json_string_value(json_object_get(json_object_get(l, "error"), "code"));
    snprintf(code, sizeof(code), "%s", c ? c : "");
    *offloaded = json_is_true(json_object_get(l, "offloaded"));
    json_decref(l);
    return code;
}

/* Moves job id's deadline into the past: in its hash and, when index, in
 * the deadline index the worker sweeps. */
static void deadline_passes(struct llmq_test_account *a, const char *id, int index)
{
    char past[24];
    snprintf(past, sizeof(past), "%lld", wall_ms() - 1000);
    redisReply *r = redisCommand(a->c, "HSET %sjob:%s deadline_ms %s", a->prefix, id, past);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    if (index) {
        r = redisCommand(a->c, "ZADD %spbd %s %s", a->prefix, past, id);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        freeReplyObject(r);
    }
}

static void cancelled_job_line_ignored(void **state)
{
    (void)state;
    struct sim_proc sim;
    const char *sim_args[] = {"--batch-hold", "--batch-pace-ms", "100", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offcjob");
    offload_policy_all(a.name, MINI, 100);
    const char *ids[] = {"c-0", "c-1", "c-2", "c-3"};
    enqueue_ids(&a, ids, 4);
    pid_t w = offload_worker_start(a.name, &sim, "offcjob", 0, NULL);
    char pb[64];
    wait_batch(&a, 0, "submitted", pb);
    struct cli_run r = offload_cli(&a, "job", "c-0");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "job c-0: cancelled"));
    cli_free(&r);
    int off = -1;
    assert_string_equal(result_code(&a, "c-0", &off), "cancelled");
    assert_string_equal(pb_field(&a, pb, "cancel"), ""); /* three jobs are left in it */
    kill(sim.pid, SIGUSR2);                              /* the provider runs the batch */
    char *rest[] = {"c-1", "c-2", "c-3"};
    offload_wait_done(a.c, a.prefix, rest, 3);
    offload_worker_stop(w);
    /* the provider answered c-0 too: its line came back and was ignored */
    json_t *b = sim_batch(&sim, pb_field(&a, pb, "batch_id"));
    assert_string_equal(sim_jstr(b, "status"), "completed");
    char *out = sim_file(&sim, sim_jstr(b, "output_file_id"));
    assert_non_null(strstr(out, "\"custom_id\":\"c-0\""));
    free(out);
    json_decref(b);
    assert_string_equal(result_code(&a, "c-0", &off), "cancelled");
    assert_false(off);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(result_code(&a, rest[i], &off), "");
        assert_true(off);
    }
    assert_string_equal(pb_field(&a, pb, "done"), "3");
    assert_int_equal(sim_proc_stop(&sim), 0);
    llmq_test_account_close(&a);
}

/* Waits until provider batch pb ended and checks the sim cancelled it. */
static void assert_cancelled_at_provider(struct llmq_test_account *a, const struct sim_proc *sim,
                                         const char *pb)
{
    for (;;) {
        if (strcmp(pb_field(a, pb, "state"), "ended") == 0)
            break;
        usleep(50 * 1000);
    }
    assert_string_equal(pb_field(a, pb, "cancel_sent"), "1");
    assert_string_equal(pb_field(a, pb, "status"), "cancelled");
    json_t *b = sim_batch(sim, pb_field(a, pb, "batch_id"));
    assert_string_equal(sim_jstr(b, "status"), "cancelled");
    json_decref(b);
}

static void cancel_provider_batches(void **state)
{
    (void)state;
    struct sim_proc sim;
    const char *sim_args[] = {"--batch-hold", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offcbatch");
    offload_policy_all(a.name, MINI, 100);
    pid_t w = offload_worker_start(a.name, &sim, "offcbatch", 0, NULL);
    /* a whole provider batch, by its llmq id */
    const char *b_ids[] = {"b-0", "b-1", "b-2"};
    enqueue_ids(&a, b_ids, 3);
    char pb[64];
    wait_batch(&a, 0, "submitted", pb);
    struct cli_run r = offload_cli(&a, "batch", pb);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "3 jobs cancelled"));
    cli_free(&r);
    assert_cancelled_at_provider(&a, &sim, pb);
    int off;
    for (int i = 0; i < 3; i++)
        assert_string_equal(result_code(&a, b_ids[i], &off), "cancelled");
    /* every job of a batch, one by one */
    const char *k_ids[] = {"k-0", "k-1"};
    enqueue_ids(&a, k_ids, 2);
    char pb2[64];
    wait_batch(&a, 1, "submitted", pb2);
    for (int i = 0; i < 2; i++) {
        r = offload_cli(&a, "job", k_ids[i]);
        assert_int_equal(r.status, 0);
        cli_free(&r);
    }
    assert_cancelled_at_provider(&a, &sim, pb2);
    for (int i = 0; i < 2; i++)
        assert_string_equal(result_code(&a, k_ids[i], &off), "cancelled");
    /* an unknown id is a usage error */
    r = offload_cli(&a, "batch", "pb-nope");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "no provider batch pb-nope"));
    cli_free(&r);
    offload_worker_stop(w);
    assert_int_equal(sim_proc_stop(&sim), 0);
    llmq_test_account_close(&a);
}

/* The reason job id was dead-lettered with (static; "" none). */
static const char *dead_reason(struct llmq_test_account *a, const char *id)
{
    static char out[512];
    out[0] = '\0';
    redisReply *d = redisCommand(a->c, "XRANGE %sdead - +", a->prefix);
    for (size_t i = 0; d != NULL && i < d->elements; i++) {
        const redisReply *fv = d->element[i]->element[1];
        const char *jid = NULL, *reason = NULL;
        for (size_t k = 0; k + 1 < fv->elements; k += 2) {
            if (strcmp(fv->element[k]->str, "id") == 0)
                jid = fv->element[k + 1]->str;
            else if (strcmp(fv->element[k]->str, "reason") == 0)
                reason = fv->element[k + 1]->str;
        }
        if (jid != NULL && reason != NULL && strcmp(jid, id) == 0)
            snprintf(out, sizeof(out), "%s", reason);
    }
    freeReplyObject(d);
    return out;
}

static void deadlines_of_staged_and_offloaded_jobs(void **state)
{
    (void)state;
    struct sim_proc sim;
    const char *sim_args[] = {"--batch-hold", "--batch-pace-ms", "100", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offdeadline");
    offload_policy_all(a.name, MINI, 100);
    /* staged, no worker yet: its deadline passes before any batch */
    const char *s_ids[] = {"s-0"};
    enqueue_ids(&a, s_ids, 1);
    deadline_passes(&a, "s-0", 1);
    pid_t w = offload_worker_start(a.name, &sim, "offdeadline", 0, NULL);
    char *s0[] = {"s-0"};
    offload_wait_all(a.c, a.prefix, s0, 1);
    assert_string_equal(dead_reason(&a, "s-0"), "expired");
    int off;
    assert_string_equal(result_code(&a, "s-0", &off), "expired");
    /* offloaded, every job of the batch past its deadline: dead, and the
     * provider batch cancelled */
    const char *x_ids[] = {"x-0", "x-1"};
    enqueue_ids(&a, x_ids, 2);
    char pb[64];
    wait_batch(&a, 0, "submitted", pb);
    redisReply *n = redisCommand(a.c, "ZCARD %spbl", a.prefix);
    assert_int_equal(n->integer, 1); /* s-0 joined none */
    freeReplyObject(n);
    deadline_passes(&a, "x-0", 1);
    deadline_passes(&a, "x-1", 1);
    assert_cancelled_at_provider(&a, &sim, pb);
    for (int i = 0; i < 2; i++)
        assert_string_equal(dead_reason(&a, x_ids[i]), "expired");
    /* a deadline that passes while the provider runs the job: its line is
     * ignored when it comes back */
    const char *d_ids[] = {"d-0", "d-1"};
    enqueue_ids(&a, d_ids, 2);
    char pb2[64];
    wait_batch(&a, 1, "submitted", pb2);
    deadline_passes(&a, "d-0", 0); /* not yet swept: the line comes back first */
    kill(sim.pid, SIGUSR2);
    char *d[] = {"d-0", "d-1"};
    offload_wait_done(a.c, a.prefix, d, 2);
    offload_worker_stop(w);
    json_t *b = sim_batch(&sim, pb_field(&a, pb2, "batch_id"));
    assert_string_equal(sim_jstr(b, "status"), "completed");
    char *out = sim_file(&sim, sim_jstr(b, "output_file_id"));
    assert_non_null(strstr(out, "\"custom_id\":\"d-0\""));
    free(out);
    json_decref(b);
    assert_string_equal(dead_reason(&a, "d-0"), "expired");
    assert_string_equal(result_code(&a, "d-0", &off), "expired");
    assert_false(off);
    assert_string_equal(result_code(&a, "d-1", &off), "");
    assert_true(off);
    assert_int_equal(sim_proc_stop(&sim), 0);
    llmq_test_account_close(&a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancelled_job_line_ignored),
        cmocka_unit_test(cancel_provider_batches),
        cmocka_unit_test(deadlines_of_staged_and_offloaded_jobs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
