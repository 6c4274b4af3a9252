/* Event streams of openai-sim (stream: true), built whole at admission like
 * every answer and released step by step (conn.c): one step per event.
 *
 * Chat and completions send `data: <chunk>\n\n` events and end with
 * `data: [DONE]`; with stream_options.include_usage every chunk carries
 * "usage":null and one last chunk with empty choices carries the usage, as
 * OpenAI's do. Responses send the named events of the Responses API
 * (`event: response.created` ... `event: response.completed`, whose response
 * carries the usage), numbered by sequence_number, with no [DONE].
 *
 * Pace: with --stream-gap-ms every content chunk carries one token (as the
 * API's do) and the steps are that far apart after the latency; without it,
 * each choice is cut in 8 pieces spread evenly over the latency.
 * --stream-error: the stream breaks off after half of its content with an
 * error event (chat and completions: `data: {"error":{...}}`; responses:
 * `event: error`) and no end marker: what the API sends when a generation
 * fails mid-way. Each step records the completion tokens sent with it
 * (sim_mark), so a client that leaves is counted what it was sent. */
#include <string.h>

#include "api.h"

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

/* Appends one SSE event: "event: <name>\n" when name is not NULL, then
 * "data: <payload>\n\n", as one HTTP chunk (one step). tokens: completion
 * tokens this event sends. */
static void sse_event(struct sim_exchange *ex, const char *name, const struct sim_buf *payload,
                      int64_t tokens)
{
    size_t len = (name != NULL ? strlen(name) + 8 : 0) + 6 + payload->len + 2;
    sim_buf_addf(&ex->out, "%zx\r\n", len);
    if (name != NULL)
        sim_buf_addf(&ex->out, "event: %s\n", name);
    sim_buf_adds(&ex->out, "data: ");
    sim_buf_add(&ex->out, payload->data, payload->len);
    sim_buf_adds(&ex->out, "\n\n\r\n");
    ex->stream_tokens += tokens;
    sim_mark(ex);
}

/* The end of the HTTP body: [DONE] (when done) and the last chunk, sent
 * with the step before it when there is no [DONE] (a stream broken off). */
static void stream_end(struct sim_exchange *ex, int done)
{
    if (done)
        sim_buf_adds(&ex->out, "e\r\ndata: [DONE]\n\n\r\n");
    sim_buf_adds(&ex->out, "0\r\n\r\n");
    if (done || ex->n_marks == 0)
        sim_mark(ex);
    else
        ex->marks[ex->n_marks - 1] = ex->out.len;
}

/* Pieces the content of a choice is cut into: one per token when paced. */
static int64_t piece_tokens(const struct sim_server *srv, int64_t total)
{
    if (srv->cfg.stream_gap_ms > 0)
        return 1;
    return (total + 7) / 8;
}

/* The error event of a stream that breaks off; chat and completions' shape. */
static void data_error(struct sim_server *srv, struct sim_exchange *ex)
{
    struct sim_buf *b = &srv->scratch;
    sim_buf_reset(b);
    sim_buf_adds(b, "{\"error\":{\"message\":\"The server had an error while processing your "
                    "request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,"
                    "\"code\":\"server_error\"}}");
    sse_event(ex, NULL, b, 0);
    ex->outcome = SIM_OUT_STREAM_ERROR;
    ex->completion_tokens = ex->stream_tokens; /* what was sent is what is billed */
    stream_end(ex, 0);
}

/* ---- chat completions and completions ---- */

/* What differs between the chunks of a chat and of a completions stream. */
struct chunk_kind {
    const char *id_prefix, *object;
    int chat; /* 1: "delta" objects after a role chunk, usage with details; 0: "text" */
};
static const struct chunk_kind CHAT_CHUNKS = {"chatcmpl-", "chat.completion.chunk", 1};
static const struct chunk_kind COMPLETION_CHUNKS = {"cmpl-", "text_completion", 0};

/* A chunk up to its "choices" value. */
static void chunk_open(struct sim_buf *b, const struct sim_exchange *ex,
                       const struct chunk_kind *kind)
{
    sim_buf_reset(b);
    sim_buf_addf(b,
                 "{\"id\":\"%s%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", kind->id_prefix,
                 ex->request_id + 4, kind->object, (long long)(ex->t_unix_ms / 1000));
    add_quoted(b, ex->model);
    sim_buf_adds(b, ",\"system_fingerprint\":\"fp_sim\",\"choices\":");
}

/* After "choices": a client that asked for usage sees "usage": null on every
 * chunk but the last, as OpenAI sends it. */
static void chunk_close(struct sim_buf *b, const struct sim_call *call)
{
    sim_buf_adds(b, call->include_usage ? ",\"usage\":null}" : "}");
}

static void chat_usage(struct sim_buf *b, const struct sim_call *call, int64_t completion)
{
    sim_buf_addf(b,
                 "{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld,"
                 "\"prompt_tokens_details\":{\"cached_tokens\":0},"
                 "\"completion_tokens_details\":{\"reasoning_tokens\":0}}",
                 (long long)call->prompt_tokens, (long long)completion,
                 (long long)(call->prompt_tokens + completion));
}

/* One chunk of choice i: k tokens of text (k > 0), else its finish. */
static void choice_chunk(struct sim_server *srv, struct sim_exchange *ex,
                         const struct sim_call *call, const struct chunk_kind *kind, int i,
                         int64_t k)
{
    struct sim_buf *b = &srv->scratch;
    chunk_open(b, ex, kind);
    if (kind->chat) {
        sim_buf_addf(b, "[{\"index\":%d,\"delta\":", i);
        if (k > 0) {
            sim_buf_adds(b, "{\"content\":");
            add_text(b, k);
            sim_buf_adds(b, "}");
        } else {
            sim_buf_adds(b, "{}");
        }
    } else {
        sim_buf_adds(b, "[{\"text\":");
        if (k > 0)
            add_text(b, k);
        else
            sim_buf_adds(b, "\"\"");
        sim_buf_addf(b, ",\"index\":%d", i);
    }
    if (k > 0)
        sim_buf_adds(b, ",\"logprobs\":null,\"finish_reason\":null}]");
    else
        sim_buf_addf(b, ",\"logprobs\":null,\"finish_reason\":\"%s\"}]", finish_reason(call, i));
    chunk_close(b, call);
    sse_event(ex, NULL, b, k);
}

/* The chunks of one choice: (chat: its role), content pieces, finish.
 * Returns -1 when the stream broke off (--stream-error) and nothing more may
 * follow. */
static int stream_choice(struct sim_server *srv, struct sim_exchange *ex,
                         const struct sim_call *call, const struct chunk_kind *kind, int i)
{
    if (kind->chat) {
        struct sim_buf *b = &srv->scratch;
        chunk_open(b, ex, kind);
        sim_buf_addf(b,
                     "[{\"index\":%d,\"delta\":{\"role\":\"assistant\",\"content\":\"\","
                     "\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]",
                     i);
        chunk_close(b, call);
        sse_event(ex, NULL, b, 0);
    }
    int64_t total = call->completion[i], left = total, per = piece_tokens(srv, total);
    while (left > 0) {
        if (call->stream_error && i == 0 && left <= total / 2) {
            data_error(srv, ex);
            return -1;
        }
        int64_t k = left < per ? left : per;
        choice_chunk(srv, ex, call, kind, i, k);
        left -= k;
    }
    choice_chunk(srv, ex, call, kind, i, 0);
    return 0;
}

static void stream_choices(struct sim_server *srv, struct sim_exchange *ex,
                           const struct sim_call *call, const struct sim_rl_info *rl,
                           const struct chunk_kind *kind)
{
    sim_reply_head(srv, ex, 200, -1, rl, call->azure, NULL);
    for (int i = 0; i < call->n; i++)
        if (stream_choice(srv, ex, call, kind, i) != 0)
            return;
    if (call->include_usage) {
        struct sim_buf *b = &srv->scratch;
        chunk_open(b, ex, kind);
        sim_buf_adds(b, "[],\"usage\":");
        if (kind->chat)
            chat_usage(b, call, call->completion_total);
        else
            sim_buf_addf(b,
                         "{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,"
                         "\"total_tokens\":%lld}",
                         (long long)call->prompt_tokens, (long long)call->completion_total,
                         (long long)(call->prompt_tokens + call->completion_total));
        sim_buf_adds(b, "}");
        sse_event(ex, NULL, b, 0);
    }
    stream_end(ex, 1);
}

void sim_stream_chat(struct sim_server *srv, struct sim_exchange *ex, const struct sim_call *call,
                     const struct sim_rl_info *rl)
{
    stream_choices(srv, ex, call, rl, &CHAT_CHUNKS);
}

void sim_stream_completions(struct sim_server *srv, struct sim_exchange *ex,
                            const struct sim_call *call, const struct sim_rl_info *rl)
{
    stream_choices(srv, ex, call, rl, &COMPLETION_CHUNKS);
}

/* ---- responses ---- */

/* The response object; text_tokens < 0: no output yet (created, in progress). */
static void resp_object(struct sim_buf *b, const struct sim_exchange *ex,
                        const struct sim_call *call, const char *status, int64_t text_tokens)
{
    const char *id = ex->request_id + 4;
    sim_buf_addf(b,
                 "{\"id\":\"resp_%s\",\"object\":\"response\",\"created_at\":%lld,"
                 "\"status\":\"%s\",\"model\":",
                 id, (long long)(ex->t_unix_ms / 1000), status);
    add_quoted(b, ex->model);
    if (text_tokens < 0) {
        sim_buf_adds(b, ",\"output\":[],\"usage\":null}");
        return;
    }
    sim_buf_addf(b,
                 ",\"output\":[{\"type\":\"message\",\"id\":\"msg_%s\",\"status\":\"%s\","
                 "\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":",
                 id, status);
    add_text(b, text_tokens);
    sim_buf_addf(b,
                 ",\"annotations\":[]}]}],\"usage\":{\"input_tokens\":%lld,"
                 "\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":%lld,"
                 "\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":%lld}}",
                 (long long)call->prompt_tokens, (long long)text_tokens,
                 (long long)(call->prompt_tokens + text_tokens));
}

/* Starts a responses event of type in b: {"type":..,"sequence_number":..,  */
static void resp_event_open(struct sim_buf *b, const char *type, int seq)
{
    sim_buf_reset(b);
    sim_buf_addf(b, "{\"type\":\"%s\",\"sequence_number\":%d", type, seq);
}

void sim_stream_responses(struct sim_server *srv, struct sim_exchange *ex,
                          const struct sim_call *call, const struct sim_rl_info *rl)
{
    struct sim_buf *b = &srv->scratch;
    const char *id = ex->request_id + 4;
    int seq = 0;
    int64_t total = call->completion[0];
    int incomplete = call->max_tokens > 0 && total >= call->max_tokens;
    const char *end_status = incomplete ? "incomplete" : "completed";
    sim_reply_head(srv, ex, 200, -1, rl, call->azure, NULL);
    static const char *const opening[] = {"response.created", "response.in_progress"};
    for (int k = 0; k < 2; k++) {
        resp_event_open(b, opening[k], seq++);
        sim_buf_adds(b, ",\"response\":");
        resp_object(b, ex, call, "in_progress", -1);
        sim_buf_adds(b, "}");
        sse_event(ex, opening[k], b, 0);
    }
    resp_event_open(b, "response.output_item.added", seq++);
    sim_buf_addf(b,
                 ",\"output_index\":0,\"item\":{\"id\":\"msg_%s\",\"type\":\"message\","
                 "\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"}}",
                 id);
    sse_event(ex, "response.output_item.added", b, 0);
    resp_event_open(b, "response.content_part.added", seq++);
    sim_buf_addf(b,
                 ",\"item_id\":\"msg_%s\",\"output_index\":0,\"content_index\":0,"
                 "\"part\":{\"type\":\"output_text\",\"annotations\":[],\"text\":\"\"}}",
                 id);
    sse_event(ex, "response.content_part.added", b, 0);
    int64_t left = total, per = piece_tokens(srv, total);
    while (left > 0) {
        if (call->stream_error && left <= total / 2) {
            resp_event_open(b, "error", seq++);
            sim_buf_adds(b, ",\"code\":\"server_error\",\"message\":\"The server had an error "
                            "while processing your request. Sorry about that!\",\"param\":null}");
            sse_event(ex, "error", b, 0);
            ex->outcome = SIM_OUT_STREAM_ERROR;
            ex->completion_tokens = ex->stream_tokens;
            stream_end(ex, 0);
            return;
        }
        int64_t k = left < per ? left : per;
        resp_event_open(b, "response.output_text.delta", seq++);
        sim_buf_addf(
            b, ",\"item_id\":\"msg_%s\",\"output_index\":0,\"content_index\":0,\"delta\":", id);
        add_text(b, k);
        sim_buf_adds(b, "}");
        sse_event(ex, "response.output_text.delta", b, k);
        left -= k;
    }
    resp_event_open(b, "response.output_text.done", seq++);
    sim_buf_addf(b, ",\"item_id\":\"msg_%s\",\"output_index\":0,\"content_index\":0,\"text\":", id);
    add_text(b, total);
    sim_buf_adds(b, "}");
    sse_event(ex, "response.output_text.done", b, 0);
    resp_event_open(b, "response.content_part.done", seq++);
    sim_buf_addf(b,
                 ",\"item_id\":\"msg_%s\",\"output_index\":0,\"content_index\":0,"
                 "\"part\":{\"type\":\"output_text\",\"annotations\":[],\"text\":",
                 id);
    add_text(b, total);
    sim_buf_adds(b, "}}");
    sse_event(ex, "response.content_part.done", b, 0);
    resp_event_open(b, "response.output_item.done", seq++);
    sim_buf_addf(b,
                 ",\"output_index\":0,\"item\":{\"id\":\"msg_%s\",\"type\":\"message\","
                 "\"status\":\"%s\",\"role\":\"assistant\",\"content\":[{\"type\":"
                 "\"output_text\",\"annotations\":[],\"text\":",
                 id, end_status);
    add_text(b, total);
    sim_buf_adds(b, "}]}}");
    sse_event(ex, "response.output_item.done", b, 0);
    const char *last = incomplete ? "response.incomplete" : "response.completed";
    resp_event_open(b, last, seq++);
    sim_buf_adds(b, ",\"response\":");
    resp_object(b, ex, call, end_status, total);
    sim_buf_adds(b, "}");
    sse_event(ex, last, b, 0);
    stream_end(ex, 0);
}
