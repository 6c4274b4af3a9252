/* llmq enqueue: a Batch-format JSONL file into the queue.
 *
 * Every line is checked before anything is written; one bad line stops the
 * whole file (exit 2) unless --skip-invalid. Valid jobs go out in pipelined
 * rounds; an id that exists already is reported, not enqueued twice. With
 * --wait the command stays to stream each job's Batch output line as it ends
 * (reconnecting, as the workers do, when Redis goes away for a while) and
 * exits 3 when any job was dead-lettered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "cli.h"
#include "cli_opts.h"
#include "jobs/batch.h"
#include "jobs/job_id.h"
#include "jobs/job_idset.h"
#include "jobs/job_store.h"
#include "limiter/path.h"
#include "llmq/priority.h"
#include "redis/keys.h"
#include "progress.h"
#include "redis/redis.h"
#include "redis/reply_read.h"

struct enqueue_opts {
    const char *file;
    const char *output;
    FILE *out; /* --output opened before anything is written; NULL: stdout */
    struct llmq_job_defaults d;
    long long max_body_bytes; /* 0: from P settings */
    long long timeout_s;      /* --wait limit; -1 none */
    int skip_invalid;
    int quiet;
    int wait;
    int check_only;
    int no_progress;
};

static int take_priority(const struct llmq_cli *cli, const char *name, const char *arg,
                         void *target)
{
    if (llmq_priority_parse(arg, target) == 0)
        return 0;
    llmq_cli_error(cli, "%s: expected high, normal or low, got '%s'", name, arg);
    return LLMQ_EXIT_USAGE;
}

static int take_endpoints_option(const struct llmq_cli *cli, const char *name, const char *arg,
                                 void *target)
{
    char buf[LLMQ_JOB_ENDPOINTS_MAX + 1];
    struct llmq_error err = {0};
    if (llmq_job_endpoints_check(arg, buf, sizeof(buf), &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s: %s", name, err.msg);
        return LLMQ_EXIT_USAGE;
    }
    *(const char **)target = arg;
    return 0;
}

static int take_max_attempts(const struct llmq_cli *cli, const char *name, const char *arg,
                             void *target)
{
    long long v = 0;
    if (llmq_cli_parse_int64(cli, name, arg, 1, LLMQ_JOB_MAX_ATTEMPTS_LIMIT, &v) != 0)
        return LLMQ_EXIT_USAGE;
    *(int *)target = (int)v;
    return 0;
}

#define OPTS struct enqueue_opts
static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_CALL("priority", "P", OPTS, d.priority, take_priority,
                      "high|normal|low for lines that set none (default normal)"),
    LLMQ_CLI_OPT_NAME("tenant", "T", OPTS, d.tenant, "tenant for lines that set none"),
    LLMQ_CLI_OPT_NAME("user", "U", OPTS, d.user, "user for lines that set none"),
    LLMQ_CLI_OPT_CALL("endpoints", "A,B", OPTS, d.endpoints, take_endpoints_option,
                      "endpoints the lines that set none may run on (default any\n"
                      "endpoint of their model; see llmq endpoints)"),
    LLMQ_CLI_OPT_CALL("max-attempts", "N", OPTS, d.max_attempts, take_max_attempts,
                      "attempts for lines that set none (default 5)"),
    LLMQ_CLI_OPT_INT("ttl-ms", "MS", OPTS, d.ttl_ms, 1, 1LL << 50,
                     "deadline relative to enqueue for lines that set none"),
    LLMQ_CLI_OPT_CALL("completion-window", "24h", OPTS, d.completion_window_ms,
                      llmq_cli_take_completion_window,
                      "the lines that set none may wait the provider's Batch\n"
                      "window: their model's offload policy (llmq offload) may run\n"
                      "them in the provider's Batch API at the batch price; a\n"
                      "deadline must then be 24 h away or more (none: 24 h)"),
    LLMQ_CLI_OPT_INT("max-body-bytes", "N", OPTS, max_body_bytes, 1, LLMQ_JOB_MAX_BODY_BYTES_LIMIT,
                     "body size limit (default: settings max_body_bytes, 1 MiB)"),
    LLMQ_CLI_OPT_FLAG("skip-invalid", OPTS, skip_invalid,
                      "enqueue the valid lines, report the invalid ones"),
    LLMQ_CLI_OPT_FLAG("generate-ids", OPTS, d.generate_ids,
                      "give lines without custom_id a generated id (a re-run of\n"
                      "the file then runs those lines again); default: rejected"),
    LLMQ_CLI_OPT_FLAG("check", OPTS, check_only,
                      "only check the file; write nothing (no Redis needed)"),
    LLMQ_CLI_OPT_FLAG("quiet", OPTS, quiet,
                      "print counts instead of job ids (and name only the first\n"
                      "5 ids already present)"),
    LLMQ_CLI_OPT_FLAG("wait", OPTS, wait,
                      "stay and print each result (Batch output lines) as it ends;\n"
                      "a lost Redis is reconnected to for up to 60 s"),
    LLMQ_CLI_OPT_INT("timeout", "S", OPTS, timeout_s, 0, 1LL << 31,
                     "give up waiting after S seconds (exit 1; says how to resume)"),
    LLMQ_CLI_OPT_STR("output", "FILE", OPTS, output, "write results there instead of stdout"),
    LLMQ_CLI_OPT_FLAG("no-progress", OPTS, no_progress, "no progress on stderr while waiting"),
    LLMQ_CLI_OPT_END,
};
#undef OPTS

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq enqueue FILE|- [options]\n",
    .about = "Reads OpenAI Batch input lines ({\"custom_id\", \"method\": \"POST\", \"url\", "
             "\"body\"},\nplus optional \"llmq\": {\"priority\", \"tenant\", \"user\", "
             "\"deadline_ms\", \"ttl_ms\",\n\"max_attempts\", \"endpoints\", "
             "\"completion_window\"}), checks every line, then enqueues them. custom_id is\n"
             "required and is the job id (the idempotency key): an id already queued, running\n"
             "or done is reported, not enqueued again. Job ids go to stdout (with --wait: the\n"
             "results do).\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure or wait timeout; 2 usage or invalid lines (nothing\n"
            "written); 3 some job was dead-lettered (with --wait).\n",
};

/* Parses argv; returns -1 to exit with *code. */
static int parse_args(struct llmq_cli *cli, int argc, char **argv, struct enqueue_opts *o,
                      int *code)
{
    char *pos[1];
    int n_pos = 0;
    llmq_job_defaults_init(&o->d);
    o->timeout_s = -1;
    *code = llmq_cli_parse(cli, &spec, argc, argv, o, pos, 1, &n_pos);
    if (*code >= 0)
        return -1;
    if (n_pos != 1) {
        llmq_cli_error(cli, "expected one FILE (or - for stdin); see --help");
        *code = LLMQ_EXIT_USAGE;
        return -1;
    }
    o->file = pos[0];
    /* an option that would be ignored is an error, not a silent no-op */
    const char *needs_wait = o->timeout_s >= 0 ? "--timeout"
                             : o->output       ? "--output"
                             : o->no_progress  ? "--no-progress"
                                               : NULL;
    if (o->check_only && o->wait)
        llmq_cli_error(cli, "--check enqueues nothing: there is nothing to --wait for");
    else if (needs_wait != NULL && !o->wait)
        llmq_cli_error(cli, "%s only applies with --wait (see --help)", needs_wait);
    if ((o->check_only && o->wait) || (needs_wait != NULL && !o->wait)) {
        *code = LLMQ_EXIT_USAGE;
        return -1;
    }
    return 0;
}

/* Prints the invalid lines (the first 1000 of them) to stderr. */
static void report_invalid(const struct llmq_cli *cli, const char *file, const struct llmq_batch *b)
{
    for (size_t i = 0; i < b->n_errors && i < 1000; i++)
        llmq_cli_error(cli, "%s:%ld: %s", file, b->errors[i].line, b->errors[i].msg);
    if (b->n_errors > 1000)
        llmq_cli_error(cli, "... and %zu more invalid lines", b->n_errors - 1000);
}

/* Reads and checks the file; returns an exit code, or -1 to go on. */
static int load_batch(struct llmq_cli *cli, struct enqueue_opts *o, struct llmq_batch *b)
{
    char *buf = NULL;
    size_t len = 0;
    struct llmq_error err = {0};
    o->d.now_ms = llmq_wall_ms();
    if (llmq_batch_read_file(o->file, &buf, &len, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return LLMQ_EXIT_USAGE;
    }
    enum llmq_rc rc = llmq_batch_parse(buf, len, &o->d, b, &err);
    free(buf);
    if (rc != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
        return LLMQ_EXIT_FAIL;
    }
    report_invalid(cli, o->file, b);
    if (b->n_errors > 0 && (!o->skip_invalid || o->check_only)) {
        llmq_cli_error(cli, "%zu invalid line(s): nothing enqueued%s", b->n_errors,
                       o->check_only ? "" : " (--skip-invalid enqueues the valid ones)");
        return LLMQ_EXIT_USAGE;
    }
    if (o->check_only) {
        fprintf(stderr, "%s: %zu valid job(s)\n", cli->prog, b->n_jobs);
        return LLMQ_EXIT_OK;
    }
    return -1;
}

/* Duplicates --quiet names one by one; the rest are counted (a re-run of a
 * big file would otherwise print a line per job). */
#define QUIET_DUPLICATES_SHOWN 5

/* Prints what happened to each job: ids of new ones (stdout, unless quiet or
 * waiting), duplicates on stderr (with --quiet only the first few), then
 * counts. */
static void report_outcomes(const struct llmq_cli *cli, const struct enqueue_opts *o,
                            const struct llmq_batch *b, const struct llmq_job_outcome *out)
{
    size_t created = 0, dup = 0;
    char id[LLMQ_JOB_ID_MAX + 1]; /* shown as the custom_id it came from */
    for (size_t i = 0; i < b->n_jobs; i++) {
        llmq_job_id_to_custom(b->jobs[i].id, id, sizeof(id));
        if (out[i].created) {
            created++;
            if (!o->quiet && !o->wait)
                printf("%s\n", id);
        } else if (dup++ < QUIET_DUPLICATES_SHOWN || !o->quiet) {
            llmq_cli_error(cli, "%s:%ld: job %s already exists (%s): not enqueued again", o->file,
                           b->job_lines[i], id, out[i].state);
        }
    }
    if (o->quiet && dup > QUIET_DUPLICATES_SHOWN)
        llmq_cli_error(cli, "... and %zu more already present (not enqueued again)",
                       dup - QUIET_DUPLICATES_SHOWN);
    if (o->quiet && !o->wait)
        printf("%zu\n", created);
    fprintf(stderr, "%s: %zu enqueued, %zu already present, %zu invalid\n", cli->prog, created, dup,
            b->n_errors);
}

/* The account+model buckets of a batch's models, read once: for the
 * warning about models without a limit and for the ETA of --wait. */
struct batch_models {
    size_t n;
    const char **name;                        /* borrowed from the batch's jobs */
    size_t *of_job;                           /* model index of each job */
    long long *requests, *tokens, *period_ms; /* the limits; <= 0: none */
    long long *left_jobs, *left_tokens;       /* of the jobs not ended (--wait) */
    long long *endpoints;                     /* endpoints serving it (llmq endpoints) */
};

static void batch_models_free(struct batch_models *m)
{
    free(m->name);
    free(m->of_job);
    free(m->requests); /* the six arrays are one allocation from here */
    memset(m, 0, sizeof(*m));
}

/* What one model's reply (borrowed) sets in m (model i). */
typedef void model_reply_take(struct batch_models *m, size_t i, redisReply *r);

static void take_limit(struct batch_models *m, size_t i, redisReply *r)
{
    m->requests[i] =
        llmq_limit_value_set(llmq_reply_at(r, 0)) ? llmq_reply_int_or(llmq_reply_at(r, 0), 0) : 0;
    m->tokens[i] =
        llmq_limit_value_set(llmq_reply_at(r, 1)) ? llmq_reply_int_or(llmq_reply_at(r, 1), 0) : 0;
    m->period_ms[i] = llmq_reply_int_or(llmq_reply_at(r, 2), 60000); /* the limiter's default */
}

static void take_endpoints(struct batch_models *m, size_t i, redisReply *r)
{
    m->endpoints[i] = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
}

/* Sends cmd (one %s: the key of kind for each model of m) pipelined, once
 * per model, and hands each reply to take; a reply that is a cluster
 * redirection is asked again of its node (llmq_redis_redo). Returns 0, or
 * -1 when the connection broke. Models are valid names: their keys fit. */
static int per_model_reply(redisContext *c, const char *prefix, struct batch_models *m,
                           enum llmq_key_kind kind, const char *cmd, model_reply_take *take)
{
    size_t sent = 0;
    char key[LLMQ_KEY_FIXED_MAX + LLMQ_BUCKET_NAME_MAX];
    for (size_t i = 0; i < m->n; i++) {
        if (llmq_key(key, sizeof(key), prefix, kind, m->name[i], NULL) != LLMQ_OK)
            break;
        redisAppendCommand(c, cmd, key);
        sent++;
    }
    for (size_t i = 0; i < sent; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK)
            return -1;
        if (llmq_key(key, sizeof(key), prefix, kind, m->name[i], NULL) == LLMQ_OK)
            r = llmq_redis_redo(c, r, cmd, key);
        take(m, i, r);
        freeReplyObject(r);
    }
    return 0;
}

/* Collects the batch's models and reads their buckets' limits (one pipelined
 * round). Returns 0, or -1 when out of memory (m empty) or Redis failed (the
 * limits then read as none; the push that follows reports the connection). */
static int batch_models_read(redisContext *c, const char *prefix, const struct llmq_batch *b,
                             struct batch_models *m)
{
    memset(m, 0, sizeof(*m));
    struct llmq_job_idset *seen = llmq_job_idset_new(16);
    m->name = calloc(b->n_jobs + 1, sizeof(*m->name));
    m->of_job = calloc(b->n_jobs + 1, sizeof(*m->of_job));
    m->requests = calloc(6 * (b->n_jobs + 1), sizeof(long long));
    int ok = seen != NULL && m->name != NULL && m->of_job != NULL && m->requests != NULL;
    for (size_t i = 0; ok && i < b->n_jobs; i++) {
        long idx = (long)m->n;
        if (llmq_job_idset_add(seen, b->jobs[i].model, idx, &idx) == 1)
            m->name[m->n++] = b->jobs[i].model;
        m->of_job[i] = (size_t)idx;
    }
    llmq_job_idset_free(seen);
    if (!ok) {
        batch_models_free(m);
        return -1;
    }
    size_t k = b->n_jobs + 1;
    m->tokens = m->requests + k;
    m->period_ms = m->tokens + k;
    m->left_jobs = m->period_ms + k;
    m->left_tokens = m->left_jobs + k;
    m->endpoints = m->left_tokens + k;
    for (size_t i = 0; i < b->n_jobs; i++) {
        m->left_jobs[m->of_job[i]]++;
        m->left_tokens[m->of_job[i]] += b->jobs[i].cost.total_tokens;
    }
    if (per_model_reply(c, prefix, m, LLMQ_KEY_LIMIT, "HMGET %s requests tokens period_ms",
                        take_limit) != 0)
        return -1;
    /* a model its endpoints serve has their limits instead of its own */
    return per_model_reply(c, prefix, m, LLMQ_KEY_MODEL_EPS, "SCARD %s", take_endpoints);
}

/* Warns once per model of the batch whose account+model bucket sets no
 * limit and that no endpoint serves (an endpoint's limits are its own): its
 * jobs would run unlimited, which is rarely what was meant (a limit set for
 * "gpt-4o" does not cover "gpt-4o-mini"). */
static void warn_unlimited_models(const struct llmq_cli *cli, const struct batch_models *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->requests[i] <= 0 && m->tokens[i] <= 0 && m->endpoints[i] == 0)
            llmq_cli_error(cli,
                           "warning: model %s has no limit in account %s: its jobs run "
                           "unlimited (llmq limits set %s --rpm N --tpm N)",
                           m->name[i], cli->account, m->name[i]);
}

/* The least time (ms) the models' limits allow for the jobs left: each model
 * has its own bucket, so the slowest model's; -1 when no model has a limit.
 * (A lower bound: other work shares the buckets, and tenant, user and
 * headroom limits can only slow it.) */
static long long limits_eta_ms(const struct batch_models *m)
{
    double eta = -1;
    for (size_t i = 0; i < m->n; i++) {
        double t = -1;
        if (m->requests[i] > 0)
            t = (double)m->left_jobs[i] * (double)m->period_ms[i] / (double)m->requests[i];
        if (m->tokens[i] > 0) {
            double tt = (double)m->left_tokens[i] * (double)m->period_ms[i] / (double)m->tokens[i];
            t = tt > t ? tt : t;
        }
        eta = t > eta ? t : eta;
    }
    return eta < 0 ? -1 : (long long)eta;
}

/* State of --wait: where results go, what was seen, the progress display. */
struct waiting {
    const struct llmq_cli *cli;
    redisContext *c;
    const char *prefix;
    FILE *out;
    int write_failed;
    size_t dead;
    long long base_429; /* P stats http_429 when the wait began */
    struct llmq_progress progress;
    int show_progress;
    size_t total;
    const struct llmq_batch *b;
    struct batch_models *models;    /* for the ETA: left_* count down as jobs end */
    size_t done;                    /* jobs reported, over every connection */
    struct llmq_job_idset *pending; /* ids not reported yet (keys: the batch's) */
    long long in_flight;            /* delivered and not settled, account-wide */
    int no_worker;                  /* -1 not checked yet */
    long long checked_ms;
    size_t checked_done; /* jobs done at the last check */
};

/* Reads how many of the account's jobs are in flight and whether any live
 * worker (heartbeat in P workers within LLMQ_WORKER_LIVE_MS) consumes it.
 * Says so on stderr when no worker does while left jobs wait, and again when
 * one shows up. */
static void check_consumers(struct waiting *w, size_t left)
{
    redisContext *c = w->c;
    char key[LLMQ_KEY_FIXED_MAX];
    /* the prefix is valid and every key here is fixed: they fit */
    for (int i = 0; i < LLMQ_PRIORITY_COUNT; i++) {
        llmq_key(key, sizeof(key), w->prefix, LLMQ_KEY_QUEUE,
                 llmq_priority_name(llmq_priority_by_rank(i)), NULL);
        redisAppendCommand(c, "XPENDING %s %s", key, LLMQ_GROUP);
    }
    llmq_key(key, sizeof(key), w->prefix, LLMQ_KEY_WORKERS, NULL, NULL);
    redisAppendCommand(c, "HGETALL %s", key);
    redisAppendCommand(c, "TIME");
    enum { HB = LLMQ_PRIORITY_COUNT, NOW, REPLIES }; /* after the XPENDINGs */
    redisReply *r[REPLIES] = {0};
    int ok = 1;
    for (int i = 0; i < REPLIES; i++)
        if (redisGetReply(c, (void **)&r[i]) != REDIS_OK) {
            ok = 0;
            r[i] = NULL;
            break;
        }
    for (int i = 0; ok && i < LLMQ_PRIORITY_COUNT; i++) { /* a cluster's redirection */
        llmq_key(key, sizeof(key), w->prefix, LLMQ_KEY_QUEUE,
                 llmq_priority_name(llmq_priority_by_rank(i)), NULL);
        r[i] = llmq_redis_redo(c, r[i], "XPENDING %s %s", key, LLMQ_GROUP);
    }
    llmq_key(key, sizeof(key), w->prefix, LLMQ_KEY_WORKERS, NULL, NULL);
    if (ok)
        r[HB] = llmq_redis_redo(c, r[HB], "HGETALL %s", key);
    long long pending = 0, now = 0;
    int live = 0;
    for (int i = 0; ok && i < LLMQ_PRIORITY_COUNT; i++)
        pending += llmq_reply_int_or(llmq_reply_at(r[i], 0), 0);
    if (ok)
        now = llmq_reply_int_or(llmq_reply_at(r[NOW], 0), 0) * 1000 +
              llmq_reply_int_or(llmq_reply_at(r[NOW], 1), 0) / 1000;
    for (size_t i = 0; ok && llmq_reply_at(r[HB], i + 1) != NULL; i += 2)
        live |= now - llmq_reply_int_or(llmq_reply_at(r[HB], i + 1), 0) <= LLMQ_WORKER_LIVE_MS;
    for (int i = 0; i < REPLIES; i++)
        if (r[i] != NULL)
            freeReplyObject(r[i]);
    if (!ok)
        return; /* the wait reports the connection */
    w->in_flight = pending;
    /* The arrival is told even when it finished the jobs between two checks
     * (left == 0); the absence only while jobs wait. */
    if (w->no_worker != !live && (left > 0 || (live && w->no_worker == 1))) {
        if (w->show_progress && w->progress.tty && w->progress.drawn) {
            fputs("\r\033[K", stderr);
            w->progress.drawn = 0;
        }
        if (!live)
            llmq_cli_error(w->cli,
                           "no worker is consuming account %s: none seen in the last %d s "
                           "(llmq status lists workers); the jobs stay queued until one runs",
                           w->cli->account, LLMQ_WORKER_LIVE_MS / 1000);
        else if (w->no_worker == 1)
            llmq_cli_error(w->cli, "a worker is consuming account %s now", w->cli->account);
    }
    if (left > 0 || live)
        w->no_worker = !live;
}

/* The progress counts of the wait: running is the account's jobs in flight,
 * at most those of this batch not ended; the rest wait. */
static void counts_of(const struct waiting *w, size_t done, struct llmq_progress_counts *pc)
{
    size_t left = w->total - done;
    size_t running = w->in_flight < 0 ? 0 : (size_t)w->in_flight;
    if (running > left)
        running = left;
    *pc = (struct llmq_progress_counts){.done = done,
                                        .dead = w->dead,
                                        .queued = left - running,
                                        .running = running,
                                        .n429 = llmq_job_store_stat(w->c, w->prefix, "http_429") -
                                                w->base_429,
                                        .no_worker = w->no_worker == 1,
                                        .limit_eta_ms = limits_eta_ms(w->models)};
}

static void on_result(const char *id, int dead, const char *line, void *ud)
{
    struct waiting *w = ud;
    long idx = 0;
    if (!llmq_job_idset_get(w->pending, id, &idx))
        return; /* reported before a reconnect (each wait reports an id once) */
    llmq_job_idset_remove(w->pending, id);
    w->done++;
    size_t m = w->models->of_job[idx];
    w->models->left_jobs[m]--;
    w->models->left_tokens[m] -= w->b->jobs[idx].cost.total_tokens;
    if (dead)
        w->dead++;
    if (w->show_progress && w->progress.tty && w->progress.drawn && w->out == stdout) {
        fputs("\r\033[K", stderr); /* results and the bar share the terminal */
        w->progress.drawn = 0;
    }
    if (fprintf(w->out, "%s\n", line) < 0)
        w->write_failed = 1;
}

static void on_tick(size_t done_now, size_t total, void *ud)
{
    struct waiting *w = ud;
    (void)done_now; /* this connection's wait's count: w->done counts them all */
    (void)total;
    size_t done = w->done;
    fflush(w->out);
    long long now = llmq_monotonic_ms();
    int was_no_worker = w->no_worker;
    /* Once a second, and at once when jobs ended while no worker was seen:
     * someone consumes, and a fast worker may be done before the next check. */
    if (now - w->checked_ms >= 1000 || (w->no_worker == 1 && done > w->checked_done)) {
        check_consumers(w, w->total - done);
        w->checked_ms = now;
        w->checked_done = done;
    }
    if (w->show_progress) {
        struct llmq_progress_counts pc;
        counts_of(w, done, &pc);
        /* a change of who consumes is worth a line at once */
        llmq_progress_update(&w->progress, &pc, w->no_worker != was_no_worker);
    }
}

/* How long --wait keeps trying to reach a Redis that went away before it
 * gives up (the workers try for ever; a person waiting wants an answer). */
#define WAIT_RECONNECT_MS 60000
/* Ids a resume hint names one by one. */
#define RESUME_IDS_SHOWN 10

/* Prints s as one shell word (single-quoted). */
static void put_shell_word(const char *s)
{
    fputc('\'', stderr);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", stderr);
        else
            fputc(*s, stderr);
    }
    fputc('\'', stderr);
}

/* Says how to pick up the jobs not ended yet (they keep running). */
static void print_resume_hint(const struct llmq_cli *cli, const struct enqueue_opts *o,
                              const struct llmq_batch *b, const struct waiting *w)
{
    size_t left = w->total - w->done, shown = 0;
    llmq_cli_error(cli,
                   "%zu of %zu job(s) not ended yet; they stay queued. To wait for them:", left,
                   w->total);
    if (strcmp(o->file, "-") != 0) {
        fprintf(stderr, "  llmq enqueue --wait --account %s ", cli->account);
        put_shell_word(o->file);
        fputs("   (ids already enqueued are not enqueued again)\n", stderr);
    }
    fprintf(stderr, "  llmq results --wait --account %s", cli->account);
    char id[LLMQ_JOB_ID_MAX + 1];
    for (size_t i = 0; i < b->n_jobs && shown < RESUME_IDS_SHOWN; i++)
        if (llmq_job_idset_get(w->pending, b->jobs[i].id, NULL)) {
            fputc(' ', stderr);
            put_shell_word(llmq_job_id_to_custom(b->jobs[i].id, id, sizeof(id)));
            shown++;
        }
    if (left > shown)
        fprintf(stderr, " ...   (%zu more ids)", left - shown);
    fputc('\n', stderr);
}

/* After the wait failed with err: 1 when the connection is what failed (or
 * Redis answered that it is still loading its data after a restart), so a
 * new connection may go on. */
static int connection_lost(const redisContext *c, const struct llmq_error *err)
{
    return c->err != 0 || strstr(err->msg, "LOADING") != NULL;
}

/* Waits for the jobs of b not reported yet on w->c, and on a lost connection
 * reconnects (WAIT_RECONNECT_MS at most, within --timeout) and waits again,
 * so a Redis restart costs a pause, not the wait. Returns the rc of the last
 * wait (err says why when Redis stayed away). */
static enum llmq_rc wait_reconnecting(struct waiting *w, const struct enqueue_opts *o,
                                      const struct llmq_batch *b, const char **ids,
                                      struct llmq_job_waiter *waiter, struct llmq_error *err)
{
    long long start = llmq_monotonic_ms();
    long long end = o->timeout_s < 0 ? -1 : start + o->timeout_s * 1000;
    for (;;) {
        size_t k = 0;
        for (size_t i = 0; i < b->n_jobs; i++)
            if (llmq_job_idset_get(w->pending, b->jobs[i].id, NULL))
                ids[k++] = b->jobs[i].id;
        long long now = llmq_monotonic_ms();
        long long left = end < 0 ? -1 : (end > now ? end - now : 0);
        enum llmq_rc rc = llmq_job_store_wait(w->c, w->prefix, ids, k, left, waiter, NULL, err);
        if (rc == LLMQ_OK || rc == LLMQ_ETIMEOUT || !connection_lost(w->c, err))
            return rc;
        long long lost_at = llmq_monotonic_ms(), until = lost_at + WAIT_RECONNECT_MS;
        if (end >= 0 && end < until)
            until = end;
        if (w->show_progress && w->progress.tty && w->progress.drawn) {
            fputs("\r\033[K", stderr);
            w->progress.drawn = 0;
        }
        llmq_cli_error(w->cli, "lost Redis (%s); reconnecting for up to %lld s", err->msg,
                       (until - llmq_monotonic_ms() + 999) / 1000);
        char where[300];
        struct llmq_error cerr = {0};
        redisContext *nc = llmq_cli_reconnect(w->cli, until, where, sizeof(where), &cerr);
        if (nc == NULL)
            return llmq_error_set(err, LLMQ_EREDIS,
                                  "Redis at %s did not come back within %lld s (%s): gave up "
                                  "waiting",
                                  where, (llmq_monotonic_ms() - lost_at + 999) / 1000, cerr.msg);
        llmq_cli_error(w->cli, "reconnected to Redis at %s", where);
        redisFree(w->c);
        w->c = nc;
    }
}

/* Waits for every job of the batch (new and already present) and streams
 * their results. *cp is the connection (replaced by a new one should it be
 * lost; the caller frees what it holds). Returns the exit code. */
static int enqueue_wait(struct llmq_cli *cli, redisContext **cp, const char *prefix,
                        const struct enqueue_opts *o, const struct llmq_batch *b,
                        struct batch_models *models)
{
    struct waiting w = {.cli = cli,
                        .b = b,
                        .models = models,
                        .c = *cp,
                        .prefix = prefix,
                        .out = o->out ? o->out : stdout,
                        .show_progress = !o->no_progress,
                        .total = b->n_jobs,
                        .no_worker = -1,
                        .pending = llmq_job_idset_new(b->n_jobs)};
    const char **ids = malloc(sizeof(*ids) * (b->n_jobs + 1));
    struct llmq_error err = {0};
    int full = ids == NULL || w.pending == NULL;
    for (size_t i = 0; !full && i < b->n_jobs; i++)
        full = llmq_job_idset_add(w.pending, b->jobs[i].id, (long)i, NULL) < 0;
    if (full) {
        free(ids);
        llmq_job_idset_free(w.pending);
        llmq_cli_error(cli, "out of memory");
        return LLMQ_EXIT_FAIL;
    }
    w.base_429 = llmq_job_store_stat(w.c, prefix, "http_429");
    llmq_progress_init(&w.progress, stderr, cli->prog, b->n_jobs);
    w.checked_ms = llmq_monotonic_ms() - 1000; /* the first tick checks */
    struct llmq_job_waiter waiter = {.on_result = on_result,
                                     .on_tick = on_tick,
                                     .ud = &w,
                                     .tick_ms = w.progress.tty ? 200 : 1000};
    /* The first view at once, before the wait counts any result: a fast
     * worker may end a job before the first tick, and the bar then never
     * showed where the jobs started. */
    on_tick(0, b->n_jobs, &w);
    enum llmq_rc rc = wait_reconnecting(&w, o, b, ids, &waiter, &err);
    *cp = w.c;
    if (w.show_progress) {
        struct llmq_progress_counts pc;
        counts_of(&w, w.done, &pc);
        llmq_progress_end(&w.progress, &pc);
    }
    if (fflush(w.out) != 0 || ferror(w.out))
        w.write_failed = 1;
    free(ids);
    if (rc != LLMQ_OK)
        llmq_cli_error(cli, "%s", err.msg);
    if (rc != LLMQ_OK && w.done < w.total)
        print_resume_hint(cli, o, b, &w);
    llmq_job_idset_free(w.pending);
    if (w.write_failed)
        llmq_cli_error(cli, "writing results failed");
    if (rc != LLMQ_OK || w.write_failed)
        return LLMQ_EXIT_FAIL;
    if (w.dead > 0) {
        llmq_cli_error(cli, "%zu of %zu job(s) were dead-lettered (see llmq dead list)", w.dead,
                       w.done);
        return LLMQ_EXIT_DEAD;
    }
    return LLMQ_EXIT_OK;
}

int llmq_cmd_enqueue(struct llmq_cli *cli, int argc, char **argv)
{
    struct enqueue_opts o = {0};
    struct llmq_batch b = {0};
    struct llmq_error err = {0};
    char prefix[LLMQ_KEY_PREFIX_MAX];
    redisContext *c = NULL;
    struct llmq_job_outcome *out = NULL;
    struct batch_models models = {0};
    int code = LLMQ_EXIT_OK;
    if (parse_args(cli, argc, argv, &o, &code) != 0)
        return code;
    if (llmq_cli_prefix(cli, prefix, sizeof(prefix)) != 0)
        return LLMQ_EXIT_USAGE;
    if (!o.check_only) {
        c = llmq_cli_connect(cli, &code);
        if (c == NULL)
            return code;
    }
    if (o.max_body_bytes == 0) /* no flag: the setting, or without Redis (--check) its default */
        o.max_body_bytes = c == NULL ? LLMQ_JOB_MAX_BODY_BYTES_DEFAULT
                                     : llmq_job_store_setting(c, prefix, "max_body_bytes",
                                                              LLMQ_JOB_MAX_BODY_BYTES_DEFAULT);
    /* a value in P settings is not trusted beyond sense (set by hand: the
     * CLI refuses it), and saying so beats a silent fallback */
    if (o.max_body_bytes <= 0 || o.max_body_bytes > LLMQ_JOB_MAX_BODY_BYTES_LIMIT) {
        llmq_cli_error(cli,
                       "warning: settings max_body_bytes %lld is out of range: using %d "
                       "(llmq settings set max_body_bytes N)",
                       o.max_body_bytes, LLMQ_JOB_MAX_BODY_BYTES_DEFAULT);
        o.max_body_bytes = LLMQ_JOB_MAX_BODY_BYTES_DEFAULT;
    }
    o.d.max_body_bytes = (size_t)o.max_body_bytes;
    /* the account's cache defaults (llmq cache set) apply to lines that ask nothing */
    o.d.cache_defaults = c != NULL && llmq_job_store_cache_defaults(c, prefix);
    code = load_batch(cli, &o, &b);
    if (code >= 0)
        goto out;
    code = LLMQ_EXIT_OK;
    if (o.wait && o.output != NULL) {
        o.out = fopen(o.output, "w");
        if (o.out == NULL) {
            llmq_cli_error(cli, "%s: cannot open for writing", o.output);
            code = LLMQ_EXIT_FAIL;
            goto out;
        }
    }
    out = calloc(b.n_jobs + 1, sizeof(*out));
    /* no jobs: nothing is written (prepare would create the streams) */
    if (out == NULL ||
        (b.n_jobs > 0 &&
         (llmq_job_store_prepare(c, prefix, &err) != LLMQ_OK ||
          llmq_job_store_fallbacks(c, prefix, b.jobs, b.n_jobs, o.d.cost, &err) != LLMQ_OK ||
          llmq_job_store_push(c, prefix, b.jobs, b.n_jobs, out, &err) != LLMQ_OK))) {
        llmq_cli_error(cli, "%s", out ? err.msg : "out of memory");
        /* a job the account refuses (a USD budget and no price): invalid input */
        code = out && err.rc == LLMQ_EINVAL ? LLMQ_EXIT_USAGE : LLMQ_EXIT_FAIL;
        goto out;
    }
    if (b.n_jobs > 0 && batch_models_read(c, prefix, &b, &models) != 0 && models.name == NULL) {
        llmq_cli_error(cli, "out of memory");
        code = LLMQ_EXIT_FAIL;
        goto out;
    }
    warn_unlimited_models(cli, &models);
    report_outcomes(cli, &o, &b, out);
    if (o.wait)
        code = enqueue_wait(cli, &c, prefix, &o, &b, &models);
out:
    batch_models_free(&models);
    if (o.out != NULL && fclose(o.out) != 0 && code == LLMQ_EXIT_OK) {
        llmq_cli_error(cli, "%s: write failed", o.output);
        code = LLMQ_EXIT_FAIL;
    }
    free(out);
    llmq_batch_clear(&b);
    if (c != NULL)
        redisFree(c);
    return code;
}
