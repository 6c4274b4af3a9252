/* The producer API (llmq/llmq.h) over the job codec and the job store.
 *
 * A handle owns one synchronous Redis connection. After a connection error
 * the next call reconnects (and prepares the streams and script again), so a
 * long-lived producer survives a Redis restart without a new handle. */
#include "llmq/llmq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "jobs/job.h"
#include "jobs/job_store.h"
#include "redis/keys.h"
#include "redis/redis.h"

#define DEFAULT_TIMEOUT_MS 5000

struct llmq_producer {
    redisContext *c; /* NULL: reconnect on next use */
    struct llmq_redis_url url;
    int timeout_ms;
    char account[LLMQ_KEY_PREFIX_MAX];
    char prefix[LLMQ_KEY_PREFIX_MAX];
    long long max_body_bytes; /* from P settings, read at connect */
};

static const char *env_or(const char *v, const char *env, const char *def)
{
    if (v != NULL && v[0] != '\0')
        return v;
    const char *e = getenv(env);
    return e != NULL && e[0] != '\0' ? e : def;
}

/* Connects p->c when it is not connected (or broken). */
static enum llmq_rc ensure_connected(struct llmq_producer *p, struct llmq_error *err)
{
    if (p->c != NULL && !p->c->err)
        return LLMQ_OK;
    if (p->c != NULL) {
        redisFree(p->c);
        p->c = NULL;
    }
    redisContext *c = llmq_redis_connect_parsed(&p->url, p->timeout_ms, err);
    if (c == NULL)
        return err ? err->rc : LLMQ_EREDIS;
    enum llmq_rc rc = llmq_job_store_prepare(c, p->prefix, err);
    if (rc != LLMQ_OK) {
        redisFree(c);
        return rc;
    }
    p->max_body_bytes =
        llmq_job_store_setting(c, p->prefix, "max_body_bytes", LLMQ_JOB_MAX_BODY_BYTES_DEFAULT);
    if (p->max_body_bytes <= 0 || p->max_body_bytes > (1LL << 40))
        p->max_body_bytes = LLMQ_JOB_MAX_BODY_BYTES_DEFAULT;
    p->c = c;
    return LLMQ_OK;
}

enum llmq_rc llmq_producer_open(const struct llmq_producer_options *opt, struct llmq_producer **out,
                                struct llmq_error *err)
{
    struct llmq_producer_options none = {0};
    if (opt == NULL)
        opt = &none;
    struct llmq_producer *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "producer: out of memory");
    p->timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms : DEFAULT_TIMEOUT_MS;
    const char *url = env_or(opt->redis_url, "LLMQ_REDIS_URL", LLMQ_REDIS_URL_DEFAULT);
    const char *account = env_or(opt->account, "LLMQ_ACCOUNT", "default");
    snprintf(p->account, sizeof(p->account), "%s", account);
    enum llmq_rc rc = llmq_redis_url_parse(url, &p->url, err);
    if (rc == LLMQ_OK)
        rc = llmq_account_prefix(account, p->prefix, sizeof(p->prefix), err);
    llmq_redis_url_route(&p->url, account); /* a cluster: the account's node */
    if (rc == LLMQ_OK)
        rc = ensure_connected(p, err);
    if (rc != LLMQ_OK) {
        llmq_producer_close(p);
        return rc;
    }
    *out = p;
    return LLMQ_OK;
}

void llmq_producer_close(struct llmq_producer *p)
{
    if (p == NULL)
        return;
    if (p->c != NULL)
        redisFree(p->c);
    /* the URL holds the password: do not leave it in freed memory */
    memset(&p->url, 0, sizeof(p->url));
    free(p);
}

const char *llmq_producer_account(const struct llmq_producer *p)
{
    return p->account;
}

void llmq_free(void *ptr)
{
    free(ptr);
}

static void producer_defaults(const struct llmq_producer *p, struct llmq_job_defaults *d)
{
    llmq_job_defaults_init(d);
    d->max_body_bytes = (size_t)p->max_body_bytes;
    d->now_ms = llmq_wall_ms();
    d->cache_defaults = 1; /* a job that asks nothing: the account's cache default decides */
}

/* Fills res from a validated job and its outcome. */
static void fill_result(struct llmq_enqueue_result *res, const struct llmq_job *j,
                        const struct llmq_job_outcome *o)
{
    res->rc = o->created ? LLMQ_OK : LLMQ_EDUPLICATE;
    snprintf(res->job_id, sizeof(res->job_id), "%s", j->id);
    snprintf(res->state, sizeof(res->state), "%s", o->state);
    res->cost_tokens = j->cost.total_tokens;
    res->message[0] = '\0';
}

/* Validates every request into jobs[0..n); marks the invalid ones in res.
 * Returns LLMQ_OK when all are valid, else LLMQ_EINVAL (or LLMQ_ENOMEM). */
static enum llmq_rc validate_all(const struct llmq_producer *p, const struct llmq_request *reqs,
                                 size_t n, struct llmq_job *jobs, struct llmq_enqueue_result *res,
                                 struct llmq_error *err)
{
    struct llmq_job_defaults d;
    size_t bad = 0, first_bad = 0;
    producer_defaults(p, &d);
    for (size_t i = 0; i < n; i++) {
        struct llmq_error e = {0};
        memset(&res[i], 0, sizeof(res[i]));
        if (llmq_job_from_request(reqs[i].url, reqs[i].body, &reqs[i].options, &d, &jobs[i], &e) ==
            LLMQ_OK)
            continue;
        if (e.rc == LLMQ_ENOMEM)
            return llmq_error_set(err, LLMQ_ENOMEM, "%s", e.msg);
        res[i].rc = e.rc;
        snprintf(res[i].message, sizeof(res[i].message), "%s", e.msg);
        if (bad++ == 0)
            first_bad = i;
    }
    if (bad > 0)
        return llmq_error_set(err, LLMQ_EINVAL, "%zu invalid request(s), first #%zu: %s", bad,
                              first_bad, res[first_bad].message);
    return LLMQ_OK;
}

enum llmq_rc llmq_producer_enqueue_many(struct llmq_producer *p, const struct llmq_request *reqs,
                                        size_t n, struct llmq_enqueue_result *res,
                                        struct llmq_error *err)
{
    if (p == NULL || (n > 0 && (reqs == NULL || res == NULL)))
        return llmq_error_set(err, LLMQ_EINVAL, "enqueue: NULL argument");
    enum llmq_rc rc = ensure_connected(p, err);
    if (rc != LLMQ_OK || n == 0)
        return rc;
    struct llmq_job *jobs = calloc(n, sizeof(*jobs));
    struct llmq_job_outcome *outs = calloc(n, sizeof(*outs));
    if (jobs == NULL || outs == NULL)
        rc = llmq_error_set(err, LLMQ_ENOMEM, "enqueue: out of memory");
    if (rc == LLMQ_OK)
        rc = validate_all(p, reqs, n, jobs, res, err);
    if (rc == LLMQ_OK)
        rc = llmq_job_store_fallbacks(p->c, p->prefix, jobs, n, NULL, err);
    if (rc == LLMQ_OK)
        rc = llmq_job_store_push(p->c, p->prefix, jobs, n, outs, err);
    for (size_t i = 0; rc == LLMQ_OK && i < n; i++)
        fill_result(&res[i], &jobs[i], &outs[i]);
    for (size_t i = 0; jobs != NULL && i < n; i++)
        llmq_job_clear(&jobs[i]);
    free(jobs);
    free(outs);
    return rc;
}

enum llmq_rc llmq_producer_enqueue(struct llmq_producer *p, const char *url, const char *body,
                                   const struct llmq_job_options *opt,
                                   struct llmq_enqueue_result *res, struct llmq_error *err)
{
    struct llmq_request req = {.url = url, .body = body};
    struct llmq_enqueue_result local;
    if (opt != NULL)
        req.options = *opt;
    if (res == NULL)
        res = &local;
    enum llmq_rc rc = llmq_producer_enqueue_many(p, &req, 1, res, err);
    if (rc == LLMQ_EINVAL && res->rc != LLMQ_OK) {
        /* one request: its own error is the call's error */
        return llmq_error_set(err, res->rc, "%s", res->message);
    }
    if (rc == LLMQ_OK && res->rc == LLMQ_EDUPLICATE)
        return llmq_error_set(err, LLMQ_EDUPLICATE, "job %s already exists (%s)", res->job_id,
                              res->state);
    return rc;
}

enum llmq_rc llmq_producer_result(struct llmq_producer *p, const char *job_id, char **line,
                                  int *dead, struct llmq_error *err)
{
    if (p == NULL || line == NULL || !llmq_name_valid(job_id))
        return llmq_error_set(err, LLMQ_EINVAL, "result: bad argument or job id");
    enum llmq_rc rc = ensure_connected(p, err);
    if (rc != LLMQ_OK)
        return rc;
    return llmq_job_store_result(p->c, p->prefix, job_id, line, dead, err);
}

struct wait_adapter {
    llmq_result_cb *cb;
    void *ud;
};

static void on_result(const char *id, int dead, const char *line, void *ud)
{
    struct wait_adapter *a = ud;
    struct llmq_result r = {.job_id = id, .dead = dead, .line = line};
    if (a->cb != NULL)
        a->cb(&r, a->ud);
}

enum llmq_rc llmq_producer_wait(struct llmq_producer *p, const char *const *ids, size_t n,
                                long long timeout_ms, llmq_result_cb *cb, void *userdata,
                                size_t *n_done, struct llmq_error *err)
{
    if (n_done != NULL)
        *n_done = 0;
    if (p == NULL || (n > 0 && ids == NULL))
        return llmq_error_set(err, LLMQ_EINVAL, "wait: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (!llmq_name_valid(ids[i]))
            return llmq_error_set(err, LLMQ_EINVAL, "wait: job id #%zu is not a valid id", i);
    enum llmq_rc rc = ensure_connected(p, err);
    if (rc != LLMQ_OK)
        return rc;
    struct wait_adapter a = {cb, userdata};
    struct llmq_job_waiter w = {.on_result = on_result,
                                .ud = &a,
                                .max_block_ms = p->timeout_ms / 2 > 0 ? p->timeout_ms / 2 : 1};
    return llmq_job_store_wait(p->c, p->prefix, ids, n, timeout_ms, &w, n_done, err);
}
