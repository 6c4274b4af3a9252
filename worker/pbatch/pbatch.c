/* Offload's steps in llmq-worker (pbatch.h; docs/DESIGN.md §3.10).
 *
 * One struct worker_pbatch per account holds at most one provider batch at
 * a time (the one this worker has the lease of) and walks it through the
 * states of lua/pbatch_step.lua, one Redis call or one HTTP call at a time,
 * each continuing in the callback of the one before: nothing blocks the
 * loop. A step whose lease another worker took (LLMQ_ECONFLICT), a lost
 * Redis reply or a failed provider call ends this worker's turn: the batch
 * stays recorded where it was and is looked at again when its lease or its
 * next poll comes (P pba). The state here is a copy for the turn only.
 *
 * While a provider call is in flight its lease is renewed every third of
 * --offload-lease-ms (a step recorded in the same state), so a provider
 * slower than the lease never lets a second worker take the batch over
 * and send the same call again; a worker that dies stops renewing and is
 * taken over as before.
 *
 * A batch the provider failed as a whole (validation, or a refused upload
 * or create) ends "failed" (lua/pbatch_end.lua): the jobs the provider named
 * (its errors' line numbers, looked up in the input file it holds) are
 * dead-lettered the second time, the rest go back. A batch marked cancel
 * (every job of it cancelled, or `llmq offload cancel`) is cancelled at the
 * provider (POST /v1/batches/{id}/cancel), or ended unsubmitted when it
 * never was. A result file over --offload-max-file-bytes ends the batch,
 * its jobs staged again with an attempt counted: never a download loop.
 * A result file is never whole in memory: it is spooled to an anonymous
 * temporary file as it downloads (the HTTP client keeps no body) and read
 * back a line at a time to be settled, at most PBATCH_LINES_PER_SETTLE lines
 * and about PBATCH_SETTLE_BYTES a script call. A line longer than
 * --max-response-bytes + PBATCH_LINE_SLACK (the live limit and room for the
 * line's own fields) is not kept: its job is dead-lettered with that reason
 * (response_too_big, as a live response over the limit) and the batch goes
 * on with the next line.
 *
 * Test hook: LLMQ_TEST_PBATCH_CRASH=after_upload|after_create makes the
 * worker SIGKILL itself right after that provider call answered, before
 * it is recorded (the window the takeover must cover); after_settle, once
 * the first lines of a collection are settled and before the batch ends. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "call.h"
#include "http/http.h"
#include "jobs/job_pack.h"
#include "pbatch/pbatch.h"
#include "pbatch/pbatch_file.h"
#include "pbatch/pbatch_target.h"
#include "redis/keys.h"
#include "redis/reply_read.h"
#include "redis/script.h"
#include "worker.h"

#define PBATCH_TICK_MIN_MS 250
#define PBATCH_TICK_MAX_MS 2000
#define PBATCH_BODIES_PER_CALL 500
#define PBATCH_LINES_PER_SETTLE 200
#define PBATCH_SETTLE_BYTES (8 << 20) /* result line bytes a settle call takes, about */
#define PBATCH_LINE_SLACK 65536       /* a line's fields beyond its response body */
#define PBATCH_BODY_JSON 0            /* provider(): the answer parsed as JSON */
#define PBATCH_BODY_TEXT 1            /* ... the answer's text, in memory (the input file) */
#define PBATCH_BODY_SPOOL 2           /* ... written to pb->spool[pb->which] as it comes */
#define PBATCH_RETRY_MS 5000          /* a failed provider call is tried again this much later */
#define PBATCH_NAMED_MAX 100          /* jobs a failed batch's errors may name */

struct worker_pbatch;
typedef void pbatch_next_fn(struct worker_pbatch *pb);

struct worker_pbatch {
    struct worker_account *a;
    ev_timer tick;
    int busy;    /* a batch is in hand (a call in flight) */
    int stopped; /* draining: no new turn */
    int64_t idle_ms;
    const char *crash_at; /* LLMQ_TEST_PBATCH_CRASH */
    /* P offload, P pba, P pbsi: while none exists the account has nothing
     * offload may do (on_tick) */
    char used_keys[3][LLMQ_KEY_FIXED_MAX];
    int used; /* one of them existed once: ticks go straight to the script */
    /* the endpoints whose batches this worker may take (pbatch_next ARGV[3]):
     * names it holds keys for, an empty first name for the implicit one */
    char serves[sizeof(((struct llmq_worker_config *)0)->serves)];
    /* the batch in hand */
    char id[64], state[16], model[201], url[64], status[32];
    struct llmq_pbatch_target target; /* its endpoint */
    char file_id[128], batch_id[128], out_id[128], err_id[128];
    int64_t n, poll_ms, polls, max_bytes;
    int cancel, cancel_sent; /* to be cancelled at the provider; the cancel was sent */
    pbatch_next_fn *then;    /* what follows a recorded step */
    ev_timer renew;          /* renews the lease while a provider call is in flight */
    /* a failed batch: the provider's reason and the lines its errors name */
    char fail_why[256];
    int64_t fail_line[PBATCH_NAMED_MAX];
    char fail_msg[PBATCH_NAMED_MAX][160];
    int n_fail;
    /* building the input file */
    struct llmq_pbatch_buf file;
    int64_t next_index, keep;
    int trim; /* 1: a new batch (its job list is cut to what fits); 0: a rebuild */
    /* collecting: the output and error files, spooled to anonymous
     * temporary files (removed when closed) and read back line by line */
    FILE *spool[2];
    int which;
    struct llmq_job_packer *packer;
};

static void turn_end(struct worker_pbatch *pb);
static void run(struct worker_pbatch *pb);

/* --- the turn ------------------------------------------------------------ */

static void arm(struct worker_pbatch *pb, int64_t ms)
{
    ev_timer_stop(pb->a->w->loop, &pb->tick);
    ev_timer_set(&pb->tick, (double)ms / 1000.0, 0.0);
    ev_timer_start(pb->a->w->loop, &pb->tick);
}

static void batch_reset(struct worker_pbatch *pb)
{
    llmq_pbatch_buf_free(&pb->file);
    for (int i = 0; i < 2; i++) {
        if (pb->spool[i] != NULL)
            fclose(pb->spool[i]);
        pb->spool[i] = NULL;
    }
    pb->id[0] = pb->state[0] = pb->status[0] = pb->fail_why[0] = '\0';
    pb->cancel = pb->cancel_sent = pb->n_fail = 0;
    pb->file_id[0] = pb->batch_id[0] = pb->out_id[0] = pb->err_id[0] = '\0';
    memset(&pb->target, 0, sizeof(pb->target));
    pb->which = 0;
    pb->then = NULL;
}

/* This worker's turn with the batch ends (done, or left for later). */
static void turn_end(struct worker_pbatch *pb)
{
    batch_reset(pb);
    pb->busy = 0;
    if (!pb->stopped)
        arm(pb, 1); /* more may be due: ask again soon */
}

static void crash_hook(struct worker_pbatch *pb, const char *at)
{
    if (pb->crash_at != NULL && strcmp(pb->crash_at, at) == 0) {
        LLMQ_LOG(LLMQ_LOG_WARN, "offload %s: LLMQ_TEST_PBATCH_CRASH=%s: killing myself", pb->id,
                 at);
        raise(SIGKILL);
    }
}

/* Runs script id with the account prefix as KEYS[1] and argv[0..argc);
 * cb(reply, pb) runs once (reply NULL: Redis lost). On a failed send the
 * turn ends. */
static void script(struct worker_pbatch *pb, enum llmq_script_id id, int argc, const char **argv,
                   const size_t *argvlen, llmq_script_cb *cb)
{
    const char *av[1 + PBATCH_LINES_PER_SETTLE * 7 + 8];
    size_t al[1 + PBATCH_LINES_PER_SETTLE * 7 + 8];
    av[0] = pb->a->prefix;
    al[0] = strlen(pb->a->prefix);
    for (int i = 0; i < argc; i++) {
        av[i + 1] = argv[i];
        al[i + 1] = argvlen ? argvlen[i] : strlen(argv[i]);
    }
    redisAsyncContext *ac = llmq_redis_async_context(pb->a->cmd);
    if (ac == NULL || llmq_script_run_async(ac, id, 1, argc + 1, av, al, cb, pb) != LLMQ_OK)
        turn_end(pb);
}

/* A script's error reply or a lost connection ends the turn, logged. */
static int script_failed(struct worker_pbatch *pb, const redisReply *r, const char *what)
{
    if (r != NULL && r->type != REDIS_REPLY_ERROR)
        return 0;
    LLMQ_LOG(r != NULL && strstr(r->str, "LLMQ_ECONFLICT") ? LLMQ_LOG_INFO : LLMQ_LOG_WARN,
             "offload %s: %s: %s", pb->id[0] ? pb->id : "-", what,
             r != NULL ? r->str : "redis connection lost");
    turn_end(pb);
    return 1;
}

/* --- recording steps (lua/pbatch_step.lua) --------------------------------- */

static void on_step(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_pbatch *pb = privdata;
    if (script_failed(pb, r, "recording a step"))
        return;
    pbatch_next_fn *then = pb->then;
    pb->then = NULL;
    if (then != NULL)
        then(pb);
    else
        turn_end(pb);
}

/* Records the batch's move from its state to state to (field/value pairs
 * kv[0..nkv), keep: jobs kept or -1), then runs then (NULL: the turn ends).
 * next_ms > 0 gives the lease up: a worker looks again in next_ms. */
static void step(struct worker_pbatch *pb, const char *to, int64_t next_ms, int64_t keep,
                 const char **kv, int nkv, pbatch_next_fn *then)
{
    char next[24], lease[24], kp[24], from[sizeof(pb->state)];
    snprintf(from, sizeof(from), "%s", pb->state);
    snprintf(next, sizeof(next), "%lld", (long long)next_ms);
    snprintf(lease, sizeof(lease), "%lld", (long long)pb->a->w->cfg->offload_lease_ms);
    if (keep >= 0)
        snprintf(kp, sizeof(kp), "%lld", (long long)keep);
    else
        kp[0] = '\0';
    const char *argv[7 + 16] = {pb->id, pb->a->w->cfg->consumer, from, to, next, lease, kp};
    for (int i = 0; i < nkv && i < 16; i++)
        argv[7 + i] = kv[i];
    snprintf(pb->state, sizeof(pb->state), "%s", to);
    pb->then = then;
    script(pb, LLMQ_SCRIPT_PBATCH_STEP, 7 + nkv, argv, NULL, on_step);
}

static void on_ended(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_pbatch *pb = privdata;
    if (script_failed(pb, r, "ending the batch"))
        return;
    LLMQ_LOG(LLMQ_LOG_INFO, "offload %s (%s): ended, %lld jobs back to staging, %lld dead", pb->id,
             pb->batch_id[0] ? pb->batch_id : "never submitted",
             llmq_reply_int_or(llmq_reply_at(r, 0), 0), llmq_reply_int_or(llmq_reply_at(r, 1), 0));
    turn_end(pb);
}

/* Ends the batch: its jobs without an answer go back to staging, as mode
 * says (lua/pbatch_end.lua: "" none counted, "attempt", "failed"), reason
 * logged on each; named[0..2*n_named) are job id, reason pairs the provider
 * named (mode failed). */
static void end_batch(struct worker_pbatch *pb, const char *reason, const char *mode,
                      const char **named, int n_named)
{
    const char *argv[4 + 2 * PBATCH_NAMED_MAX] = {pb->id, pb->a->w->cfg->consumer, reason, mode};
    for (int i = 0; i < 2 * n_named && i < 2 * PBATCH_NAMED_MAX; i++)
        argv[4 + i] = named[i];
    script(pb, LLMQ_SCRIPT_PBATCH_END, 4 + 2 * n_named, argv, NULL, on_ended);
}

/* The limit a token_limit_exceeded message names ("... Limit: 2,000,000
 * enqueued tokens ...") as decimal text into out (n bytes), or "" when it
 * names none. */
static void queue_limit_named(const char *msg, char *out, size_t n)
{
    const char *p = msg ? strstr(msg, "Limit: ") : NULL;
    size_t k = 0;
    out[0] = '\0';
    if (p == NULL)
        return;
    for (p += 7; (*p >= '0' && *p <= '9') || *p == ','; p++)
        if (*p != ',' && k + 1 < n && k < 18)
            out[k++] = *p;
    out[k] = '\0';
    if (strncmp(p, " enqueued tokens", 16) != 0)
        out[0] = '\0';
}

/* Ends a batch the provider refused for its enqueued-token limit: its jobs
 * back to staging without an attempt, the model's batch queue taught the
 * limit (lua/pbatch_end.lua). */
static void end_batch_queue_full(struct worker_pbatch *pb, const char *reason, const char *msg)
{
    char limit[24];
    queue_limit_named(msg, limit, sizeof(limit));
    const char *argv[] = {pb->id, pb->a->w->cfg->consumer, reason, "limit", limit};
    script(pb, LLMQ_SCRIPT_PBATCH_END, 5, argv, NULL, on_ended);
}

/* --- the provider's API ---------------------------------------------------- */

typedef void pbatch_http_fn(struct worker_pbatch *pb, struct llmq_http_response *resp,
                            json_t *answer);

struct pbatch_http {
    struct worker_pbatch *pb;
    pbatch_http_fn *fn;
    int raw; /* PBATCH_BODY_*: how the answer is handed over */
};

/* A renewal's answer: only logged. A lease another worker holds (the
 * renewal came too late) shows again in the step after the call, which then
 * ends this worker's turn (LLMQ_ECONFLICT). */
static void on_renewed(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    (void)privdata;
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        LLMQ_LOG(LLMQ_LOG_WARN, "offload: renewing a lease while the provider answers: %s",
                 r != NULL ? r->str : "redis connection lost");
}

/* Every third of the lease while a provider call is in flight: the lease is
 * extended (a step from the state to itself), so no other worker takes the
 * batch over and repeats the call. */
static void on_renew(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct worker_pbatch *pb = t->data;
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)pb->a->w->cfg->offload_lease_ms);
    const char *argv[] = {pb->a->prefix, pb->id, pb->a->w->cfg->consumer, pb->state, pb->state, "0",
                          lease,         ""};
    redisAsyncContext *ac = llmq_redis_async_context(pb->a->cmd);
    if (ac != NULL)
        (void)llmq_script_run_async(ac, LLMQ_SCRIPT_PBATCH_STEP, 1, 8, argv, NULL, on_renewed, pb);
    LLMQ_LOG(LLMQ_LOG_DEBUG, "offload %s: the provider is slow: lease renewed in %s", pb->id,
             pb->state);
}

static void on_http(struct llmq_http_response *resp, void *privdata)
{
    struct pbatch_http *h = privdata;
    struct worker_pbatch *pb = h->pb;
    ev_timer_stop(pb->a->w->loop, &pb->renew);
    pbatch_http_fn *fn = h->fn;
    int raw = h->raw;
    free(h);
    if (resp->outcome == LLMQ_HTTP_CANCELLED && !resp->aborted) { /* the worker is stopping */
        batch_reset(pb);
        pb->busy = 0;
        return;
    }
    json_t *answer = NULL;
    if (raw == PBATCH_BODY_JSON && resp->outcome == LLMQ_HTTP_OK)
        answer = json_loadb(resp->body, resp->body_len, 0, NULL);
    fn(pb, resp, answer);
    json_decref(answer);
}

/* A piece of a result file as it downloads (llmq_http_data_cb): appended
 * to the spool. A failed write aborts the download (tried again later). */
static int spool_write(const char *data, size_t len, long status, void *privdata)
{
    struct worker_pbatch *pb = privdata;
    FILE *f = pb->spool[pb->which];
    if (status != 200 || f == NULL)
        return 0; /* an error's body: not a file's content */
    if (fwrite(data, 1, len, f) != len) {
        LLMQ_LOG(LLMQ_LOG_WARN, "offload %s: writing a result file to a temporary file: %s", pb->id,
                 strerror(errno));
        return 1;
    }
    return 0;
}

/* Sends a GET (body NULL) or POST of path to the provider; fn runs with the
 * response and its JSON (NULL when none); raw (PBATCH_BODY_*): the answer
 * as text, or spooled to pb->spool[pb->which] and not kept (a file's
 * content: its own size bound, --offload-max-file-bytes). The lease is
 * renewed until it answers. */
static void provider(struct worker_pbatch *pb, const char *path, const char *body, size_t len,
                     const char *ctype, int raw, pbatch_http_fn *fn)
{
    const struct llmq_worker_config *cfg = pb->a->w->cfg;
    char url[2048];
    const char *key = llmq_pbatch_target_key(&pb->target, cfg, pb->a->cfg->api_key);
    if (key == NULL) { /* pbatch_next hands out only the endpoints it holds */
        LLMQ_LOG(LLMQ_LOG_ERROR, "offload %s: no key for endpoint %s here: left", pb->id,
                 pb->target.ep);
        turn_end(pb);
        return;
    }
    struct pbatch_http *h = malloc(sizeof(*h));
    struct llmq_error err = {0};
    if (h == NULL || llmq_pbatch_target_url(&pb->target, cfg, path, url, sizeof(url)) != 0 ||
        pb->a->w->http == NULL) {
        free(h);
        turn_end(pb);
        return;
    }
    h->pb = pb;
    h->fn = fn;
    h->raw = raw;
    struct llmq_http_request req = {
        .url = url,
        .get = body == NULL,
        .body = body,
        .body_len = len,
        .content_type = ctype,
        .auth =
            llmq_pbatch_target_azure(&pb->target) ? LLMQ_HTTP_AUTH_API_KEY : LLMQ_HTTP_AUTH_BEARER,
        .api_key = key,
        .client_request_id = pb->id,
        .max_body_bytes = raw != PBATCH_BODY_JSON ? (size_t)cfg->offload_max_file_bytes : 0,
    };
    if (raw == PBATCH_BODY_SPOOL) {
        req.on_data = spool_write;
        req.data_privdata = pb;
        req.body_discard = 1;
    }
    if (llmq_http_submit(pb->a->w->http, &req, on_http, h, &err) != LLMQ_OK) {
        LLMQ_LOG(LLMQ_LOG_WARN, "offload %s: %s", pb->id, err.msg);
        free(h);
        turn_end(pb);
        return;
    }
    double every = (double)cfg->offload_lease_ms / 3000.0;
    ev_timer_set(&pb->renew, every, every);
    ev_timer_start(pb->a->w->loop, &pb->renew);
}

/* 1 when a provider call's answer refuses the request itself (a 4xx other
 * than 408, 409, 429): trying it again would get the same. */
static int refused(const struct llmq_http_response *resp)
{
    return resp->outcome == LLMQ_HTTP_OK && resp->status >= 400 && resp->status < 500 &&
           resp->status != 408 && resp->status != 409 && resp->status != 429;
}

/* The provider's error message of resp into why (n bytes). */
static void provider_error(const struct llmq_http_response *resp, const json_t *answer,
                           const char *what, char *why, size_t n)
{
    const char *msg =
        json_string_value(json_object_get(json_object_get(answer, "error"), "message"));
    if (resp->outcome != LLMQ_HTTP_OK)
        snprintf(why, n, "%s: %s", what, llmq_http_outcome_name(resp->outcome));
    else
        snprintf(why, n, "%s: HTTP %ld: %.180s", what, resp->status, msg ? msg : "");
}

/* A provider call failed: a refusal ends the batch (its jobs retried under
 * their attempts), anything else is tried again later in the same state. */
static void call_failed(struct worker_pbatch *pb, struct llmq_http_response *resp,
                        const json_t *answer, const char *what)
{
    char why[256];
    provider_error(resp, answer, what, why, sizeof(why));
    LLMQ_LOG(LLMQ_LOG_WARN, "offload %s: %s", pb->id, why);
    if (refused(resp)) {
        end_batch(pb, why, "failed", NULL, 0);
        return;
    }
    char state[16];
    snprintf(state, sizeof(state), "%s", pb->state);
    step(pb, state, PBATCH_RETRY_MS, -1, NULL, 0, NULL);
}

/* --- creating and polling -------------------------------------------------- */

static void on_created(struct worker_pbatch *pb, struct llmq_http_response *resp, json_t *a)
{
    const char *bid = json_string_value(json_object_get(a, "id"));
    if (resp->outcome != LLMQ_HTTP_OK || resp->status != 200 || bid == NULL) {
        call_failed(pb, resp, a, "creating the provider batch");
        return;
    }
    crash_hook(pb, "after_create");
    snprintf(pb->batch_id, sizeof(pb->batch_id), "%s", bid);
    LLMQ_LOG(LLMQ_LOG_INFO, "offload %s: %lld jobs of %s submitted as provider batch %s", pb->id,
             (long long)pb->n, pb->model, bid);
    const char *kv[] = {"batch_id", pb->batch_id, "status",
                        json_string_value(json_object_get(a, "status"))
                            ? json_string_value(json_object_get(a, "status"))
                            : "validating"};
    step(pb, "submitted", pb->poll_ms, -1, kv, 4, NULL);
}

static void create(struct worker_pbatch *pb)
{
    json_t *body = json_pack("{s:s, s:s, s:s, s:{s:s}}", "input_file_id", pb->file_id, "endpoint",
                             llmq_pbatch_target_line_url(&pb->target, pb->url), "completion_window",
                             "24h", "metadata", "llmq_batch_id", pb->id);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (text == NULL) {
        turn_end(pb);
        return;
    }
    provider(pb, "/v1/batches", text, strlen(text), NULL, 0, on_created);
    free(text);
}

/* Takeover in creating: the batch may have been created (the metadata
 * names this id); if so it is recorded, else created now. */
static void on_batches_listed(struct worker_pbatch *pb, struct llmq_http_response *resp, json_t *a)
{
    if (resp->outcome != LLMQ_HTTP_OK || resp->status != 200 || a == NULL) {
        call_failed(pb, resp, a, "listing the provider's batches");
        return;
    }
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(a, "data"), i, b)
    {
        const char *m =
            json_string_value(json_object_get(json_object_get(b, "metadata"), "llmq_batch_id"));
        const char *bid = json_string_value(json_object_get(b, "id"));
        if (m != NULL && bid != NULL && strcmp(m, pb->id) == 0) {
            LLMQ_LOG(LLMQ_LOG_INFO,
                     "offload %s: found provider batch %s created before a "
                     "takeover: not creating another",
                     pb->id, bid);
            snprintf(pb->batch_id, sizeof(pb->batch_id), "%s", bid);
            const char *kv[] = {"batch_id", pb->batch_id};
            step(pb, "submitted", 1, -1, kv, 2, NULL);
            return;
        }
    }
    create(pb);
}

static void creating(struct worker_pbatch *pb)
{
    provider(pb, "/v1/batches?limit=100", NULL, 0, NULL, 0, on_batches_listed);
}

static void collect(struct worker_pbatch *pb);

/* The input file of a failed batch is in: the lines its errors named are
 * looked up (their custom_id: the job), and the batch ends failed. */
static void on_input_file(struct worker_pbatch *pb, struct llmq_http_response *resp, json_t *a)
{
    if (resp->outcome != LLMQ_HTTP_OK || resp->status != 200) {
        call_failed(pb, resp, a, "reading the failed batch's input file");
        return;
    }
    const char *named[2 * PBATCH_NAMED_MAX];
    char ids[PBATCH_NAMED_MAX][256];
    int k = 0;
    int64_t no = 0;
    const char *p = resp->body, *end = resp->body + resp->body_len;
    while (p < end && k < PBATCH_NAMED_MAX) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        no++;
        for (int i = 0; i < pb->n_fail; i++) {
            if (pb->fail_line[i] != no || k >= PBATCH_NAMED_MAX)
                continue;
            json_t *l = json_loadb(p, n, 0, NULL);
            const char *cid = json_string_value(json_object_get(l, "custom_id"));
            if (cid != NULL && strlen(cid) < sizeof(ids[k])) {
                snprintf(ids[k], sizeof(ids[k]), "%s", cid);
                named[2 * k] = ids[k];
                named[2 * k + 1] = pb->fail_msg[i];
                k++;
            }
            json_decref(l);
        }
        p = nl ? nl + 1 : end;
    }
    LLMQ_LOG(LLMQ_LOG_WARN, "offload %s (%s): %s; it names %d of its jobs", pb->id, pb->batch_id,
             pb->fail_why, k);
    end_batch(pb, pb->fail_why, "failed", named, k);
}

/* The provider failed the batch as a whole (errors: its errors.data, each
 * {code, message, line}): ends it failed, with the jobs on the lines it
 * names (the input file is read to find them). */
static void failed(struct worker_pbatch *pb, const json_t *errors)
{
    const json_t *e0 = json_array_get(errors, 0);
    const char *msg = json_string_value(json_object_get(e0, "message"));
    snprintf(pb->fail_why, sizeof(pb->fail_why), "the provider failed the batch: %.200s",
             msg ? msg : "no reason given");
    pb->n_fail = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(errors, i, e)
    {
        const json_t *line = json_object_get(e, "line");
        const char *m = json_string_value(json_object_get(e, "message"));
        const char *code = json_string_value(json_object_get(e, "code"));
        if (!json_is_integer(line) || json_integer_value(line) < 1 ||
            pb->n_fail >= PBATCH_NAMED_MAX)
            continue;
        pb->fail_line[pb->n_fail] = json_integer_value(line);
        snprintf(pb->fail_msg[pb->n_fail], sizeof(pb->fail_msg[0]), "%.40s: %.110s",
                 code ? code : "invalid", m ? m : "invalid line");
        pb->n_fail++;
    }
    if (pb->n_fail == 0 || pb->file_id[0] == '\0') {
        LLMQ_LOG(LLMQ_LOG_WARN, "offload %s (%s): %s", pb->id, pb->batch_id, pb->fail_why);
        end_batch(pb, pb->fail_why, "failed", NULL, 0);
        return;
    }
    char path[256];
    snprintf(path, sizeof(path), "/v1/files/%s/content", pb->file_id);
    provider(pb, path, NULL, 0, NULL, PBATCH_BODY_TEXT, on_input_file);
}

static void on_cancel_sent(struct worker_pbatch *pb, struct llmq_http_response *resp, json_t *a)
{
    if (resp->outcome != LLMQ_HTTP_OK || (resp->status != 200 && !refused(resp))) {
        call_failed(pb, resp, a, "cancelling the provider batch");
        return;
    }
    /* 200 (cancelling) or a refusal (it ended meanwhile): either way the
     * polls go on and collect what it did; the cancelled jobs' lines are
     * ignored */
    const char *st = json_string_value(json_object_get(a, "status"));
    if (st != NULL)
        snprintf(pb->status, sizeof(pb->status), "%s", st);
    LLMQ_LOG(LLMQ_LOG_INFO, "offload %s (%s): none of its jobs is left: cancel sent (HTTP %ld)",
             pb->id, pb->batch_id, resp->status);
    const char *kv[] = {"cancel_sent", "1", "status", pb->status};
    step(pb, "submitted", pb->poll_ms, -1, kv, 4, NULL);
}

/* POST /v1/batches/{id}/cancel: every job of the batch was cancelled. */
static void cancel_at_provider(struct worker_pbatch *pb)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/batches/%s/cancel", pb->batch_id);
    provider(pb, path, "{}", 2, NULL, 0, on_cancel_sent);
}

static void on_polled(struct worker_pbatch *pb, struct llmq_http_response *resp, json_t *a)
{
    const char *st = json_string_value(json_object_get(a, "status"));
    if (resp->outcome != LLMQ_HTTP_OK || resp->status != 200 || st == NULL) {
        call_failed(pb, resp, a, "polling the provider batch");
        return;
    }
    snprintf(pb->status, sizeof(pb->status), "%s", st);
    char polls[24];
    snprintf(polls, sizeof(polls), "%lld", (long long)pb->polls + 1);
    if (strcmp(st, "completed") == 0 || strcmp(st, "expired") == 0 ||
        strcmp(st, "cancelled") == 0) {
        const char *o = json_string_value(json_object_get(a, "output_file_id"));
        const char *e = json_string_value(json_object_get(a, "error_file_id"));
        snprintf(pb->out_id, sizeof(pb->out_id), "%s", o ? o : "");
        snprintf(pb->err_id, sizeof(pb->err_id), "%s", e ? e : "");
        const char *kv[] = {"status",         pb->status, "polls",         polls,
                            "output_file_id", pb->out_id, "error_file_id", pb->err_id};
        step(pb, "collecting", 0, -1, kv, 8, collect);
    } else if (strcmp(st, "failed") == 0) {
        const json_t *errors = json_object_get(json_object_get(a, "errors"), "data");
        const json_t *e0 = json_array_get(errors, 0);
        const char *code = json_string_value(json_object_get(e0, "code"));
        if (code != NULL && strcmp(code, "token_limit_exceeded") == 0) {
            const char *msg = json_string_value(json_object_get(e0, "message"));
            char why[256];
            snprintf(why, sizeof(why), "the provider failed the batch: %.200s",
                     msg ? msg : "no reason given");
            LLMQ_LOG(LLMQ_LOG_WARN, "offload %s (%s): %s", pb->id, pb->batch_id, why);
            end_batch_queue_full(pb, why, msg);
        } else {
            failed(pb, errors);
        }
    } else if (pb->cancel && !pb->cancel_sent) {
        cancel_at_provider(pb);
    } else {
        const char *kv[] = {"status", pb->status, "polls", polls};
        step(pb, "submitted", llmq_pbatch_poll_delay_ms(pb->poll_ms, pb->polls + 1), -1, kv, 4,
             NULL);
    }
}

static void poll_batch(struct worker_pbatch *pb)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/batches/%s", pb->batch_id);
    provider(pb, path, NULL, 0, NULL, 0, on_polled);
}

/* --- building and uploading ------------------------------------------------ */

static void on_uploaded(struct worker_pbatch *pb, struct llmq_http_response *resp, json_t *a)
{
    const char *fid = json_string_value(json_object_get(a, "id"));
    if (resp->outcome != LLMQ_HTTP_OK || resp->status != 200 || fid == NULL) {
        call_failed(pb, resp, a, "uploading the input file");
        return;
    }
    crash_hook(pb, "after_upload");
    snprintf(pb->file_id, sizeof(pb->file_id), "%s", fid);
    const char *kv[] = {"file_id", pb->file_id};
    step(pb, "uploaded", 0, -1, kv, 2, run);
}

static void upload(struct worker_pbatch *pb)
{
    struct llmq_pbatch_buf body;
    char ctype[128], name[96];
    snprintf(name, sizeof(name), "%s.jsonl", pb->id);
    if (llmq_pbatch_multipart(name, pb->file.data, pb->file.len, &body, ctype, sizeof(ctype)) !=
        LLMQ_OK) {
        turn_end(pb);
        return;
    }
    llmq_pbatch_buf_free(&pb->file);
    provider(pb, "/v1/files", body.data, body.len, ctype, 0, on_uploaded);
    llmq_pbatch_buf_free(&body);
}

static void fetch_bodies(struct worker_pbatch *pb);

/* The file is built: a new batch records what it kept, then uploads. */
static void built(struct worker_pbatch *pb)
{
    if (pb->file.len == 0) { /* every job ended meanwhile (cancelled) */
        end_batch(pb, "", "", NULL, 0);
        return;
    }
    if (pb->trim) {
        pb->n = pb->keep;
        step(pb, "uploading", 0, pb->keep, NULL, 0, upload);
    } else {
        upload(pb);
    }
}

static void on_bodies(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_pbatch *pb = privdata;
    if (script_failed(pb, r, "reading the jobs' bodies"))
        return;
    size_t pairs = r->type == REDIS_REPLY_ARRAY ? r->elements / 2 : 0;
    for (size_t i = 0; i < pairs; i++) {
        const redisReply *id = r->element[2 * i], *body = r->element[2 * i + 1];
        pb->next_index++;
        if (body->type != REDIS_REPLY_STRING || id->type != REDIS_REPLY_STRING)
            continue; /* the job ended meanwhile: no line */
        char *text = NULL;
        size_t len = 0;
        struct llmq_error err = {0};
        if (llmq_job_unpack(body->str, body->len, LLMQ_JOB_PACK_TEXT_MAX, &text, &len, &err) !=
            LLMQ_OK) {
            LLMQ_LOG(LLMQ_LOG_WARN, "offload %s: job %s: %s: left out", pb->id, id->str, err.msg);
            continue;
        }
        if (llmq_pbatch_target_azure(&pb->target) && pb->target.deployment[0] != '\0' &&
            strcmp(pb->target.deployment, pb->model) != 0) {
            /* Azure's global batch names the deployment as each line's model */
            char *dep = llmq_worker_body_with_model(text, pb->target.deployment);
            if (dep != NULL) {
                free(text);
                text = dep;
                len = strlen(dep);
            }
        }
        size_t mark = pb->file.len;
        enum llmq_rc rc = llmq_pbatch_input_line(
            &pb->file, id->str, llmq_pbatch_target_line_url(&pb->target, pb->url), text, len);
        free(text);
        if (rc == LLMQ_ENOMEM) {
            turn_end(pb);
            return;
        }
        if (pb->trim && pb->keep > 0 && (int64_t)pb->file.len > pb->max_bytes) {
            pb->file.len = mark; /* over the file's byte limit: the rest waits */
            built(pb);
            return;
        }
        pb->keep = pb->next_index;
    }
    if (pairs < PBATCH_BODIES_PER_CALL)
        built(pb);
    else
        fetch_bodies(pb);
}

static void fetch_bodies(struct worker_pbatch *pb)
{
    char first[24], count[24];
    snprintf(first, sizeof(first), "%lld", (long long)pb->next_index);
    snprintf(count, sizeof(count), "%d", PBATCH_BODIES_PER_CALL);
    const char *argv[] = {pb->id, first, count};
    script(pb, LLMQ_SCRIPT_PBATCH_BODIES, 3, argv, NULL, on_bodies);
}

static void build(struct worker_pbatch *pb, int trim)
{
    llmq_pbatch_buf_free(&pb->file);
    pb->next_index = pb->keep = 0;
    pb->trim = trim;
    fetch_bodies(pb);
}

/* Takeover in uploading: the file may be there (named "<id>.jsonl"); if so
 * it is recorded, else the file is built again and uploaded. */
static void on_files_listed(struct worker_pbatch *pb, struct llmq_http_response *resp, json_t *a)
{
    if (resp->outcome != LLMQ_HTTP_OK || resp->status != 200 || a == NULL) {
        call_failed(pb, resp, a, "listing the provider's files");
        return;
    }
    char name[96];
    snprintf(name, sizeof(name), "%s.jsonl", pb->id);
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(a, "data"), i, f)
    {
        const char *fn = json_string_value(json_object_get(f, "filename"));
        const char *fid = json_string_value(json_object_get(f, "id"));
        if (fn != NULL && fid != NULL && strcmp(fn, name) == 0) {
            LLMQ_LOG(LLMQ_LOG_INFO,
                     "offload %s: found input file %s uploaded before a "
                     "takeover: not uploading again",
                     pb->id, fid);
            snprintf(pb->file_id, sizeof(pb->file_id), "%s", fid);
            const char *kv[] = {"file_id", pb->file_id};
            step(pb, "uploaded", 0, -1, kv, 2, run);
            return;
        }
    }
    build(pb, 0);
}

/* --- collecting ------------------------------------------------------------ */

static void settle_more(struct worker_pbatch *pb);

static void on_settled(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_pbatch *pb = privdata;
    if (script_failed(pb, r, "settling lines"))
        return;
    crash_hook(pb, "after_settle");
    settle_more(pb);
}

/* Reads the next line of f (without its '\n') into *line (new,
 * NUL-terminated, *len bytes): at most max bytes are kept, a longer line is
 * read to its end with *over set. Returns 1, 0 at the end of f, -1 when
 * memory runs out. */
static int spool_line(FILE *f, size_t max, char **line, size_t *len, int *over)
{
    char chunk[65536];
    char *b = NULL;
    size_t n = 0;
    int any = 0;
    *over = 0;
    while (fgets(chunk, sizeof(chunk), f) != NULL) {
        any = 1;
        size_t c = strlen(chunk);
        int eol = c > 0 && chunk[c - 1] == '\n';
        c -= (size_t)eol;
        size_t take = n < max ? (c < max - n ? c : max - n) : 0;
        *over |= take < c;
        if (take > 0) {
            char *nb = realloc(b, n + take + 1);
            if (nb == NULL) {
                free(b);
                return -1;
            }
            b = nb;
            memcpy(b + n, chunk, take);
            n += take;
        }
        if (eol)
            break;
    }
    if (!any)
        return 0;
    if (b == NULL && (b = malloc(1)) == NULL)
        return -1;
    b[n] = '\0';
    *line = b;
    *len = n;
    return 1;
}

/* The custom_id a line's head line[0..len) names (a line too long to be
 * parsed) into out (n bytes); -1 when it names none that can be read
 * without unescaping. */
static int head_custom_id(const char *line, size_t len, char *out, size_t n)
{
    const char *k = memmem(line, len, "\"custom_id\"", 11), *end = line + len;
    if (k == NULL)
        return -1;
    const char *p = k + 11;
    while (p < end && (*p == ' ' || *p == ':'))
        p++;
    if (p >= end || *p != '"')
        return -1;
    size_t i = 0;
    for (p++; p < end && *p != '"' && *p != '\\' && i + 1 < n; p++)
        out[i++] = *p;
    if (p >= end || *p != '"' || i == 0)
        return -1;
    out[i] = '\0';
    return 0;
}

/* A line over max bytes: its job (pl->job_id, when its head names one) is
 * dead, response_too_big; the stored line is an error line of the live
 * shape (new text, or NULL). */
static char *line_too_long(struct worker_pbatch *pb, const char *head, size_t len, size_t max,
                           struct llmq_pbatch_line *pl)
{
    memset(pl, 0, sizeof(*pl));
    if (head_custom_id(head, len, pl->job_id, sizeof(pl->job_id)) != 0) {
        LLMQ_LOG(LLMQ_LOG_WARN,
                 "offload %s (%s): a result line over %zu bytes names no job: skipped", pb->id,
                 pb->batch_id, max);
        return NULL;
    }
    pl->verdict = LLMQ_PBATCH_DEAD;
    snprintf(pl->reason, sizeof(pl->reason),
             "its result line in the provider's file is over %zu bytes (--max-response-bytes "
             "+ %d): not stored",
             max, PBATCH_LINE_SLACK);
    LLMQ_LOG(LLMQ_LOG_WARN, "offload %s (%s): job %s: %s", pb->id, pb->batch_id, pl->job_id,
             pl->reason);
    json_t *l = json_pack("{s:n, s:s, s:n, s:{s:s, s:s}, s:b, s:s}", "id", "custom_id", pl->job_id,
                          "response", "error", "code", "response_too_big", "message", pl->reason,
                          "offloaded", 1, "provider_batch_id", pb->batch_id);
    char *text = l != NULL ? json_dumps(l, JSON_COMPACT) : NULL;
    json_decref(l);
    return text;
}

/* Settles the next lines of the output and error files (read from their
 * spools: at most PBATCH_LINES_PER_SETTLE lines, about PBATCH_SETTLE_BYTES);
 * at the end, ends the batch (jobs that got no line go back to staging). */
static void settle_more(struct worker_pbatch *pb)
{
    static const char *const kinds[] = {"done", "retry", "dead", "back"};
    const char *argv[2 + PBATCH_LINES_PER_SETTLE * 7];
    size_t argvlen[2 + PBATCH_LINES_PER_SETTLE * 7];
    char nums[PBATCH_LINES_PER_SETTLE][3][24];
    struct llmq_pbatch_line lines[PBATCH_LINES_PER_SETTLE];
    char *owned[PBATCH_LINES_PER_SETTLE * 2];
    int argc = 2, k = 0, n_owned = 0;
    size_t bytes = 0;
    size_t max = (size_t)pb->a->w->cfg->max_response_bytes + PBATCH_LINE_SLACK;
    argv[0] = pb->id;
    argv[1] = pb->a->w->cfg->consumer;
    argvlen[0] = strlen(argv[0]);
    argvlen[1] = strlen(argv[1]);
    while (pb->which < 2 && k < PBATCH_LINES_PER_SETTLE && bytes < PBATCH_SETTLE_BYTES) {
        FILE *f = pb->spool[pb->which];
        char *line = NULL;
        size_t ln = 0;
        int over = 0;
        int got = f != NULL ? spool_line(f, max, &line, &ln, &over) : 0;
        if (got < 0) { /* out of memory: this turn ends, the collection is taken again */
            for (int i = 0; i < n_owned; i++)
                free(owned[i]);
            turn_end(pb);
            return;
        }
        if (got == 0) {
            if (f != NULL && ferror(f))
                LLMQ_LOG(LLMQ_LOG_WARN, "offload %s: reading a spooled result file failed", pb->id);
            pb->which++;
            continue;
        }
        bytes += ln;
        struct llmq_pbatch_line *pl = &lines[k];
        char *text = NULL;
        if (over)
            text = line_too_long(pb, line, ln, max, pl);
        else if (ln > 0 && llmq_pbatch_line_parse(line, ln, pl) == LLMQ_OK)
            text = llmq_pbatch_result_line(pl, line, ln, pb->batch_id);
        free(line); /* what is stored is text (pl holds copies) */
        if (text == NULL)
            continue;
        char *packed = NULL;
        size_t plen = 0;
        owned[n_owned++] = text;
        if (pb->packer != NULL &&
            llmq_job_packer_pack(pb->packer, text, strlen(text), &packed, &plen, NULL) == LLMQ_OK &&
            packed != NULL)
            owned[n_owned++] = packed;
        int has = pl->usage.present & LLMQ_USAGE_INPUT;
        snprintf(nums[k][0], 24, "%lld", has ? (long long)pl->usage.input_tokens : -1LL);
        snprintf(nums[k][1], 24, "%lld", (long long)pl->usage.cached_tokens);
        snprintf(nums[k][2], 24, "%lld", (long long)pl->usage.output_tokens);
        const char *vals[7] = {pl->job_id, kinds[pl->verdict], packed ? packed : text,
                               nums[k][0], nums[k][1],         nums[k][2],
                               pl->reason};
        for (int i = 0; i < 7; i++) {
            argv[argc] = vals[i];
            argvlen[argc] = i == 2 ? (packed ? plen : strlen(text)) : strlen(vals[i]);
            argc++;
        }
        k++;
    }
    if (k > 0)
        script(pb, LLMQ_SCRIPT_PBATCH_SETTLE, argc, argv, argvlen, on_settled);
    for (int i = 0; i < n_owned; i++)
        free(owned[i]);
    if (k > 0)
        return;
    const char *st = pb->status;
    end_batch(pb, strcmp(st, "completed") == 0 ? "" : st, "", NULL, 0);
}

static void fetch_file(struct worker_pbatch *pb);

static void on_file(struct worker_pbatch *pb, struct llmq_http_response *resp, json_t *a)
{
    if (resp->outcome == LLMQ_HTTP_TOO_BIG) {
        /* it never fits: no retry of the download, the jobs go back (an
         * attempt each, so a batch too large every time ends them) */
        char why[256];
        snprintf(why, sizeof(why),
                 "its %s file is larger than --offload-max-file-bytes %lld: not downloaded "
                 "(raise it, or lower the model's --max-requests)",
                 pb->which == 0 ? "output" : "error",
                 (long long)pb->a->w->cfg->offload_max_file_bytes);
        LLMQ_LOG(LLMQ_LOG_ERROR, "offload %s (%s): %s", pb->id, pb->batch_id, why);
        end_batch(pb, why, "attempt", NULL, 0);
        return;
    }
    if (resp->outcome != LLMQ_HTTP_OK || resp->status != 200) {
        call_failed(pb, resp, a, "downloading a result file");
        return;
    }
    rewind(pb->spool[pb->which]); /* read back from its start */
    pb->which++;
    fetch_file(pb);
}

/* Downloads the output file, then the error file, each into its spool, then
 * settles. */
static void fetch_file(struct worker_pbatch *pb)
{
    while (pb->which < 2) {
        const char *id = pb->which == 0 ? pb->out_id : pb->err_id;
        if (id[0] != '\0') {
            char path[256];
            snprintf(path, sizeof(path), "/v1/files/%s/content", id);
            if (pb->spool[pb->which] != NULL)
                fclose(pb->spool[pb->which]);
            pb->spool[pb->which] = tmpfile();
            if (pb->spool[pb->which] == NULL) {
                LLMQ_LOG(LLMQ_LOG_WARN, "offload %s: no temporary file for a result file: %s",
                         pb->id, strerror(errno));
                char state[16];
                snprintf(state, sizeof(state), "%s", pb->state);
                step(pb, state, PBATCH_RETRY_MS, -1, NULL, 0, NULL);
                return;
            }
            provider(pb, path, NULL, 0, NULL, PBATCH_BODY_SPOOL, on_file);
            return;
        }
        pb->which++;
    }
    pb->which = 0;
    settle_more(pb);
}

static void collect(struct worker_pbatch *pb)
{
    pb->which = 0;
    fetch_file(pb);
}

/* --- taking a step --------------------------------------------------------- */

/* Goes on from the batch's recorded state. */
static void run(struct worker_pbatch *pb)
{
    const char *s = pb->state;
    if (pb->cancel && (strcmp(s, "uploading") == 0 || strcmp(s, "uploaded") == 0)) {
        LLMQ_LOG(LLMQ_LOG_INFO, "offload %s: cancelled before it was submitted", pb->id);
        end_batch(pb, "cancelled before it was submitted", "", NULL, 0);
    } else if (strcmp(s, "building") == 0)
        build(pb, 1);
    else if (strcmp(s, "uploading") == 0)
        provider(pb, "/v1/files?purpose=batch", NULL, 0, NULL, 0, on_files_listed);
    else if (strcmp(s, "uploaded") == 0)
        step(pb, "creating", 0, -1, NULL, 0, create);
    else if (strcmp(s, "creating") == 0)
        creating(pb);
    else if (strcmp(s, "submitted") == 0)
        poll_batch(pb);
    else if (strcmp(s, "collecting") == 0) {
        LLMQ_LOG(LLMQ_LOG_INFO, "offload %s: collecting %s again (a turn ended mid-way)", pb->id,
                 pb->batch_id);
        collect(pb);
    } else {
        turn_end(pb);
    }
}

static void copy_field(const redisReply *r, size_t i, char *buf, size_t n)
{
    if (llmq_reply_copy(r->element[i + 1], buf, n) != 0)
        buf[0] = '\0';
}

static void on_next(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_pbatch *pb = privdata;
    if (script_failed(pb, r, "asking for offload work"))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || pb->stopped) {
        batch_reset(pb);
        pb->busy = 0;
        pb->idle_ms = pb->idle_ms * 2 > PBATCH_TICK_MAX_MS ? PBATCH_TICK_MAX_MS : pb->idle_ms * 2;
        if (!pb->stopped)
            arm(pb, pb->idle_ms);
        return;
    }
    pb->idle_ms = PBATCH_TICK_MIN_MS;
    batch_reset(pb);
    if (llmq_reply_copy(r->element[0], pb->id, sizeof(pb->id)) != 0) {
        turn_end(pb);
        return;
    }
    static const struct {
        const char *name;
        size_t off, n;
    } strs[] = {
        {"state", offsetof(struct worker_pbatch, state),
         sizeof(((struct worker_pbatch *)0)->state)},
        {"model", offsetof(struct worker_pbatch, model),
         sizeof(((struct worker_pbatch *)0)->model)},
        {"url", offsetof(struct worker_pbatch, url), sizeof(((struct worker_pbatch *)0)->url)},
        {"status", offsetof(struct worker_pbatch, status),
         sizeof(((struct worker_pbatch *)0)->status)},
        {"file_id", offsetof(struct worker_pbatch, file_id),
         sizeof(((struct worker_pbatch *)0)->file_id)},
        {"batch_id", offsetof(struct worker_pbatch, batch_id),
         sizeof(((struct worker_pbatch *)0)->batch_id)},
        {"output_file_id", offsetof(struct worker_pbatch, out_id),
         sizeof(((struct worker_pbatch *)0)->out_id)},
        {"error_file_id", offsetof(struct worker_pbatch, err_id),
         sizeof(((struct worker_pbatch *)0)->err_id)},
        {"ep", offsetof(struct worker_pbatch, target.ep),
         sizeof(((struct worker_pbatch *)0)->target.ep)},
        {"ep_url", offsetof(struct worker_pbatch, target.base_url),
         sizeof(((struct worker_pbatch *)0)->target.base_url)},
        {"ep_ver", offsetof(struct worker_pbatch, target.api_version),
         sizeof(((struct worker_pbatch *)0)->target.api_version)},
        {"ep_dep", offsetof(struct worker_pbatch, target.deployment),
         sizeof(((struct worker_pbatch *)0)->target.deployment)},
    };
    pb->n = pb->polls = 0;
    pb->poll_ms = 30000;
    pb->max_bytes = 200000000;
    for (size_t i = 1; i + 1 < r->elements; i += 2) {
        const char *name = llmq_reply_str_or(r->element[i], "");
        for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]); k++)
            if (strcmp(name, strs[k].name) == 0)
                copy_field(r, i, (char *)pb + strs[k].off, strs[k].n);
        if (strcmp(name, "n") == 0)
            pb->n = llmq_reply_int_or(r->element[i + 1], 0);
        else if (strcmp(name, "polls") == 0)
            pb->polls = llmq_reply_int_or(r->element[i + 1], 0);
        else if (strcmp(name, "poll_ms") == 0)
            pb->poll_ms = llmq_reply_int_or(r->element[i + 1], 30000);
        else if (strcmp(name, "max_bytes") == 0)
            pb->max_bytes = llmq_reply_int_or(r->element[i + 1], 200000000);
        else if (strcmp(name, "cancel") == 0)
            pb->cancel = llmq_reply_int_or(r->element[i + 1], 0) == 1;
        else if (strcmp(name, "cancel_sent") == 0)
            pb->cancel_sent = llmq_reply_int_or(r->element[i + 1], 0) == 1;
    }
    LLMQ_LOG(LLMQ_LOG_DEBUG, "offload %s: taking it in state %s", pb->id, pb->state);
    run(pb);
}

/* Asks pbatch_next for this worker's next step (on_next). */
static void look(struct worker_pbatch *pb)
{
    char lease[24];
    snprintf(lease, sizeof(lease), "%lld", (long long)pb->a->w->cfg->offload_lease_ms);
    const char *argv[] = {pb->a->w->cfg->consumer, lease, pb->serves};
    script(pb, LLMQ_SCRIPT_PBATCH_NEXT, 3, argv, NULL, on_next);
}

static void on_offload_used(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct worker_pbatch *pb = privdata;
    const redisReply *r = reply;
    if (!pb->stopped && r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
        pb->busy = 0;
        pb->idle_ms = PBATCH_TICK_MAX_MS;
        arm(pb, PBATCH_TICK_MAX_MS);
        return;
    }
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        pb->used = 1;
    look(pb); /* something to do, or the answer is unknown: the script decides */
}

static void on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct worker_pbatch *pb = t->data;
    if (pb->busy || pb->stopped)
        return;
    if (pb->a->w->draining) {
        pb->stopped = 1;
        return;
    }
    if (!llmq_redis_async_ready(pb->a->cmd)) {
        arm(pb, PBATCH_TICK_MAX_MS);
        return;
    }
    pb->busy = 1;
    /* One EXISTS, not a script call, while the account has no offload
     * policy, staged job or provider batch: a worker of an account that
     * never offloads costs Redis no script call when it has nothing to do
     * (endpoints_idle counts them). A policy set or a job staged is seen
     * within PBATCH_TICK_MAX_MS. Once one existed, the account offloads:
     * each tick is then the script call alone, not two round trips. */
    if (pb->used) {
        look(pb);
        return;
    }
    redisAsyncContext *ac = llmq_redis_async_context(pb->a->cmd);
    if (ac == NULL ||
        redisAsyncCommand(ac, on_offload_used, pb, "EXISTS %s %s %s", pb->used_keys[0],
                          pb->used_keys[1], pb->used_keys[2]) != REDIS_OK)
        look(pb);
}

void llmq_worker_pbatch_start(struct worker_account *a)
{
    const struct llmq_worker_config *cfg = a->w->cfg;
    /* the implicit endpoint only with the account's key and an OpenAI-style
     * base URL (an Azure --base-url is one deployment, not a resource) */
    int implicit = a->cfg->api_key != NULL && cfg->azure_api_version[0] == '\0';
    if ((!implicit && cfg->n_endpoint_keys == 0) || a->pbatch != NULL)
        return;
    struct worker_pbatch *pb = calloc(1, sizeof(*pb));
    if (pb == NULL)
        return;
    pb->a = a;
    size_t len = 0;
    for (int i = 0; i < cfg->n_endpoint_keys; i++) {
        int n = snprintf(pb->serves + len, sizeof(pb->serves) - len, "%s%s",
                         i > 0 || implicit ? "," : "", cfg->endpoint_keys[i].name);
        if (n > 0 && (size_t)n < sizeof(pb->serves) - len)
            len += (size_t)n;
    }
    pb->idle_ms = PBATCH_TICK_MIN_MS;
    static const enum llmq_key_kind used[3] = {LLMQ_KEY_OFFLOAD, LLMQ_KEY_PBATCH_DUE,
                                               LLMQ_KEY_PB_STAGED};
    for (int i = 0; i < 3; i++)
        if (llmq_key(pb->used_keys[i], sizeof(pb->used_keys[i]), a->prefix, used[i], NULL, NULL) !=
            LLMQ_OK) {
            free(pb);
            return;
        }
    pb->packer = llmq_job_packer_new();
    const char *crash = getenv("LLMQ_TEST_PBATCH_CRASH");
    pb->crash_at = crash != NULL && crash[0] ? crash : NULL;
    ev_timer_init(&pb->tick, on_tick, 0.0, 0.0);
    pb->tick.data = pb;
    ev_timer_init(&pb->renew, on_renew, 0.0, 0.0);
    pb->renew.data = pb;
    a->pbatch = pb;
    arm(pb, PBATCH_TICK_MIN_MS);
}

void llmq_worker_pbatch_stop(struct worker_account *a)
{
    struct worker_pbatch *pb = a->pbatch;
    if (pb == NULL)
        return;
    pb->stopped = 1;
    ev_timer_stop(a->w->loop, &pb->tick);
    ev_timer_stop(a->w->loop, &pb->renew);
}

void llmq_worker_pbatch_free(struct worker_account *a)
{
    struct worker_pbatch *pb = a->pbatch;
    if (pb == NULL)
        return;
    ev_timer_stop(a->w->loop, &pb->tick);
    ev_timer_stop(a->w->loop, &pb->renew);
    batch_reset(pb);
    llmq_job_packer_free(pb->packer);
    free(pb);
    a->pbatch = NULL;
}
