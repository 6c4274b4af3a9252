/* Lists and single-object reads shared by files.c and batches.c. Every
 * Redis command is a step of its request (request_step.h): a page's next
 * command is sent from the callback of the one before, so the request is
 * kept until the page is answered. */
#include "list.h"

#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request_step.h"

#define FIELDS_MAX 32

const char *gw_list_val(const redisReply *vals, size_t i)
{
    if (vals == NULL || vals->type != REDIS_REPLY_ARRAY || i >= vals->elements ||
        vals->element[i]->type != REDIS_REPLY_STRING)
        return NULL;
    return vals->element[i]->str;
}

/* Sends HMGET <the object's key> fields... for r; REDIS_ERR (nothing sent)
 * also when id is too long for a key. */
static int hmget(struct gw_request *r, redisAsyncContext *ac, enum llmq_key_kind object,
                 const char *id, const char *const *fields, redisCallbackFn *cb, void *pd)
{
    struct gw *gw = r->gw;
    const char *argv[FIELDS_MAX + 2];
    char key[LLMQ_KEY_FIXED_MAX + GW_ID_MAX];
    int argc = 0;
    if (llmq_key(key, sizeof(key), gw->prefix, object, id, NULL) != LLMQ_OK)
        return REDIS_ERR;
    argv[argc++] = "HMGET";
    argv[argc++] = key;
    for (size_t i = 0; fields[i] != NULL && argc < FIELDS_MAX + 2; i++)
        argv[argc++] = fields[i];
    return gw_step_command_argv(r, ac, cb, pd, argc, argv, NULL);
}

struct object_fetch {
    struct gw_request *r;
    gw_object_cb *cb;
};

static void on_object(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct object_fetch *f = privdata;
    redisReply *rep = reply;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY)
        f->cb(f->r, NULL);
    else
        f->cb(f->r, rep);
    free(f);
}

void gw_object_fetch(struct gw_request *r, enum llmq_key_kind object, const char *id,
                     const char *const *fields, gw_object_cb *cb)
{
    redisAsyncContext *ac = gw_redis(r->gw);
    struct object_fetch *f = ac ? malloc(sizeof(*f)) : NULL;
    if (f == NULL) {
        cb(r, NULL);
        return;
    }
    *f = (struct object_fetch){r, cb};
    if (hmget(r, ac, object, id, fields, on_object, f) != REDIS_OK) {
        free(f);
        cb(r, NULL);
    }
}

/* A page being read: the ids, then one HMGET each. */
struct page {
    struct gw_request *r;
    const struct gw_list_spec *spec;
    struct gw_list_query q;
    json_t *data;
    json_t **items; /* per id, in order */
    char **ids;
    size_t n, pending;
    int has_more, failed;
};

static void page_free(struct page *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->ids[i]);
        json_decref(p->items[i]);
    }
    free(p->ids);
    free(p->items);
    json_decref(p->data);
    free(p);
}

static void page_answer(struct page *p)
{
    if (p->failed) {
        gw_respond_no_redis(p->r);
        page_free(p);
        return;
    }
    json_t *data = json_array();
    const char *first = NULL, *last = NULL;
    for (size_t i = 0; i < p->n; i++) {
        if (p->items[i] == NULL)
            continue;
        if (first == NULL)
            first = p->ids[i];
        last = p->ids[i];
        json_array_append(data, p->items[i]);
    }
    json_t *out = json_pack("{s:s, s:o, s:s?, s:s?, s:b}", "object", "list", "data", data,
                            "first_id", first, "last_id", last, "has_more", p->has_more);
    gw_respond_json(p->r, 200, out);
    page_free(p);
}

struct item_fetch {
    struct page *p;
    size_t i;
};

static void on_item(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct item_fetch *f = privdata;
    struct page *p = f->p;
    redisReply *rep = reply;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY)
        p->failed = 1;
    else if (!p->r->gone)
        p->items[f->i] = p->spec->item(p->r, p->ids[f->i], rep);
    free(f);
    if (--p->pending == 0)
        page_answer(p);
}

static void on_ids(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct page *p = privdata;
    redisReply *rep = reply;
    if (rep == NULL || rep->type != REDIS_REPLY_ARRAY) {
        p->failed = 1;
        page_answer(p);
        return;
    }
    size_t n = rep->elements;
    if (n > (size_t)p->q.limit) {
        p->has_more = 1;
        n = (size_t)p->q.limit;
    }
    p->ids = calloc(n + 1, sizeof(*p->ids));
    p->items = calloc(n + 1, sizeof(*p->items));
    if (p->ids == NULL || p->items == NULL) {
        p->failed = 1;
        page_answer(p);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (rep->element[i]->type == REDIS_REPLY_STRING)
            p->ids[p->n++] = strdup(rep->element[i]->str);
    if (p->n == 0) {
        page_answer(p);
        return;
    }
    p->pending = p->n;
    for (size_t i = 0; i < p->n; i++) {
        struct item_fetch *f = malloc(sizeof(*f));
        if (f != NULL) {
            *f = (struct item_fetch){p, i};
            if (hmget(p->r, ac, p->spec->object, p->ids[i], p->spec->fields, on_item, f) ==
                REDIS_OK)
                continue;
            free(f);
        }
        p->failed = 1;
        if (--p->pending == 0)
            page_answer(p);
    }
}

static void read_ids(struct page *p, long long start)
{
    redisAsyncContext *ac = gw_redis(p->r->gw);
    char key[LLMQ_KEY_FIXED_MAX];
    if (ac == NULL ||
        llmq_key(key, sizeof(key), p->r->gw->prefix, p->spec->index, NULL, NULL) != LLMQ_OK ||
        gw_step_command(p->r, ac, on_ids, p, "ZREVRANGE %s %lld %lld", key, start,
                        start + p->q.limit) != REDIS_OK) {
        p->failed = 1;
        page_answer(p);
    }
}

static void on_rank(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct page *p = privdata;
    redisReply *rep = reply;
    if (rep == NULL || (rep->type != REDIS_REPLY_INTEGER && rep->type != REDIS_REPLY_NIL)) {
        p->failed = 1;
        page_answer(p);
    } else if (rep->type == REDIS_REPLY_NIL) {
        gw_respond_errorf(p->r, 400, "invalid_request_error", "after", "invalid_value",
                          "'after' names no object of this list: %s", p->q.after);
        page_free(p);
    } else {
        read_ids(p, rep->integer + 1);
    }
}

void gw_list_respond(struct gw_request *r, const struct gw_list_spec *spec)
{
    struct gw_error e;
    struct page *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    if (gw_list_query_decode(r->has_after ? r->after : NULL, r->has_limit ? r->limit : NULL,
                             spec->limit_default, spec->limit_max, &p->q, &e) != 0) {
        free(p);
        gw_respond_error(r, &e);
        return;
    }
    p->r = r;
    p->spec = spec;
    if (p->q.after[0] == '\0') {
        read_ids(p, 0);
        return;
    }
    redisAsyncContext *ac = gw_redis(r->gw);
    char key[LLMQ_KEY_FIXED_MAX];
    if (ac == NULL ||
        llmq_key(key, sizeof(key), r->gw->prefix, spec->index, NULL, NULL) != LLMQ_OK ||
        gw_step_command(r, ac, on_rank, p, "ZREVRANK %s %s", key, p->q.after) != REDIS_OK) {
        p->failed = 1;
        page_answer(p);
    }
}
