/* The reply of lua/offload_stats.lua as JSON; see offload_stats.h. */
#include "jobs/offload_stats.h"

#include <stdlib.h>
#include <string.h>

#include "redis/reply_read.h"
#include "redis/script.h"

#define FIELDS 13 /* values per model in the reply */
#define NANO_PER_USD 1e9

/* An integer of the reply (or its decimal text); 0 when it is neither. */
static long long num(const redisReply *e)
{
    return llmq_reply_int_or(e, 0);
}

/* One model's entry m as its object, or NULL when m is of the wrong shape. */
static json_t *entry(const redisReply *m)
{
    if (m->type != REDIS_REPLY_ARRAY || m->elements < FIELDS ||
        m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_STRING ||
        m->element[6]->type != REDIS_REPLY_ARRAY)
        return NULL;
    json_t *batches = json_object();
    const redisReply *st = m->element[6];
    for (size_t i = 0; i + 1 < st->elements; i += 2)
        if (st->element[i]->type == REDIS_REPLY_STRING)
            json_object_set_new(batches, st->element[i]->str,
                                json_integer(num(st->element[i + 1])));
    long long limit = num(m->element[5]);
    return json_pack("{s:s,s:s,s:I,s:I,s:I,s:o,s:o,s:I,s:I,s:I,s:I,s:f,s:I}", "model",
                     m->element[0]->str, "mode", m->element[1]->str, "staged", num(m->element[2]),
                     "offloaded", num(m->element[3]), "enqueued_tokens", num(m->element[4]),
                     "queue_limit_tokens", limit >= 0 ? json_integer(limit) : json_null(),
                     "batches", batches, "staged_ever", num(m->element[7]), "offloaded_ever",
                     num(m->element[8]), "done_ever", num(m->element[9]), "failed_ever",
                     num(m->element[10]), "saved_usd", (double)num(m->element[11]) / NANO_PER_USD,
                     "batches_ended", num(m->element[12]));
}

json_t *llmq_offload_stats_json(const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return NULL;
    json_t *out = json_array();
    for (size_t i = 0; i < r->elements; i++) {
        json_t *e = entry(r->element[i]);
        if (e != NULL)
            json_array_append_new(out, e);
    }
    return out;
}

json_t *llmq_offload_stats_read(redisContext *c, const char *prefix, struct llmq_error *err)
{
    const char *argv[] = {prefix};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_OFFLOAD_STATS, 1, 1, argv, NULL, err);
    if (r == NULL)
        return NULL;
    json_t *out = llmq_offload_stats_json(r);
    if (out == NULL)
        llmq_error_set(err, LLMQ_ESCRIPT, "offload_stats: %s",
                       r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    freeReplyObject(r);
    return out;
}
