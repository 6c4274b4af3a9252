/* Request cost estimation: what a request will be charged against TPM.
 *
 * One walk over the request body accumulates both the exact prompt tokens
 * (when the charge model needs them) and the characters of the prompt text
 * (for OpenAI's characters/4 admission rule). The body is borrowed and never
 * changed; what is allocated (tokenizer scratch, a decoded data: URL, a
 * schema's JSON text) is freed before the call returns.
 *
 * How each endpoint is counted (DESIGN notes; the numbers are OpenAI's):
 *  - chat: 3 tokens per message + the tokens of every string field (role,
 *    content, name, tool_call_id, ...) + 1 per `name` + 3 priming the reply,
 *    as in OpenAI's cookbook (exact on its verified examples: 129 tokens for
 *    cl100k models, 124 for o200k). gpt-3.5-turbo-0301 used 4 / -1.
 *    Content parts: text; images by the tile/patch rule (image_size.h), sized
 *    from data: URLs or opt's default for remote URLs; other parts (audio,
 *    files) are not counted. Assistant tool_calls: name + arguments + 3.
 *  - tools / functions: the cookbook's method: per function 7 (o200k) or 10
 *    (cl100k) + tokens of "name:description"; per property 3 + tokens of
 *    "name:type:description"; 3 more when there are properties; enums -3 and
 *    3 + tokens per item; 12 once at the end. Nested objects and array items
 *    are counted as more properties (our extension). Exact on the cookbook's
 *    example (105 / 101 tokens); unusual schemas may be off by some percent,
 *    which calibration (common/jobs/calibration.h) measures in production.
 *    response_format json_schema: the tokens of the schema's JSON text.
 *  - responses: `instructions` and a string `input` count as one message
 *    each; input items as chat messages; function_call(_output) items as
 *    their strings + 3; priming 3.
 *  - embeddings / completions: tokens of each string (token arrays count
 *    their length); no overhead.
 * Characters are Unicode code points of the same strings (token arrays count
 * 4 per token; images by their token count × 4, so they weigh the same in
 * both models). */
#include "llmq/cost.h"

#include <stdlib.h>
#include <string.h>

#include "cost/image_size.h"
#include "llmq/tokens.h"

struct walk {
    const struct llmq_cost_options *opt;
    const char *model;
    enum llmq_encoding enc;
    int exact;           /* tokenize (else only count characters) */
    long long tokens;    /* exact prompt tokens, overheads included */
    long long estimated; /* of tokens, those estimated rather than counted */
    long long chars;     /* characters of the prompt text */
    struct llmq_error *err;
    enum llmq_rc rc;
};

void llmq_cost_options_default(struct llmq_cost_options *opt)
{
    opt->charge_model = LLMQ_CHARGE_EXACT;
    opt->margin_pct = 10;
    opt->default_completion_tokens = 1024;
    opt->remote_image_width = 1024;
    opt->remote_image_height = 1024;
}

static long long utf8_chars(const char *s, size_t len)
{
    long long n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Counts one piece of prompt text. */
static void add_text(struct walk *w, const char *s, size_t len)
{
    w->chars += utf8_chars(s, len);
    if (!w->exact || w->rc != LLMQ_OK)
        return;
    size_t n = 0;
    w->rc = llmq_tokens_count(w->enc, s, len, &n, w->err);
    w->tokens += (long long)n;
}

static void add_string(struct walk *w, const json_t *v)
{
    if (json_is_string(v))
        add_text(w, json_string_value(v), json_string_length(v));
}

/* Adds fixed overhead tokens: framing the model sees but no character of
 * the request stands for, so the characters rule does not count them. */
static void add_overhead(struct walk *w, long long tokens)
{
    w->tokens += tokens;
}

/* Every string inside v, for fields whose format we do not model. */
static void add_all_strings(struct walk *w, const json_t *v)
{
    size_t i;
    const char *k;
    json_t *x;
    switch (json_typeof(v)) {
    case JSON_STRING:
        add_string(w, v);
        break;
    case JSON_ARRAY:
        json_array_foreach(v, i, x) add_all_strings(w, x);
        break;
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, k, x) add_all_strings(w, x);
        break;
    default:
        break;
    }
}

static enum llmq_rc invalid(struct walk *w, const char *what)
{
    if (w->rc == LLMQ_OK)
        w->rc = llmq_error_set(w->err, LLMQ_EINVAL, "cost: %s", what);
    return w->rc;
}

/* One image: url is a data: URL or a remote one; detail may be NULL. */
static void add_image(struct walk *w, const json_t *url, const json_t *detail)
{
    unsigned width = w->opt->remote_image_width, height = w->opt->remote_image_height;
    int sized = 0;                   /* read from the image itself */
    if (width == 0 || height == 0) { /* options filled by hand, without the defaults */
        width = 1024;
        height = 1024;
    }
    if (json_is_string(url)) {
        const char *u = json_string_value(url);
        size_t len = json_string_length(url);
        unsigned dw, dh;
        if (len > 5 && strncmp(u, "data:", 5) == 0 &&
            llmq_image_size_from_data_url(u, len, &dw, &dh, NULL) == LLMQ_OK) {
            width = dw;
            height = dh;
            sized = 1;
        }
    }
    enum llmq_image_detail d = llmq_image_detail_parse(json_string_value(detail));
    long long t = llmq_image_tokens(w->model, width, height, d);
    w->tokens += t;
    if (!sized) /* a remote or unreadable image: its size is a guess */
        w->estimated += t;
    w->chars += 4 * t;
}

/* One content part of a chat message or a responses input item. */
static void add_part(struct walk *w, const json_t *part)
{
    const char *type = json_string_value(json_object_get(part, "type"));
    if (!json_is_object(part)) {
        add_string(w, part);
        return;
    }
    if (type == NULL)
        return;
    if (strcmp(type, "image_url") == 0 || strcmp(type, "input_image") == 0) {
        json_t *img = json_object_get(part, "image_url");
        if (json_is_object(img))
            add_image(w, json_object_get(img, "url"), json_object_get(img, "detail"));
        else
            add_image(w, img, json_object_get(part, "detail"));
        return;
    }
    if (strcmp(type, "text") == 0 || strcmp(type, "input_text") == 0 ||
        strcmp(type, "output_text") == 0)
        add_string(w, json_object_get(part, "text"));
    else if (strcmp(type, "refusal") == 0)
        add_string(w, json_object_get(part, "refusal"));
}

static void add_content(struct walk *w, const json_t *content)
{
    size_t i;
    json_t *part;
    if (json_is_array(content)) {
        json_array_foreach(content, i, part) add_part(w, part);
    } else {
        add_string(w, content);
    }
}

/* Assistant tool calls: the function name and its arguments text. */
static void add_tool_calls(struct walk *w, const json_t *calls)
{
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        json_t *f = json_object_get(c, "function");
        add_overhead(w, 3);
        add_string(w, json_object_get(f, "name"));
        add_string(w, json_object_get(f, "arguments"));
    }
}

/* One chat message: the cookbook's rule, every string field counted. */
static void add_message(struct walk *w, const json_t *msg, int per_message, int per_name)
{
    const char *key;
    json_t *v;
    add_overhead(w, per_message);
    json_object_foreach((json_t *)msg, key, v)
    {
        if (strcmp(key, "content") == 0) {
            add_content(w, v);
        } else if (strcmp(key, "tool_calls") == 0) {
            add_tool_calls(w, v);
        } else if (strcmp(key, "function_call") == 0) {
            add_string(w, json_object_get(v, "name"));
            add_string(w, json_object_get(v, "arguments"));
        } else if (json_is_string(v) && strcmp(key, "type") != 0 && strcmp(key, "id") != 0 &&
                   strcmp(key, "status") != 0) {
            /* type/id/status: item bookkeeping of the responses API, not text
             * the model reads. */
            add_string(w, v);
            if (strcmp(key, "name") == 0)
                add_overhead(w, per_name);
        }
    }
}

/* Tool schemas, by the cookbook's method (see the file comment). */
struct tool_weights {
    int func_init, prop_init, prop_key, enum_init, enum_item, func_end;
};

/* Counts "a:b" or "a:b:c" with a trailing '.' dropped from the last part. */
static void add_joined(struct walk *w, const char *a, const char *b, const char *c)
{
    char buf[2048];
    const char *last = c ? c : b;
    size_t la = strlen(a), lb = strlen(b), ll = strlen(last);
    if (ll > 0 && last[ll - 1] == '.')
        ll--;
    size_t need = la + 1 + (c ? lb + 1 : 0) + ll;
    if (need >= sizeof(buf)) { /* rare: count the parts apart */
        add_text(w, a, la);
        if (c)
            add_text(w, b, lb);
        add_text(w, last, ll);
        return;
    }
    size_t n = 0;
    memcpy(buf + n, a, la);
    n += la;
    buf[n++] = ':';
    if (c) {
        memcpy(buf + n, b, lb);
        n += lb;
        buf[n++] = ':';
    }
    memcpy(buf + n, last, ll);
    n += ll;
    add_text(w, buf, n);
}

static const char *str_or_empty(const json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : "";
}

static void add_properties(struct walk *w, const struct tool_weights *tw, const json_t *props,
                           int depth);

static void add_property(struct walk *w, const struct tool_weights *tw, const char *name,
                         const json_t *p, int depth)
{
    json_t *type = json_object_get(p, "type"), *en = json_object_get(p, "enum");
    const char *type_s = json_is_string(type) ? json_string_value(type) : "any";
    size_t i;
    json_t *item;
    add_overhead(w, tw->prop_key);
    if (json_is_array(en)) {
        add_overhead(w, tw->enum_init);
        json_array_foreach(en, i, item)
        {
            add_overhead(w, tw->enum_item);
            add_all_strings(w, item);
        }
    }
    add_joined(w, name, type_s, str_or_empty(json_object_get(p, "description")));
    if (depth < 8) {
        add_properties(w, tw, json_object_get(p, "properties"), depth + 1);
        add_properties(w, tw, json_object_get(json_object_get(p, "items"), "properties"),
                       depth + 1);
    }
}

static void add_properties(struct walk *w, const struct tool_weights *tw, const json_t *props,
                           int depth)
{
    const char *key;
    json_t *p;
    if (!json_is_object(props) || json_object_size(props) == 0)
        return;
    add_overhead(w, tw->prop_init);
    json_object_foreach((json_t *)props, key, p) add_property(w, tw, key, p, depth);
}

/* tools (chat: {type, function:{...}}; responses: flat) or functions. */
static void add_tools(struct walk *w, const json_t *tools)
{
    static const struct tool_weights o200k = {7, 3, 3, -3, 3, 12}, cl100k = {10, 3, 3, -3, 3, 12};
    const struct tool_weights *tw = w->enc == LLMQ_ENCODING_CL100K_BASE ? &cl100k : &o200k;
    size_t i, counted = 0;
    json_t *t;
    long long before = w->tokens;
    if (!json_is_array(tools))
        return;
    json_array_foreach(tools, i, t)
    {
        json_t *f = json_object_get(t, "function");
        if (!json_is_object(f))
            f = t;
        json_t *name = json_object_get(f, "name");
        if (!json_is_string(name))
            continue; /* a built-in tool (web_search, ...): its cost is OpenAI's secret */
        add_overhead(w, tw->func_init);
        add_joined(w, json_string_value(name), str_or_empty(json_object_get(f, "description")),
                   NULL);
        add_properties(w, tw, json_object_get(json_object_get(f, "parameters"), "properties"), 0);
        counted++;
    }
    if (counted > 0)
        add_overhead(w, tw->func_end);
    w->estimated += w->tokens - before; /* the cookbook's approximation */
}

/* Structured outputs: the schema's JSON text. */
static void add_response_format(struct walk *w, const json_t *rf)
{
    json_t *schema = json_object_get(rf, "json_schema");
    if (schema == NULL)
        schema = json_object_get(rf, "schema");
    if (!json_is_object(schema))
        return;
    char *text = json_dumps(schema, JSON_COMPACT);
    if (text == NULL) {
        w->rc = llmq_error_set(w->err, LLMQ_ENOMEM, "cost: out of memory");
        return;
    }
    long long before = w->tokens;
    add_text(w, text, strlen(text));
    free(text);
    w->estimated += w->tokens - before; /* how OpenAI frames a schema is not public */
}

static enum llmq_rc count_chat(struct walk *w, const json_t *body)
{
    json_t *messages = json_object_get(body, "messages"), *m;
    size_t i;
    /* gpt-3.5-turbo-0301 framed messages differently (cookbook). */
    int legacy = w->model != NULL && strncmp(w->model, "gpt-3.5-turbo-0301", 18) == 0;
    if (!json_is_array(messages))
        return invalid(w, "messages must be an array");
    json_array_foreach(messages, i, m)
    {
        if (!json_is_object(m))
            return invalid(w, "every element of messages must be an object");
        add_message(w, m, legacy ? 4 : 3, legacy ? -1 : 1);
    }
    add_overhead(w, legacy ? 2 : 3);
    add_tools(w, json_object_get(body, "tools"));
    add_tools(w, json_object_get(body, "functions"));
    add_response_format(w, json_object_get(body, "response_format"));
    return w->rc;
}

/* A responses-API input item. */
static void add_input_item(struct walk *w, const json_t *item)
{
    const char *type = json_string_value(json_object_get(item, "type"));
    if (json_object_get(item, "role") != NULL) {
        add_message(w, item, 3, 1);
    } else if (type != NULL &&
               (strcmp(type, "function_call") == 0 || strcmp(type, "function_call_output") == 0)) {
        add_overhead(w, 3);
        add_string(w, json_object_get(item, "name"));
        add_string(w, json_object_get(item, "arguments"));
        add_string(w, json_object_get(item, "output"));
    } else {
        add_overhead(w, 3);
        add_all_strings(w, item);
    }
}

static enum llmq_rc count_responses(struct walk *w, const json_t *body)
{
    json_t *instructions = json_object_get(body, "instructions");
    json_t *input = json_object_get(body, "input"), *item;
    size_t i;
    if (json_is_string(instructions)) {
        add_overhead(w, 4); /* framing + the "developer"/"system" role */
        add_string(w, instructions);
    }
    if (json_is_string(input)) {
        add_overhead(w, 4); /* framing + the "user" role */
        add_string(w, input);
    } else if (json_is_array(input)) {
        json_array_foreach(input, i, item)
        {
            if (!json_is_object(item))
                return invalid(w, "every element of input must be an object");
            add_input_item(w, item);
        }
    } else if (input != NULL) {
        return invalid(w, "input must be a string or an array");
    }
    add_overhead(w, 3);
    add_tools(w, json_object_get(body, "tools"));
    add_response_format(w, json_object_get(json_object_get(body, "text"), "format"));
    return w->rc;
}

/* Embeddings `input` / completions `prompt`: a string, an array of strings, a
 * token array, or an array of token arrays. */
static enum llmq_rc count_inputs(struct walk *w, const json_t *v, const char *field, int depth)
{
    size_t i;
    json_t *x;
    if (json_is_string(v)) {
        add_string(w, v);
    } else if (json_is_integer(v) && depth > 0) {
        w->tokens += 1;
        w->chars += 4;
    } else if (json_is_array(v) && depth < 2) {
        json_array_foreach(v, i, x)
        {
            if (count_inputs(w, x, field, depth + 1) != LLMQ_OK)
                return w->rc;
        }
    } else {
        if (w->rc == LLMQ_OK)
            w->rc = llmq_error_set(w->err, LLMQ_EINVAL,
                                   "cost: %s must be a string, an array of strings or token ids",
                                   field);
    }
    return w->rc;
}

/* The fields that size the completion reservation, with OpenAI's bounds
 * (cost.h). */
static const struct {
    const char *name;
    long long min, max;
} count_fields[] = {
    {"max_completion_tokens", 1, LLMQ_COST_MAX_COMPLETION_TOKENS},
    {"max_output_tokens", 1, LLMQ_COST_MAX_COMPLETION_TOKENS},
    {"max_tokens", 1, LLMQ_COST_MAX_COMPLETION_TOKENS},
    {"n", 1, LLMQ_COST_MAX_N},
    {"best_of", 1, LLMQ_COST_MAX_BEST_OF},
};

enum llmq_rc llmq_cost_check_params(const json_t *body, const char **param, struct llmq_error *err)
{
    if (param != NULL)
        *param = NULL;
    for (size_t i = 0; i < sizeof(count_fields) / sizeof(count_fields[0]); i++) {
        const char *name = count_fields[i].name;
        json_t *v = json_object_get(body, name);
        if (v == NULL || json_is_null(v))
            continue;
        if (param != NULL)
            *param = name;
        if (!json_is_integer(v))
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "Invalid type for '%s': expected an integer, but got %s instead.",
                                  name, json_is_number(v) ? "a decimal number" : "another type");
        long long x = json_integer_value(v);
        if (x < count_fields[i].min)
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "Invalid '%s': integer below minimum value. Expected a value >= "
                                  "%lld, but got %lld instead.",
                                  name, count_fields[i].min, x);
        if (x > count_fields[i].max)
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "Invalid '%s': integer above maximum value. Expected a value <= "
                                  "%lld, but got %lld instead.",
                                  name, count_fields[i].max, x);
    }
    if (param != NULL)
        *param = NULL;
    return LLMQ_OK;
}

/* a + b and a * b of non-negative counts into *out; 0 on overflow. */
static int add_ok(long long a, long long b, long long *out)
{
    return !__builtin_add_overflow(a, b, out);
}

static int mul_ok(long long a, long long b, long long *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* The completion tokens reserved for body's reply into *out: the largest
 * max-tokens field set (else opt's default) times the choices (n, or for
 * legacy completions best_of when larger). Fields already checked by
 * llmq_cost_check_params. */
static enum llmq_rc completion_reservation(const char *url_path, const json_t *body,
                                           const struct llmq_cost_options *opt, long long *out,
                                           struct llmq_error *err)
{
    *out = 0;
    if (strstr(url_path, "embeddings") != NULL)
        return LLMQ_OK;
    long long max = -1, choices = 1;
    for (size_t i = 0; i < 3; i++) { /* the three max-tokens fields */
        json_t *m = json_object_get(body, count_fields[i].name);
        if (json_is_integer(m) && json_integer_value(m) > max)
            max = json_integer_value(m);
    }
    if (max < 0)
        max = opt->default_completion_tokens < 0 ? 0 : opt->default_completion_tokens;
    for (size_t i = 3; i < 5; i++) { /* n, best_of */
        json_t *c = json_object_get(body, count_fields[i].name);
        if (json_is_integer(c) && json_integer_value(c) > choices)
            choices = json_integer_value(c);
    }
    if (!mul_ok(max, choices, out))
        return llmq_error_set(err, LLMQ_EINVAL, "cost: completion tokens overflow");
    return LLMQ_OK;
}

/* Walks the prompt of body by its endpoint. */
static enum llmq_rc walk_prompt(struct walk *w, const char *url_path, const json_t *body)
{
    static const char *const generic_fields[] = {"messages", "input", "prompt", "instructions"};
    if (strstr(url_path, "/chat/completions") != NULL)
        return count_chat(w, body);
    if (strstr(url_path, "/responses") != NULL)
        return count_responses(w, body);
    if (strstr(url_path, "/embeddings") != NULL)
        return count_inputs(w, json_object_get(body, "input"), "input", 0);
    if (strstr(url_path, "/completions") != NULL)
        return count_inputs(w, json_object_get(body, "prompt"), "prompt", 0);
    for (size_t i = 0; i < sizeof(generic_fields) / sizeof(generic_fields[0]); i++) {
        json_t *f = json_object_get(body, generic_fields[i]);
        if (f != NULL)
            add_all_strings(w, f);
    }
    add_tools(w, json_object_get(body, "tools"));
    return w->rc;
}

static void walk_init(struct walk *w, const json_t *body, const struct llmq_cost_options *opt,
                      int exact, struct llmq_error *err)
{
    memset(w, 0, sizeof(*w));
    w->opt = opt;
    w->model = json_string_value(json_object_get(body, "model"));
    w->enc = llmq_tokens_encoding_for_model(w->model);
    w->exact = exact;
    w->err = err;
    w->rc = LLMQ_OK;
}

/* Walks the prompt of a request (url_path, body: borrowed) into *w: exact 1
 * tokenizes, 0 counts characters only, -1 does as opt's charge model says.
 * *opt NULL means the defaults, which *defaults then holds. */
static enum llmq_rc walk_request(struct walk *w, const char *url_path, const json_t *body,
                                 const struct llmq_cost_options **opt,
                                 struct llmq_cost_options *defaults, int exact,
                                 struct llmq_error *err)
{
    if (*opt == NULL) {
        llmq_cost_options_default(defaults);
        *opt = defaults;
    }
    if (url_path == NULL || !json_is_object(body))
        return llmq_error_set(err, LLMQ_EINVAL, "cost: request body must be a JSON object");
    enum llmq_rc rc = llmq_cost_check_params(body, NULL, err);
    if (rc != LLMQ_OK)
        return rc;
    walk_init(w, body, *opt, exact < 0 ? (*opt)->charge_model != LLMQ_CHARGE_CHARS : exact, err);
    if (walk_prompt(w, url_path, body) != LLMQ_OK)
        return w->rc;
    return LLMQ_OK;
}

enum llmq_rc llmq_cost_prompt_tokens(const char *url_path, const json_t *body,
                                     const struct llmq_cost_options *opt, long long *out_tokens,
                                     struct llmq_error *err)
{
    struct llmq_cost_options defaults;
    struct walk w;
    enum llmq_rc rc = walk_request(&w, url_path, body, &opt, &defaults, 1, err);
    if (rc != LLMQ_OK)
        return rc;
    *out_tokens = w.tokens < 0 ? 0 : w.tokens;
    return LLMQ_OK;
}

enum llmq_rc llmq_cost_estimate(const char *url_path, const json_t *body,
                                const struct llmq_cost_options *opt, struct llmq_cost *out,
                                struct llmq_error *err)
{
    struct llmq_cost_options defaults;
    struct walk w;
    enum llmq_rc rc = walk_request(&w, url_path, body, &opt, &defaults, -1, err);
    if (rc != LLMQ_OK)
        return rc;
    int chars_rule = opt->charge_model == LLMQ_CHARGE_CHARS;
    long long margin_pct = opt->margin_pct < 0 ? 0 : opt->margin_pct;
    rc = completion_reservation(url_path, body, opt, &out->completion_tokens, err);
    if (rc != LLMQ_OK)
        return rc;
    /* The margin covers only what is estimated: the completion reservation
     * is exact (the API charges max tokens x n), and so are prompt tokens
     * counted with the model's own tokenizer. Every sum and product is
     * checked: a cost that wrapped would be charged below the true one. */
    long long est, margin, sum;
    int ok;
    if (chars_rule) {
        out->prompt_tokens = w.chars / 4 + (w.chars % 4 != 0);
        est = out->prompt_tokens;
    } else {
        out->prompt_tokens = w.tokens < 0 ? 0 : w.tokens;
        est = w.estimated < 0 ? 0 : w.estimated;
    }
    out->estimated_tokens = est; /* characters / 4 is a guess */
    ok = mul_ok(est, margin_pct, &margin) && add_ok(margin, 99, &margin);
    margin /= 100;
    if (ok && chars_rule) {
        long long with_margin, base;
        ok = add_ok(out->prompt_tokens, margin, &with_margin);
        base = out->prompt_tokens > out->completion_tokens ? out->prompt_tokens
                                                           : out->completion_tokens;
        out->total_tokens =
            with_margin > out->completion_tokens ? with_margin : out->completion_tokens;
        out->margin_tokens = out->total_tokens - base;
    } else if (ok) {
        out->margin_tokens = margin;
        ok = add_ok(out->prompt_tokens, out->completion_tokens, &sum) &&
             add_ok(sum, margin, &out->total_tokens);
    }
    if (!ok)
        return llmq_error_set(err, LLMQ_EINVAL, "cost: the request's token count overflows");
    return LLMQ_OK;
}
