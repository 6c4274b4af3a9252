/* GET /v1/models and /v1/models/{id} (see models.h). A key's model list is
 * answered at once; the account's known models take one price_list call
 * (a step of the request, request_step.h). */
#include "models.h"

#include <hiredis/async.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "fallbacks.h"
#include "http.h"
#include "redis/script.h"
#include "request_step.h"

static json_t *model_object(const char *id)
{
    return json_pack("{s:s, s:s, s:i, s:s}", "id", id, "object", "model", "created", 0, "owned_by",
                     "llmq");
}

/* Adds name to names (a JSON object used as an ordered set) once. */
static void add_name(json_t *names, const char *name, size_t len)
{
    char buf[GW_ID_MAX + 1];
    if (len == 0 || len > GW_ID_MAX)
        return;
    memcpy(buf, name, len);
    buf[len] = '\0';
    json_object_set_new(names, buf, json_true());
}

/* GET /v1/models/{id}: the model r->m.id names, when names (borrowed) has it. */
static void answer_model(struct gw_request *r, const json_t *names)
{
    if (json_object_get(names, r->m.id) == NULL) {
        gw_respond_errorf(r, 404, "invalid_request_error", "model", "model_not_found",
                          "The model `%s` does not exist or you do not have access to it.",
                          r->m.id);
        return;
    }
    json_t *m = model_object(r->m.id);
    if (m == NULL)
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
    else
        gw_respond_json(r, 200, m);
}

/* GET /v1/models: the list of names (borrowed). */
static void answer_list(struct gw_request *r, const json_t *names)
{
    json_t *data = json_array();
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)names, name, v) json_array_append_new(data, model_object(name));
    json_t *list = json_pack("{s:s, s:o}", "object", "list", "data", data);
    if (list == NULL)
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
    else
        gw_respond_json(r, 200, list);
}

typedef void answer_fn(struct gw_request *r, const json_t *names);

/* r->state while the account's known models are read: what answers then. */
struct names_wait {
    answer_fn *answer;
};

/* price_list's reply: {taken, source, {model, ...}...}; then the names of
 * the fallbacks known. */
static void on_prices(redisAsyncContext *ac, redisReply *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    const struct names_wait *nw = r->state;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
        if (!r->gone)
            gw_respond_no_redis(r);
        return;
    }
    json_t *names = json_object();
    for (size_t i = 2; names != NULL && i < reply->elements; i++) {
        const redisReply *row = reply->element[i];
        if (row->type == REDIS_REPLY_ARRAY && row->elements > 0 &&
            row->element[0]->type == REDIS_REPLY_STRING)
            add_name(names, row->element[0]->str, row->element[0]->len);
    }
    json_t *fb = gw_fallbacks_map(r->gw->fallbacks);
    const char *model;
    json_t *to;
    json_object_foreach(fb, model, to)
    {
        add_name(names, model, strlen(model));
        add_name(names, json_string_value(to), json_string_length(to));
    }
    json_decref(fb);
    if (names == NULL)
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
    else if (!r->gone)
        nw->answer(r, names);
    json_decref(names);
}

/* Answers r with answer over the names its key may use (see models.h). */
static void with_names(struct gw_request *r, answer_fn *answer)
{
    if (r->key.models[0] != '\0') {
        json_t *names = json_object();
        for (const char *p = r->key.models; names != NULL;) {
            size_t len = strcspn(p, ",");
            add_name(names, p, len);
            p += len;
            if (*p++ == '\0')
                break;
        }
        if (names == NULL)
            gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        else
            answer(r, names);
        json_decref(names);
        return;
    }
    struct names_wait *nw = malloc(sizeof(*nw));
    if (nw == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    nw->answer = answer;
    r->state = nw;
    r->state_free = free;
    redisAsyncContext *ac = gw_redis(r->gw);
    const char *argv[] = {r->gw->prefix, ""};
    if (ac == NULL ||
        gw_step_script(r, ac, LLMQ_SCRIPT_PRICE_LIST, 1, 2, argv, NULL, on_prices, r) != LLMQ_OK)
        gw_respond_no_redis(r);
}

void gw_models_list(struct gw_request *r)
{
    with_names(r, answer_list);
}

void gw_models_get(struct gw_request *r)
{
    with_names(r, answer_model);
}
