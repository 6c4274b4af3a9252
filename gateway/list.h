/* One page of a list (GET /v1/files, GET /v1/batches): ids newest first from
 * a ZSET scored by creation time, `after` as the cursor, each object read with
 * one HMGET of the fields it needs, answered as OpenAI's list object
 * {"object": "list", "data", "first_id", "last_id", "has_more"}. */
#ifndef LLMQ_GW_LIST_H
#define LLMQ_GW_LIST_H

#include <hiredis/hiredis.h>
#include <jansson.h>

#include "http.h"
#include "redis/keys.h"

/* Makes the JSON of one object from the values of the fields (vals: the
 * HMGET reply, aligned with fields), or NULL to leave it out (not the
 * caller's, or gone). Returns a new reference. */
typedef json_t *gw_list_item_fn(struct gw_request *r, const char *id, const redisReply *vals);

struct gw_list_spec {
    enum llmq_key_kind index;  /* the ZSET: LLMQ_KEY_GW_FILES */
    enum llmq_key_kind object; /* the hash of one, by id: LLMQ_KEY_GW_FILE */
    const char *const *fields; /* NULL-terminated */
    gw_list_item_fn *item;
    int limit_default, limit_max;
};

/* Answers r with the page its query (after, limit) asks for. */
void gw_list_respond(struct gw_request *r, const struct gw_list_spec *spec);

/* The value of HMGET reply element i as a string, or NULL. */
const char *gw_list_val(const redisReply *vals, size_t i);

/* Fetches the fields of one object: cb gets the HMGET reply (NULL reply:
 * Redis failed; r answered by the caller). Holds r until cb ran. */
typedef void gw_object_cb(struct gw_request *r, const redisReply *vals);
void gw_object_fetch(struct gw_request *r, enum llmq_key_kind object, const char *id,
                     const char *const *fields, gw_object_cb *cb);

#endif
