/* Assembly of streamed answers (see stream_assemble.h).
 *
 * Each event's data lines are joined and parsed with jansson once; chat and
 * completions chunks add their deltas to per-choice text buffers (content,
 * refusal, text; tool calls' arguments by index), the Responses API's
 * response.completed (or .incomplete, .failed) event carries the whole
 * response, which is kept as it is; deltas before it are kept too, for a
 * stream cut short. Usage comes from the event that carries it
 * (llmq_usage_parse_sse, the same parser as a whole response's). */
#include "stream_assemble.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASM_MAX_CHOICES 128
#define ASM_MAX_TOOL_CALLS 64

struct sbuf {
    char *p;
    size_t len, cap;
};

struct asm_tool_call {
    struct sbuf id, name, args;
    int used;
};

struct asm_choice {
    int used;
    struct sbuf text;    /* content (chat) or text (completions) */
    struct sbuf refusal; /* chat */
    char role[32];
    char finish[32];
    struct asm_tool_call *tools; /* ASM_MAX_TOOL_CALLS, allocated on first use */
    int n_tools;                 /* highest index + 1 */
};

struct llmq_stream_asm {
    enum llmq_stream_api api;
    char id[128], model[128], fingerprint[64];
    json_int_t created;
    struct asm_choice choices[ASM_MAX_CHOICES];
    int n_choices; /* highest index + 1 */
    json_t *final; /* responses: the last response object seen */
    struct sbuf resp_text;
    int64_t deltas;
    int64_t last_seq;
    int has_usage;
    struct llmq_usage usage;
    char err_code[64];
    char err_message[512];
    int oom;
};

static void sb_add(struct llmq_stream_asm *a, struct sbuf *b, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            a->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_free(struct sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

struct llmq_stream_asm *llmq_stream_asm_new(enum llmq_stream_api api)
{
    struct llmq_stream_asm *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->api = api;
    a->last_seq = -1;
    return a;
}

void llmq_stream_asm_free(struct llmq_stream_asm *a)
{
    if (a == NULL)
        return;
    for (int i = 0; i < a->n_choices; i++) {
        struct asm_choice *c = &a->choices[i];
        sb_free(&c->text);
        sb_free(&c->refusal);
        for (int t = 0; c->tools != NULL && t < c->n_tools; t++) {
            sb_free(&c->tools[t].id);
            sb_free(&c->tools[t].name);
            sb_free(&c->tools[t].args);
        }
        free(c->tools);
    }
    sb_free(&a->resp_text);
    json_decref(a->final);
    free(a);
}

int llmq_stream_api_of(const char *url_path)
{
    if (url_path == NULL)
        return -1;
    if (strcmp(url_path, "/v1/chat/completions") == 0)
        return LLMQ_STREAM_CHAT;
    if (strcmp(url_path, "/v1/completions") == 0)
        return LLMQ_STREAM_COMPLETIONS;
    if (strcmp(url_path, "/v1/responses") == 0)
        return LLMQ_STREAM_RESPONSES;
    return -1;
}

size_t llmq_sse_event_len(const char *text, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\n')
            continue;
        if (text[i + 1] == '\n')
            return i + 2;
        if (text[i + 1] == '\r' && i + 2 < len && text[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Joins the event's data lines into data (a new string, "\n" between lines)
 * and copies its event name into name[n]. Returns the data, or NULL when it
 * has none (or without memory). */
static char *event_fields(const char *ev, size_t len, char *name, size_t n)
{
    char *data = NULL;
    size_t dlen = 0;
    name[0] = '\0';
    size_t pos = 0;
    while (pos < len) {
        const char *line = ev + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - line) : len - pos;
        pos += l + (nl ? 1 : 0);
        if (l > 0 && line[l - 1] == '\r')
            l--;
        const char *v = NULL;
        size_t vl = 0;
        if (l >= 5 && memcmp(line, "data:", 5) == 0) {
            v = line + 5;
            vl = l - 5;
        } else if (l >= 6 && memcmp(line, "event:", 6) == 0) {
            size_t k = l - 6, o = 6;
            if (k > 0 && line[o] == ' ')
                o++, k--;
            if (k >= n)
                k = n - 1;
            memcpy(name, line + o, k);
            name[k] = '\0';
            continue;
        } else {
            continue;
        }
        if (vl > 0 && v[0] == ' ')
            v++, vl--;
        char *d = realloc(data, dlen + vl + 2);
        if (d == NULL) {
            free(data);
            return NULL;
        }
        data = d;
        if (dlen > 0)
            data[dlen++] = '\n';
        memcpy(data + dlen, v, vl);
        dlen += vl;
        data[dlen] = '\0';
    }
    return data;
}

static void copy_str(char *dst, size_t n, const json_t *v)
{
    const char *s = json_string_value(v);
    if (s != NULL)
        snprintf(dst, n, "%s", s);
}

static void note_error(struct llmq_stream_asm *a, const json_t *e)
{
    const json_t *code = json_object_get(e, "code");
    if (!json_is_string(code))
        code = json_object_get(e, "type");
    snprintf(a->err_code, sizeof(a->err_code), "%s",
             json_is_string(code) ? json_string_value(code) : "stream_error");
    const char *m = json_string_value(json_object_get(e, "message"));
    snprintf(a->err_message, sizeof(a->err_message), "%s", m ? m : "the stream failed");
}

static void add_tool_delta(struct llmq_stream_asm *a, struct asm_choice *c, const json_t *tc)
{
    json_int_t ti = json_integer_value(json_object_get(tc, "index"));
    if (ti < 0 || ti >= ASM_MAX_TOOL_CALLS)
        return;
    if (c->tools == NULL) {
        c->tools = calloc(ASM_MAX_TOOL_CALLS, sizeof(*c->tools));
        if (c->tools == NULL) {
            a->oom = 1;
            return;
        }
    }
    struct asm_tool_call *t = &c->tools[ti];
    t->used = 1;
    if ((int)ti + 1 > c->n_tools)
        c->n_tools = (int)ti + 1;
    const json_t *fn = json_object_get(tc, "function");
    const json_t *s;
    if ((s = json_object_get(tc, "id")) != NULL && json_is_string(s))
        sb_add(a, &t->id, json_string_value(s), json_string_length(s));
    if ((s = json_object_get(fn, "name")) != NULL && json_is_string(s))
        sb_add(a, &t->name, json_string_value(s), json_string_length(s));
    if ((s = json_object_get(fn, "arguments")) != NULL && json_is_string(s))
        sb_add(a, &t->args, json_string_value(s), json_string_length(s));
}

/* A chat or completions chunk. */
static enum llmq_stream_event_kind chunk(struct llmq_stream_asm *a, const json_t *j)
{
    copy_str(a->id, sizeof(a->id), json_object_get(j, "id"));
    copy_str(a->model, sizeof(a->model), json_object_get(j, "model"));
    copy_str(a->fingerprint, sizeof(a->fingerprint), json_object_get(j, "system_fingerprint"));
    if (json_is_integer(json_object_get(j, "created")))
        a->created = json_integer_value(json_object_get(j, "created"));
    const json_t *choices = json_object_get(j, "choices");
    const json_t *usage = json_object_get(j, "usage");
    if (json_is_array(choices) && json_array_size(choices) == 0 && json_is_object(usage))
        return LLMQ_STREAM_EV_USAGE;
    size_t i;
    const json_t *ch;
    int content = 0;
    json_array_foreach(choices, i, ch)
    {
        json_int_t idx = json_integer_value(json_object_get(ch, "index"));
        if (idx < 0 || idx >= ASM_MAX_CHOICES)
            continue;
        struct asm_choice *c = &a->choices[idx];
        c->used = 1;
        if ((int)idx + 1 > a->n_choices)
            a->n_choices = (int)idx + 1;
        copy_str(c->finish, sizeof(c->finish), json_object_get(ch, "finish_reason"));
        const json_t *d = a->api == LLMQ_STREAM_CHAT ? json_object_get(ch, "delta") : ch;
        const json_t *t = json_object_get(d, a->api == LLMQ_STREAM_CHAT ? "content" : "text");
        if (json_is_string(t) && json_string_length(t) > 0) {
            sb_add(a, &c->text, json_string_value(t), json_string_length(t));
            content = 1;
        }
        copy_str(c->role, sizeof(c->role), json_object_get(d, "role"));
        const json_t *r = json_object_get(d, "refusal");
        if (json_is_string(r) && json_string_length(r) > 0) {
            sb_add(a, &c->refusal, json_string_value(r), json_string_length(r));
            content = 1;
        }
        size_t k;
        const json_t *tc;
        json_array_foreach(json_object_get(d, "tool_calls"), k, tc)
        {
            add_tool_delta(a, c, tc);
            content = 1;
        }
    }
    if (content)
        a->deltas++;
    return content ? LLMQ_STREAM_EV_CONTENT : LLMQ_STREAM_EV_OTHER;
}

/* A Responses API event of type (the event name, or data's "type"). */
static enum llmq_stream_event_kind response_event(struct llmq_stream_asm *a, const char *type,
                                                  json_t *j)
{
    const json_t *seq = json_object_get(j, "sequence_number");
    if (json_is_integer(seq))
        a->last_seq = json_integer_value(seq);
    if (strcmp(type, "error") == 0 || strcmp(type, "response.failed") == 0) {
        const json_t *e = json_object_get(json_object_get(j, "response"), "error");
        note_error(a, json_is_object(e) ? e : j);
    }
    if (strcmp(type, "response.output_text.delta") == 0) {
        const json_t *d = json_object_get(j, "delta");
        if (json_is_string(d))
            sb_add(a, &a->resp_text, json_string_value(d), json_string_length(d));
        a->deltas++;
        return LLMQ_STREAM_EV_CONTENT;
    }
    if (strncmp(type, "response.", 9) == 0 && strstr(type, ".delta") != NULL) {
        a->deltas++; /* other deltas (reasoning, tool arguments) are tokens too */
        return LLMQ_STREAM_EV_CONTENT;
    }
    json_t *r = json_object_get(j, "response");
    if (json_is_object(r)) {
        json_decref(a->final);
        a->final = json_incref(r);
    }
    if (strcmp(type, "error") == 0)
        return LLMQ_STREAM_EV_ERROR;
    if (strcmp(type, "response.completed") == 0 || strcmp(type, "response.incomplete") == 0 ||
        strcmp(type, "response.failed") == 0)
        return LLMQ_STREAM_EV_FINAL;
    return LLMQ_STREAM_EV_OTHER;
}

enum llmq_stream_event_kind llmq_stream_asm_event(struct llmq_stream_asm *a, const char *ev,
                                                  size_t len)
{
    char name[64];
    char *data = event_fields(ev, len, name, sizeof(name));
    if (data == NULL)
        return LLMQ_STREAM_EV_OTHER;
    if (strcmp(data, "[DONE]") == 0) {
        free(data);
        return LLMQ_STREAM_EV_DONE;
    }
    enum llmq_stream_event_kind kind = LLMQ_STREAM_EV_OTHER;
    json_t *j = json_loads(data, 0, NULL);
    if (json_is_object(j)) {
        const json_t *err = json_object_get(j, "error");
        const char *type = name[0] ? name : json_string_value(json_object_get(j, "type"));
        if (a->api != LLMQ_STREAM_RESPONSES && json_is_object(err)) {
            note_error(a, err);
            kind = LLMQ_STREAM_EV_ERROR;
        } else if (a->api == LLMQ_STREAM_RESPONSES && type != NULL) {
            kind = response_event(a, type, j);
        } else if (a->api != LLMQ_STREAM_RESPONSES) {
            kind = chunk(a, j);
        }
        struct llmq_usage u;
        if ((kind == LLMQ_STREAM_EV_USAGE || kind == LLMQ_STREAM_EV_FINAL ||
             json_is_object(json_object_get(j, "usage"))) &&
            llmq_usage_parse_sse(ev, len, &u) == LLMQ_OK) {
            a->usage = u;
            a->has_usage = 1;
        }
    }
    json_decref(j);
    free(data);
    return kind;
}

int64_t llmq_stream_asm_deltas(const struct llmq_stream_asm *a)
{
    return a->deltas;
}

int llmq_stream_asm_usage(const struct llmq_stream_asm *a, struct llmq_usage *out)
{
    if (a->has_usage)
        *out = a->usage;
    return a->has_usage;
}

const char *llmq_stream_asm_error_code(const struct llmq_stream_asm *a)
{
    return a->err_code;
}

const char *llmq_stream_asm_error_message(const struct llmq_stream_asm *a)
{
    return a->err_message;
}

int64_t llmq_stream_asm_last_seq(const struct llmq_stream_asm *a)
{
    return a->last_seq;
}

static json_t *str_or_null(const struct sbuf *b)
{
    return b->p != NULL ? json_stringn(b->p, b->len) : json_null();
}

static json_t *usage_json(const struct llmq_stream_asm *a)
{
    if (!a->has_usage)
        return json_null();
    const struct llmq_usage *u = &a->usage;
    if (a->api == LLMQ_STREAM_RESPONSES)
        return json_pack("{s:I, s:I, s:I}", "input_tokens", (json_int_t)u->input_tokens,
                         "output_tokens", (json_int_t)u->output_tokens, "total_tokens",
                         (json_int_t)u->total_tokens);
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)u->input_tokens,
                     "completion_tokens", (json_int_t)u->output_tokens, "total_tokens",
                     (json_int_t)u->total_tokens);
}

static json_t *chat_message(const struct asm_choice *c)
{
    json_t *m = json_pack("{s:s, s:o, s:o}", "role", c->role[0] ? c->role : "assistant", "content",
                          str_or_null(&c->text), "refusal", str_or_null(&c->refusal));
    if (m == NULL || c->tools == NULL)
        return m;
    json_t *calls = json_array();
    for (int t = 0; t < c->n_tools; t++) {
        const struct asm_tool_call *tc = &c->tools[t];
        if (!tc->used)
            continue;
        json_array_append_new(
            calls,
            json_pack("{s:s%, s:s, s:{s:s%, s:s%}}", "id", tc->id.p ? tc->id.p : "", tc->id.len,
                      "type", "function", "function", "name", tc->name.p ? tc->name.p : "",
                      tc->name.len, "arguments", tc->args.p ? tc->args.p : "", tc->args.len));
    }
    json_object_set_new(m, "tool_calls", calls);
    return m;
}

static json_t *choices_result(const struct llmq_stream_asm *a)
{
    int chat = a->api == LLMQ_STREAM_CHAT;
    json_t *choices = json_array();
    for (int i = 0; choices != NULL && i < a->n_choices; i++) {
        const struct asm_choice *c = &a->choices[i];
        if (!c->used)
            continue;
        json_t *fin = c->finish[0] ? json_string(c->finish) : json_null();
        json_t *o = chat ? json_pack("{s:i, s:o, s:n, s:o}", "index", i, "message", chat_message(c),
                                     "logprobs", "finish_reason", fin)
                         : json_pack("{s:o, s:i, s:n, s:o}", "text", str_or_null(&c->text), "index",
                                     i, "logprobs", "finish_reason", fin);
        json_array_append_new(choices, o);
    }
    json_t *r = json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "id", a->id, "object",
                          chat ? "chat.completion" : "text_completion", "created", a->created,
                          "model", a->model, "choices", choices, "usage", usage_json(a));
    if (r != NULL && a->fingerprint[0])
        json_object_set_new(r, "system_fingerprint", json_string(a->fingerprint));
    return r;
}

/* A response cut short: what its events said, and the text of its deltas. */
static json_t *partial_response(const struct llmq_stream_asm *a)
{
    json_t *r = a->final ? json_deep_copy(a->final) : json_pack("{s:s}", "object", "response");
    if (r == NULL)
        return NULL;
    json_object_set_new(r, "status", json_string("incomplete"));
    json_object_set_new(r, "output",
                        json_pack("[{s:s, s:s, s:s, s:[{s:s, s:o, s:[]}]}]", "type", "message",
                                  "role", "assistant", "status", "incomplete", "content", "type",
                                  "output_text", "text", str_or_null(&a->resp_text),
                                  "annotations"));
    json_object_set_new(r, "usage", usage_json(a));
    return r;
}

char *llmq_stream_asm_result(const struct llmq_stream_asm *a, size_t *len)
{
    json_t *r;
    if (a->api != LLMQ_STREAM_RESPONSES) {
        r = choices_result(a);
    } else if (a->final != NULL) {
        const char *st = json_string_value(json_object_get(a->final, "status"));
        r = st != NULL && strcmp(st, "in_progress") != 0 ? json_incref(a->final)
                                                         : partial_response(a);
    } else {
        r = partial_response(a);
    }
    char *text = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    if (len != NULL)
        *len = text != NULL ? strlen(text) : 0;
    return text;
}
