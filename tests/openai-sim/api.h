/* Internals shared by the request-handling files of openai-sim: api.c
 * (routing, admission), tokens.c (token rules), reply.c (status lines,
 * headers, error bodies) and bodies.c (success bodies, streams). */
#ifndef SIM_API_H
#define SIM_API_H

#include <jansson.h>
#include <stdint.h>

#include "sim.h"

enum sim_endpoint {
    SIM_EP_NONE = 0,
    SIM_EP_CHAT,
    SIM_EP_EMBEDDINGS,
    SIM_EP_RESPONSES,
    SIM_EP_COMPLETIONS,
    SIM_EP_HEALTH
};

#define SIM_MAX_CHOICES 128

/* A parsed, validated API request. */
struct sim_call {
    enum sim_endpoint ep;
    int azure;          /* arrived on an Azure deployment path */
    const json_t *root; /* borrowed request body */
    int n;              /* choices */
    int64_t max_tokens; /* per choice; -1 when the request sets none */
    int stream, include_usage;
    int stream_error; /* --stream-error drew this stream: it breaks off half-way */
    int64_t prompt_tokens;
    int64_t reserve_tokens;          /* charged at admission */
    int completion[SIM_MAX_CHOICES]; /* completion tokens per choice */
    int64_t completion_total;
    uint64_t hash; /* of the body: seeds the deterministic output */
    int dims;      /* embeddings: vector length */
    int base64;    /* embeddings: encoding_format "base64" */
};

/* The x-ratelimit-* values of the bucket after admission (or at denial). */
struct sim_rl_info {
    int have_req, have_tok; /* that dimension is limited */
    int64_t limit_req, limit_tok;
    int64_t remaining_req, remaining_tok;
    int64_t reset_req_ms, reset_tok_ms;
};

/* tokens.c */
/* Prompt tokens of request root (borrowed) to endpoint ep for model, by
 * cfg's --prompt-count rule (see tokens.c), into *out. Returns 0, or -1 when
 * the tokenizer failed (its vocabulary could not be loaded). */
int sim_prompt_tokens(const struct sim_config *cfg, enum sim_endpoint ep, const char *model,
                      const json_t *root, int64_t *out);
/* Fills call->completion[] and completion_total from call->hash, the seed,
 * call->max_tokens and the configured default range. */
void sim_completion_tokens(const struct sim_config *cfg, struct sim_call *call);
uint64_t sim_hash_bytes(const void *p, size_t n);
/* Writes the first 8 hex digits of SHA-256(key) into out[9] and the digest
 * into sha[32] (key may be empty: out becomes "-" and sha zero). */
void sim_key_digest(const char *key, size_t n, char out[9], unsigned char sha[32]);

/* reply.c */
/* Formats ms as OpenAI/Go durations: "20ms", "1s", "1.5s", "6m0s", "1h0m0s". */
void sim_duration(int64_t ms, char *out, size_t n);
/* Appends the status line and headers to ex->out. content_length -1 means a
 * chunked event stream. extra (may be NULL) is raw "Name: value\r\n" lines. */
void sim_reply_head(struct sim_server *srv, struct sim_exchange *ex, int status,
                    int64_t content_length, const struct sim_rl_info *rl, int azure,
                    const char *extra);
/* Builds a complete JSON answer: head + the body in srv->scratch. */
void sim_reply_json(struct sim_server *srv, struct sim_exchange *ex, int status,
                    const struct sim_rl_info *rl, int azure, const char *extra);
/* Builds an OpenAI error answer {"error":{message,type,param,code}};
 * param and code may be NULL (JSON null). */
void sim_reply_error(struct sim_server *srv, struct sim_exchange *ex, int status, const char *type,
                     const char *param, const char *code, const char *msg,
                     const struct sim_rl_info *rl, int azure);
/* Builds an Azure error answer {"error":{"code":"<status>","message":...}}. */
void sim_reply_azure_error(struct sim_server *srv, struct sim_exchange *ex, int status,
                           const char *msg, const struct sim_rl_info *rl);
/* Builds a 429: the OpenAI or Azure shape for a limit (kind "requests" or
 * "tokens"), with retry hints wait_ms. used/requested fill the message. */
void sim_reply_429(struct sim_server *srv, struct sim_exchange *ex, const struct sim_call *call,
                   const char *kind, int64_t limit, int64_t used, int64_t requested,
                   int64_t wait_ms, const struct sim_rl_info *rl);

/* bodies.c: success answers for each endpoint (ex->marks set). */
void sim_body_chat(struct sim_server *srv, struct sim_exchange *ex, const struct sim_call *call,
                   const struct sim_rl_info *rl);
void sim_body_chat_stream(struct sim_server *srv, struct sim_exchange *ex,
                          const struct sim_call *call, const struct sim_rl_info *rl);
void sim_body_embeddings(struct sim_server *srv, struct sim_exchange *ex,
                         const struct sim_call *call, const struct sim_rl_info *rl);
void sim_body_responses(struct sim_server *srv, struct sim_exchange *ex,
                        const struct sim_call *call, const struct sim_rl_info *rl);
void sim_body_completions(struct sim_server *srv, struct sim_exchange *ex,
                          const struct sim_call *call, const struct sim_rl_info *rl);

/* stream.c: the event streams of stream: true (chat and completions: data
 * chunks ending with data: [DONE]; responses: the named events). With
 * --stream-gap-ms each content chunk carries one token, as the API's do; the
 * release steps count the tokens sent so far (ex->mark_tokens). */
void sim_stream_chat(struct sim_server *srv, struct sim_exchange *ex, const struct sim_call *call,
                     const struct sim_rl_info *rl);
void sim_stream_completions(struct sim_server *srv, struct sim_exchange *ex,
                            const struct sim_call *call, const struct sim_rl_info *rl);
void sim_stream_responses(struct sim_server *srv, struct sim_exchange *ex,
                          const struct sim_call *call, const struct sim_rl_info *rl);

/* admit.c */
/* Parses and validates the body of c's request into call (root: returns a
 * new reference the caller frees, or NULL). On a bad request it builds the
 * 400/404 answer into c->ex and returns -1. */
int sim_call_parse(struct sim_conn *c, struct sim_call *call, json_t **root);
/* Draws and answers the injected faults that precede admission
 * (insufficient_quota, 500, 503). Returns 1 when one answered. */
int sim_fault_before(struct sim_conn *c, const struct sim_call *call);
/* Applies the (key, model) window: spurious 429s, request and token limits.
 * Returns 0 when admitted (charged; *rl filled) or 1 when a 429 was built. */
int sim_window_admit(struct sim_conn *c, const struct sim_call *call, struct sim_rl_info *rl);

/* Appends a release step ending at the current end of ex->out. */
void sim_mark(struct sim_exchange *ex);

#endif
