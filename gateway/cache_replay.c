/* Replaying a cached whole answer as server-sent events (cache_replay.h).
 * Each event is built as a JSON object and appended as "data: ...\n\n"
 * (with an "event:" line for the Responses API) to one growing buffer. */
#include "cache_replay.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct sse_buf {
    char *s;
    size_t len, cap;
    int failed;
    long long seq; /* the Responses API's sequence_number */
};

static void put(struct sse_buf *b, const char *d, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, d, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* Appends event ev (steals it; NULL: out of memory), named type (NULL: a
 * data-only event of chat and completions). */
static void event(struct sse_buf *b, const char *type, json_t *ev)
{
    if (ev == NULL) {
        b->failed = 1;
        return;
    }
    if (type != NULL) {
        json_object_set_new(ev, "sequence_number", json_integer(b->seq++));
        put(b, "event: ", 7);
        put(b, type, strlen(type));
        put(b, "\n", 1);
    }
    char *t = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (t == NULL) {
        b->failed = 1;
        return;
    }
    put(b, "data: ", 6);
    put(b, t, strlen(t));
    put(b, "\n\n", 2);
    free(t);
}

/* A chunk of answer body a with choices ch (steals ch): its id, created,
 * model and system_fingerprint, object obj. */
static json_t *chunk(const json_t *a, const char *obj, json_t *ch)
{
    json_t *c = json_object();
    const char *copy[] = {"id", "created", "model", "system_fingerprint", "service_tier"};
    for (size_t i = 0; c != NULL && i < sizeof(copy) / sizeof(copy[0]); i++) {
        json_t *v = json_object_get(a, copy[i]);
        if (v != NULL)
            json_object_set(c, copy[i], v);
    }
    if (c != NULL) {
        json_object_set_new(c, "object", json_string(obj));
        json_object_set_new(c, "choices", ch);
    } else {
        json_decref(ch);
    }
    return c;
}

/* The usage chunk of answer a when asked (choices [], usage). */
static void usage_chunk(struct sse_buf *b, const json_t *a, const char *obj, int include_usage)
{
    json_t *u = json_object_get(a, "usage");
    if (!include_usage || u == NULL)
        return;
    json_t *c = chunk(a, obj, json_array());
    if (c != NULL)
        json_object_set(c, "usage", u);
    event(b, NULL, c);
}

/* A chat message's delta: role, content, refusal and tool calls (with
 * their index, as streamed). */
static json_t *chat_delta(const json_t *msg)
{
    json_t *d = json_object();
    if (d == NULL)
        return NULL;
    const char *copy[] = {"role", "content", "refusal", "function_call", "audio"};
    for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++) {
        json_t *v = json_object_get(msg, copy[i]);
        if (v != NULL && !json_is_null(v))
            json_object_set(d, copy[i], v);
    }
    const json_t *calls = json_object_get(msg, "tool_calls");
    if (json_is_array(calls) && json_array_size(calls) > 0) {
        json_t *out = json_array();
        size_t i;
        const json_t *tc;
        json_array_foreach(calls, i, tc)
        {
            json_t *c = json_deep_copy(tc);
            if (c != NULL) {
                json_object_set_new(c, "index", json_integer((json_int_t)i));
                json_array_append_new(out, c);
            }
        }
        json_object_set_new(d, "tool_calls", out);
    }
    return d;
}

static void replay_chat(struct sse_buf *b, const json_t *a, int include_usage)
{
    const json_t *choices = json_object_get(a, "choices");
    size_t i;
    const json_t *c;
    json_array_foreach(choices, i, c)
    {
        json_t *ch =
            json_pack("[{s:I, s:o, s:n, s:n}]", "index", (json_int_t)i, "delta",
                      chat_delta(json_object_get(c, "message")), "logprobs", "finish_reason");
        event(b, NULL, chunk(a, "chat.completion.chunk", ch));
        json_t *fr = json_object_get(c, "finish_reason");
        json_t *end = json_pack("[{s:I, s:{}, s:n, s:O}]", "index", (json_int_t)i, "delta",
                                "logprobs", "finish_reason", fr ? fr : json_null());
        event(b, NULL, chunk(a, "chat.completion.chunk", end));
    }
    usage_chunk(b, a, "chat.completion.chunk", include_usage);
}

static void replay_completions(struct sse_buf *b, const json_t *a, int include_usage)
{
    const json_t *choices = json_object_get(a, "choices");
    size_t i;
    const json_t *c;
    json_array_foreach(choices, i, c)
    {
        json_t *one = json_deep_copy(c);
        json_t *ch = json_array();
        if (one != NULL && ch != NULL)
            json_array_append_new(ch, one);
        else
            json_decref(one);
        event(b, NULL, chunk(a, "text_completion", ch));
    }
    usage_chunk(b, a, "text_completion", include_usage);
}

/* The response a with status in_progress and no output yet. */
static json_t *response_started(const json_t *a)
{
    json_t *r = json_deep_copy(a);
    if (r != NULL) {
        json_object_set_new(r, "status", json_string("in_progress"));
        json_object_set_new(r, "output", json_array());
        json_object_set_new(r, "usage", json_null());
    }
    return r;
}

/* The events of one message item's text parts. */
static void replay_parts(struct sse_buf *b, const json_t *item, size_t oi)
{
    const json_t *id = json_object_get(item, "id");
    const json_t *parts = json_object_get(item, "content");
    size_t ci;
    const json_t *p;
    json_array_foreach(parts, ci, p)
    {
        json_t *empty = json_deep_copy(p);
        if (empty != NULL && json_is_string(json_object_get(p, "text")))
            json_object_set_new(empty, "text", json_string(""));
        event(b, "response.content_part.added",
              json_pack("{s:s, s:O, s:I, s:I, s:o}", "type", "response.content_part.added",
                        "item_id", id ? id : json_null(), "output_index", (json_int_t)oi,
                        "content_index", (json_int_t)ci, "part", empty));
        const json_t *text = json_object_get(p, "text");
        if (json_is_string(text)) {
            event(b, "response.output_text.delta",
                  json_pack("{s:s, s:O, s:I, s:I, s:O}", "type", "response.output_text.delta",
                            "item_id", id ? id : json_null(), "output_index", (json_int_t)oi,
                            "content_index", (json_int_t)ci, "delta", text));
            event(b, "response.output_text.done",
                  json_pack("{s:s, s:O, s:I, s:I, s:O}", "type", "response.output_text.done",
                            "item_id", id ? id : json_null(), "output_index", (json_int_t)oi,
                            "content_index", (json_int_t)ci, "text", text));
        }
        event(b, "response.content_part.done",
              json_pack("{s:s, s:O, s:I, s:I, s:O}", "type", "response.content_part.done",
                        "item_id", id ? id : json_null(), "output_index", (json_int_t)oi,
                        "content_index", (json_int_t)ci, "part", p));
    }
}

static void replay_responses(struct sse_buf *b, const json_t *a)
{
    event(b, "response.created",
          json_pack("{s:s, s:o}", "type", "response.created", "response", response_started(a)));
    const json_t *output = json_object_get(a, "output");
    size_t oi;
    const json_t *item;
    json_array_foreach(output, oi, item)
    {
        int message = json_is_string(json_object_get(item, "type")) &&
                      strcmp(json_string_value(json_object_get(item, "type")), "message") == 0;
        json_t *added = json_deep_copy(item);
        if (added != NULL && message) {
            json_object_set_new(added, "content", json_array());
            json_object_set_new(added, "status", json_string("in_progress"));
        }
        event(b, "response.output_item.added",
              json_pack("{s:s, s:I, s:o}", "type", "response.output_item.added", "output_index",
                        (json_int_t)oi, "item", added));
        if (message)
            replay_parts(b, item, oi);
        event(b, "response.output_item.done",
              json_pack("{s:s, s:I, s:O}", "type", "response.output_item.done", "output_index",
                        (json_int_t)oi, "item", item));
    }
    event(b, "response.completed",
          json_pack("{s:s, s:O}", "type", "response.completed", "response", a));
}

/* Whether the request asked for the usage chunk. */
static int asks_usage(const char *request_body)
{
    if (request_body == NULL || strstr(request_body, "include_usage") == NULL)
        return 0;
    json_t *r = json_loads(request_body, 0, NULL);
    int yes = json_is_true(json_object_get(json_object_get(r, "stream_options"), "include_usage"));
    json_decref(r);
    return yes;
}

char *gw_cache_replay_sse(const char *url, const char *request_body, const char *line, size_t len,
                          size_t *out_len)
{
    *out_len = 0;
    if (url == NULL || line == NULL)
        return NULL;
    json_t *l = json_loadb(line, len, 0, NULL);
    const json_t *resp = json_object_get(l, "response");
    const json_t *st = json_object_get(resp, "status_code");
    const json_t *a = json_object_get(resp, "body");
    if (!json_is_true(json_object_get(l, "cached")) || !json_is_integer(st) ||
        json_integer_value(st) / 100 != 2 || !json_is_object(a)) {
        json_decref(l);
        return NULL;
    }
    struct sse_buf b = {0};
    if (strcmp(url, "/v1/chat/completions") == 0) {
        replay_chat(&b, a, asks_usage(request_body));
        put(&b, "data: [DONE]\n\n", 14);
    } else if (strcmp(url, "/v1/completions") == 0) {
        replay_completions(&b, a, asks_usage(request_body));
        put(&b, "data: [DONE]\n\n", 14);
    } else if (strcmp(url, "/v1/responses") == 0) {
        replay_responses(&b, a);
    } else {
        b.failed = 1; /* an endpoint that does not stream */
    }
    json_decref(l);
    if (b.failed || b.s == NULL) {
        free(b.s);
        return NULL;
    }
    *out_len = b.len;
    return b.s;
}
