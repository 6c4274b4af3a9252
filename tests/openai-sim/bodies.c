/* Success answers of openai-sim: chat completions, completions, embeddings
 * and responses, whole (streams: stream.c). Every body carries `usage`. Completion text is
 * "sim " once per completion token (4 bytes, so the prompt rule would count
 * it as exactly that many tokens). Bodies are built in srv->scratch and then
 * copied behind the head, because the head needs their length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"

void sim_mark(struct sim_exchange *ex)
{
    if (ex->n_marks == ex->cap_marks) {
        size_t cap = ex->cap_marks ? ex->cap_marks * 2 : 8;
        size_t *m = realloc(ex->marks, cap * sizeof(*m));
        if (m == NULL) {
            ex->out.oom = 1;
            return;
        }
        ex->marks = m;
        int64_t *t = realloc(ex->mark_tokens, cap * sizeof(*t));
        if (t == NULL) {
            ex->out.oom = 1;
            return;
        }
        ex->mark_tokens = t;
        ex->cap_marks = cap;
    }
    ex->mark_tokens[ex->n_marks] = ex->stream_tokens;
    ex->marks[ex->n_marks++] = ex->out.len;
}

static void add_quoted(struct sim_buf *b, const char *s)
{
    sim_buf_adds(b, "\"");
    sim_buf_add_json_esc(b, s, strlen(s));
    sim_buf_adds(b, "\"");
}

static void add_text(struct sim_buf *b, int64_t tokens)
{
    sim_buf_adds(b, "\"");
    for (int64_t i = 0; i < tokens; i++)
        sim_buf_add(b, "sim ", 4);
    sim_buf_adds(b, "\"");
}

static const char *finish_reason(const struct sim_call *call, int i)
{
    return call->max_tokens > 0 && call->completion[i] >= call->max_tokens ? "length" : "stop";
}

static void chat_usage(struct sim_buf *b, const struct sim_call *call)
{
    sim_buf_addf(b,
                 "{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld,"
                 "\"prompt_tokens_details\":{\"cached_tokens\":0},"
                 "\"completion_tokens_details\":{\"reasoning_tokens\":0}}",
                 (long long)call->prompt_tokens, (long long)call->completion_total,
                 (long long)(call->prompt_tokens + call->completion_total));
}

void sim_body_chat(struct sim_server *srv, struct sim_exchange *ex, const struct sim_call *call,
                   const struct sim_rl_info *rl)
{
    struct sim_buf *b = &srv->scratch;
    sim_buf_reset(b);
    sim_buf_addf(b,
                 "{\"id\":\"chatcmpl-%s\",\"object\":\"chat.completion\",\"created\":%lld,"
                 "\"model\":",
                 ex->request_id + 4, (long long)(ex->t_unix_ms / 1000));
    add_quoted(b, ex->model);
    sim_buf_adds(b, ",\"choices\":[");
    for (int i = 0; i < call->n; i++) {
        sim_buf_addf(
            b, "%s{\"index\":%d,\"message\":{\"role\":\"assistant\",\"content\":", i ? "," : "", i);
        add_text(b, call->completion[i]);
        sim_buf_addf(b, ",\"refusal\":null},\"logprobs\":null,\"finish_reason\":\"%s\"}",
                     finish_reason(call, i));
    }
    sim_buf_adds(b, "],\"usage\":");
    chat_usage(b, call);
    sim_buf_adds(b, ",\"system_fingerprint\":\"fp_sim\"}\n");
    sim_reply_json(srv, ex, 200, rl, call->azure, NULL);
}

/* Number of inputs of an embeddings request: one string or token array, or
 * an array of them. */
static size_t embedding_inputs(const json_t *input)
{
    if (!json_is_array(input))
        return 1;
    size_t n = json_array_size(input);
    if (n == 0)
        return 1;
    const json_t *first = json_array_get(input, 0);
    return json_is_string(first) || json_is_array(first) ? n : 1;
}

static void embedding_vector(struct sim_buf *b, const struct sim_call *call, size_t idx)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint64_t st = call->hash ^ (idx * 0x9e3779b97f4a7c15ULL);
    unsigned char raw[3];
    int nraw = 0;
    sim_buf_adds(b, call->base64 ? "\"" : "[");
    for (int d = 0; d < call->dims; d++) {
        /* values in [-1, 1) with 1/32768 resolution: exact as float and short as text */
        int32_t q = (int32_t)(llmq_rng_next(&st) >> 48) - 32768;
        float f = (float)q / 32768.0f;
        if (!call->base64) {
            sim_buf_addf(b, "%s%.6g", d ? "," : "", (double)f);
            continue;
        }
        unsigned char le[4];
        memcpy(le, &f, 4); /* x86-64 and arm64 are little-endian, as the API's base64 is */
        for (int k = 0; k < 4; k++) {
            raw[nraw++] = le[k];
            if (nraw == 3) {
                char o[4] = {b64[raw[0] >> 2], b64[((raw[0] & 3) << 4) | (raw[1] >> 4)],
                             b64[((raw[1] & 15) << 2) | (raw[2] >> 6)], b64[raw[2] & 63]};
                sim_buf_add(b, o, 4);
                nraw = 0;
            }
        }
    }
    if (nraw > 0) {
        if (nraw == 1)
            raw[1] = 0;
        char o[4] = {b64[raw[0] >> 2], b64[((raw[0] & 3) << 4) | (raw[1] >> 4)],
                     nraw == 2 ? b64[(raw[1] & 15) << 2] : '=', '='};
        sim_buf_add(b, o, 4);
    }
    sim_buf_adds(b, call->base64 ? "\"" : "]");
}

void sim_body_embeddings(struct sim_server *srv, struct sim_exchange *ex,
                         const struct sim_call *call, const struct sim_rl_info *rl)
{
    struct sim_buf *b = &srv->scratch;
    sim_buf_reset(b);
    sim_buf_adds(b, "{\"object\":\"list\",\"data\":[");
    size_t n = embedding_inputs(json_object_get(call->root, "input"));
    for (size_t i = 0; i < n; i++) {
        sim_buf_addf(b, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "",
                     i);
        embedding_vector(b, call, i);
        sim_buf_adds(b, "}");
    }
    sim_buf_adds(b, "],\"model\":");
    add_quoted(b, ex->model);
    sim_buf_addf(b, ",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}\n",
                 (long long)call->prompt_tokens, (long long)call->prompt_tokens);
    sim_reply_json(srv, ex, 200, rl, call->azure, NULL);
}

void sim_body_responses(struct sim_server *srv, struct sim_exchange *ex,
                        const struct sim_call *call, const struct sim_rl_info *rl)
{
    struct sim_buf *b = &srv->scratch;
    const char *id = ex->request_id + 4;
    int incomplete = call->max_tokens > 0 && call->completion[0] >= call->max_tokens;
    sim_buf_reset(b);
    sim_buf_addf(b,
                 "{\"id\":\"resp_%s\",\"object\":\"response\",\"created_at\":%lld,"
                 "\"status\":\"%s\",\"model\":",
                 id, (long long)(ex->t_unix_ms / 1000), incomplete ? "incomplete" : "completed");
    add_quoted(b, ex->model);
    sim_buf_addf(b,
                 ",\"output\":[{\"type\":\"message\",\"id\":\"msg_%s\",\"status\":\"%s\","
                 "\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":",
                 id, incomplete ? "incomplete" : "completed");
    add_text(b, call->completion[0]);
    sim_buf_addf(b,
                 ",\"annotations\":[]}]}],\"usage\":{\"input_tokens\":%lld,"
                 "\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":%lld,"
                 "\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":%lld}}\n",
                 (long long)call->prompt_tokens, (long long)call->completion_total,
                 (long long)(call->prompt_tokens + call->completion_total));
    sim_reply_json(srv, ex, 200, rl, call->azure, NULL);
}

void sim_body_completions(struct sim_server *srv, struct sim_exchange *ex,
                          const struct sim_call *call, const struct sim_rl_info *rl)
{
    struct sim_buf *b = &srv->scratch;
    sim_buf_reset(b);
    sim_buf_addf(b,
                 "{\"id\":\"cmpl-%s\",\"object\":\"text_completion\",\"created\":%lld,"
                 "\"model\":",
                 ex->request_id + 4, (long long)(ex->t_unix_ms / 1000));
    add_quoted(b, ex->model);
    sim_buf_adds(b, ",\"choices\":[");
    for (int i = 0; i < call->n; i++) {
        sim_buf_addf(b, "%s{\"text\":", i ? "," : "");
        add_text(b, call->completion[i]);
        sim_buf_addf(b, ",\"index\":%d,\"logprobs\":null,\"finish_reason\":\"%s\"}", i,
                     finish_reason(call, i));
    }
    sim_buf_addf(b,
                 "],\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,"
                 "\"total_tokens\":%lld}}\n",
                 (long long)call->prompt_tokens, (long long)call->completion_total,
                 (long long)(call->prompt_tokens + call->completion_total));
    sim_reply_json(srv, ex, 200, rl, call->azure, NULL);
}
