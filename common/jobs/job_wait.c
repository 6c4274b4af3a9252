/* Waiting for jobs to end: P events tells when, the job's result
 * (job_result.h) says what.
 *
 * Order matters for not missing a job: remember the last id of P events
 * first, then look up results already there, then read P events after the
 * remembered id. A job that ends between the two steps shows up in both and
 * is reported once (it leaves the pending set when reported). Should events
 * be trimmed past a slow reader, the periodic look-up of the still pending
 * results (every RECHECK_MS while idle) finds what was missed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "jobs/job_idset.h"
#include "jobs/job_result.h"
#include "jobs/job_store.h"
#include "redis/keys.h"
#include "redis/redis.h"

#define LOOKUP_CHUNK 512
#define EVENTS_COUNT 64 /* entries of P events read at a time */
/* ids collected from one read: an entry names up to 64 jobs (JOBS_EVENT_JOBS
 * in lua/lib/jobs.lua), so EVENTS_COUNT entries of those fit */
#define ENDED_MAX (EVENTS_COUNT * 64)
#define RECHECK_MS 5000

struct wait_state {
    redisContext *c;
    const char *prefix;
    char events_key[LLMQ_KEY_FIXED_MAX]; /* P events */
    struct llmq_job_idset *pending;
    const struct llmq_job_waiter *w;
    size_t done;
    size_t total;
    char last_event[64];
};

/* Looks up the results of ids[0..n) that are still pending, in pipelined
 * chunks (job_result.h), and reports those found. */
static enum llmq_rc lookup(struct wait_state *s, const char *const *ids, size_t n,
                           struct llmq_error *err)
{
    for (size_t first = 0; first < n; first += LOOKUP_CHUNK) {
        size_t m = n - first < LOOKUP_CHUNK ? n - first : LOOKUP_CHUNK;
        const char *ask[LOOKUP_CHUNK];
        struct llmq_job_result res[LOOKUP_CHUNK];
        size_t k = 0;
        for (size_t i = 0; i < m; i++)
            if (llmq_job_idset_get(s->pending, ids[first + i], NULL))
                ask[k++] = ids[first + i];
        enum llmq_rc rc = k > 0 ? llmq_job_result_read(s->c, s->prefix, ask, k, res, err) : LLMQ_OK;
        if (rc != LLMQ_OK)
            return rc;
        for (size_t i = 0; i < k; i++) {
            if (res[i].line != NULL && llmq_job_idset_remove(s->pending, ask[i])) {
                s->done++;
                if (s->w && s->w->on_result)
                    s->w->on_result(ask[i], res[i].dead, res[i].line, s->w->ud);
            }
            llmq_job_result_clear(&res[i]);
        }
    }
    return LLMQ_OK;
}

/* Remembers the newest entry of P events ("0-0" when empty). */
static enum llmq_rc events_tail(struct wait_state *s, struct llmq_error *err)
{
    redisReply *r = redisCommand(s->c, "XREVRANGE %s + - COUNT 1", s->events_key);
    enum llmq_rc rc = LLMQ_OK;
    snprintf(s->last_event, sizeof(s->last_event), "0-0");
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        rc = llmq_redis_error(s->c, r, "XREVRANGE events", err);
    else if (r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
             r->element[0]->elements == 2 && r->element[0]->element[0]->type == REDIS_REPLY_STRING)
        snprintf(s->last_event, sizeof(s->last_event), "%s", r->element[0]->element[0]->str);
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

/* Reads events after last_event for up to block_ms; collects the pending ids
 * that ended into ended[] (borrowed from the reply, which *reply keeps). */
static enum llmq_rc read_events(struct wait_state *s, long long block_ms, redisReply **reply,
                                const char **ended, size_t *n_ended, struct llmq_error *err)
{
    *n_ended = 0;
    redisReply *r = redisCommand(s->c, "XREAD COUNT %d BLOCK %lld STREAMS %s %s", EVENTS_COUNT,
                                 block_ms, s->events_key, s->last_event);
    *reply = r;
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        return llmq_redis_error(s->c, r, "XREAD events", err);
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return LLMQ_OK; /* nil: nothing within block_ms */
    const redisReply *entries =
        r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2
            ? r->element[0]->element[1]
            : NULL;
    /* ended[] holds ENDED_MAX ids. An entry that might not fit whole is left
     * for the next read (last_event stays before it; what was reported has
     * left the pending set by then); one that alone is larger (a broken
     * server or another writer) is taken as far as it fits, and the
     * periodic look-up finds the rest. */
    for (size_t i = 0; entries && i < entries->elements; i++) {
        const redisReply *e = entries->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_STRING)
            continue;
        const redisReply *fields = e->element[1];
        size_t room = fields->type == REDIS_REPLY_ARRAY ? fields->elements / 2 : 0;
        if (*n_ended > 0 && *n_ended + room > ENDED_MAX)
            break;
        snprintf(s->last_event, sizeof(s->last_event), "%s", e->element[0]->str);
        /* an entry names every job one call finished */
        size_t pos = 0;
        for (const char *id;
             *n_ended < ENDED_MAX && (id = llmq_redis_field_next(fields, "id", &pos)) != NULL;)
            if (llmq_job_idset_get(s->pending, id, NULL))
                ended[(*n_ended)++] = id;
    }
    return LLMQ_OK;
}

static enum llmq_rc wait_loop(struct wait_state *s, const char *const *ids, size_t n,
                              long long timeout_ms, struct llmq_error *err)
{
    long long start = llmq_monotonic_ms(), last_progress = start, last_tick = start;
    int tick_ms = s->w && s->w->tick_ms > 0 ? s->w->tick_ms : 1000;
    /* a blocking read must end before the connection's socket timeout */
    long long max_block = s->w && s->w->max_block_ms > 0 ? s->w->max_block_ms : 2000;
    const char **ended = malloc(sizeof(*ended) * ENDED_MAX);
    enum llmq_rc rc = ended ? LLMQ_OK : llmq_error_set(err, LLMQ_ENOMEM, "wait: out of memory");
    while (rc == LLMQ_OK && llmq_job_idset_count(s->pending) > 0) {
        long long now = llmq_monotonic_ms();
        if (timeout_ms >= 0 && now - start >= timeout_ms) {
            rc = llmq_error_set(err, LLMQ_ETIMEOUT, "wait: %zu of %zu jobs still running",
                                llmq_job_idset_count(s->pending), s->total);
            break;
        }
        long long block = tick_ms < max_block ? tick_ms : max_block;
        if (timeout_ms >= 0 && timeout_ms - (now - start) < block)
            block = timeout_ms - (now - start);
        redisReply *r = NULL;
        size_t n_ended = 0;
        rc = read_events(s, block > 0 ? block : 1, &r, ended, &n_ended, err);
        if (rc == LLMQ_OK && n_ended > 0) {
            last_progress = llmq_monotonic_ms();
            rc = lookup(s, ended, n_ended, err);
        } else if (rc == LLMQ_OK && llmq_monotonic_ms() - last_progress >= RECHECK_MS) {
            last_progress = llmq_monotonic_ms();
            rc = lookup(s, ids, n, err);
        }
        if (r != NULL)
            freeReplyObject(r);
        if (s->w && s->w->on_tick && llmq_monotonic_ms() - last_tick >= tick_ms) {
            last_tick = llmq_monotonic_ms();
            s->w->on_tick(s->done, s->total, s->w->ud);
        }
    }
    free(ended);
    return rc;
}

enum llmq_rc llmq_job_store_wait(redisContext *c, const char *prefix, const char *const *ids,
                                 size_t n, long long timeout_ms, const struct llmq_job_waiter *w,
                                 size_t *n_done, struct llmq_error *err)
{
    struct wait_state s = {.c = c, .prefix = prefix, .w = w};
    enum llmq_rc rc =
        llmq_key(s.events_key, sizeof(s.events_key), prefix, LLMQ_KEY_EVENTS, NULL, err);
    s.pending = rc == LLMQ_OK ? llmq_job_idset_new(n) : NULL;
    if (rc == LLMQ_OK && s.pending == NULL)
        rc = llmq_error_set(err, LLMQ_ENOMEM, "wait: out of memory");
    for (size_t i = 0; rc == LLMQ_OK && i < n; i++)
        if (llmq_job_idset_add(s.pending, ids[i], 0, NULL) < 0)
            rc = llmq_error_set(err, LLMQ_ENOMEM, "wait: out of memory");
    s.total = s.pending ? llmq_job_idset_count(s.pending) : 0;
    if (rc == LLMQ_OK)
        rc = events_tail(&s, err);
    if (rc == LLMQ_OK)
        rc = lookup(&s, ids, n, err);
    if (rc == LLMQ_OK && w && w->on_tick)
        w->on_tick(s.done, s.total, w->ud);
    if (rc == LLMQ_OK)
        rc = wait_loop(&s, ids, n, timeout_ms, err);
    if (w && w->on_tick && s.pending != NULL)
        w->on_tick(s.done, s.total, w->ud);
    if (n_done != NULL)
        *n_done = s.done;
    llmq_job_idset_free(s.pending);
    return rc;
}
