/* Request decoders of llmq-gateway: pure functions from untrusted bytes
 * (method, path, query values, headers, JSON bodies, result lines read back
 * from Redis) to checked structs or an OpenAI-shaped error. No I/O, no
 * allocation kept past a call except what a member says it owns. Each one has
 * a fuzz target (tests/fuzz/fuzz_gw_*.c). */
#ifndef LLMQ_GW_DECODE_H
#define LLMQ_GW_DECODE_H

#include <jansson.h>
#include <stddef.h>

#include "errors.h"
#include "llmq/llmq.h"

#define GW_ID_MAX 128 /* longest file or batch id accepted in a path */

enum gw_route {
    GW_ROUTE_NOT_FOUND = 0,
    GW_ROUTE_METHOD_NOT_ALLOWED,
    GW_ROUTE_HEALTHZ,
    GW_ROUTE_READYZ,
    GW_ROUTE_METRICS,
    GW_ROUTE_CALL,         /* POST /v1/chat/completions, /v1/embeddings, ... */
    GW_ROUTE_FILE_CREATE,  /* POST /v1/files */
    GW_ROUTE_FILE_LIST,    /* GET /v1/files */
    GW_ROUTE_FILE_GET,     /* GET /v1/files/{id} */
    GW_ROUTE_FILE_CONTENT, /* GET /v1/files/{id}/content */
    GW_ROUTE_FILE_DELETE,  /* DELETE /v1/files/{id} */
    GW_ROUTE_BATCH_CREATE, /* POST /v1/batches */
    GW_ROUTE_BATCH_LIST,   /* GET /v1/batches */
    GW_ROUTE_BATCH_GET,    /* GET /v1/batches/{id} */
    GW_ROUTE_BATCH_CANCEL, /* POST /v1/batches/{id}/cancel */
    GW_ROUTE_MODEL_LIST,   /* GET /v1/models */
    GW_ROUTE_MODEL_GET,    /* GET /v1/models/{id} */
    GW_ROUTE_DASHBOARD,    /* /dashboard and below: a session cookie, no API key */
};

struct gw_route_match {
    enum gw_route route;
    const char *call_url;   /* GW_ROUTE_CALL: the static Batch url */
    char id[GW_ID_MAX + 1]; /* the {id} of the path ("" none) */
};

/* Decodes method and path (both borrowed, NUL-terminated; the path without
 * its query). A path under /v1 with a bad {id} (not a valid name, too long)
 * is GW_ROUTE_NOT_FOUND. Never fails otherwise. */
void gw_route_decode(const char *method, const char *path, struct gw_route_match *out);

/* 1 when the route needs a gateway key (everything under /v1; not the
 * dashboard, whose session is checked by dashboard/session.h). */
int gw_route_needs_key(enum gw_route r);

/* Finds the key in an Authorization header value ("Bearer KEY", case-
 * insensitive scheme, spaces around). Returns 1 with *key and *len pointing into
 * header, or 0 when header is NULL or not of that form. */
int gw_bearer_decode(const char *header, const char **key, size_t *len);

/* Pagination of a list: after (a cursor id, NULL or "" none) and limit
 * (NULL: def; else 1..max). */
struct gw_list_query {
    char after[GW_ID_MAX + 1];
    int limit;
};
int gw_list_query_decode(const char *after, const char *limit, int def, int max,
                         struct gw_list_query *out, struct gw_error *e);

/* What the gateway reads from a call's body. */
struct gw_call {
    char model[LLMQ_JOB_ID_MAX + 1];
    char user[LLMQ_JOB_ID_MAX + 1]; /* "" none; else a valid llmq user name (see .c) */
    int stream;                     /* "stream": true (chat, completions, responses) */
    json_t *body; /* the parsed body (owned: gw_call_clear), from which the call's job is built
                     (llmq_job_from_request_json): the body is parsed once */
};

/* Decodes body[0..len) of a call to url (borrowed; NULL: no endpoint's
 * field checked): a JSON object with a string "model", the endpoint's prompt
 * field (llmq_job_prompt_field: "messages" for chat), "stream" a boolean (true
 * only where the API streams: chat, completions, responses), an optional
 * string "user", the fields that size its cost within their bounds
 * (llmq_cost_check_params: n, max_tokens, ...). Returns 0 (free out with
 * gw_call_clear), or -1 with *e filled (400s, naming the param; nothing to
 * free). */
int gw_call_decode(const char *url, const char *body, size_t len, struct gw_call *out,
                   struct gw_error *e);

/* Frees what gw_call_decode put in c (its parsed body); c may be cleared
 * twice. */
void gw_call_clear(struct gw_call *c);

/* What POST /v1/batches takes. */
struct gw_batch_request {
    char input_file_id[GW_ID_MAX + 1];
    const char *endpoint; /* static: one of the known Batch urls */
    char completion_window[16];
    long long window_ms;
    char *metadata; /* new compact JSON object text, or NULL; free with free */
};

/* Decodes body[0..len). window_max_ms bounds completion_window ("<N>s|m|h|d").
 * Returns 0, or -1 with *e filled (nothing to free then). */
int gw_batch_request_decode(const char *body, size_t len, long long window_max_ms,
                            struct gw_batch_request *out, struct gw_error *e);

/* A Batch output line (a job's result, read back from Redis) as a reply:
 * status (0: no response), request_id, body (a new string; NULL when none),
 * error code and message (new strings or NULL). */
struct gw_result {
    int status;
    char request_id[128];
    char *body;
    char *error_code;
    char *error_message;
};

/* Decodes line[0..len). Returns 0, or -1 when it is no Batch output line.
 * Free the members with gw_result_clear in both cases. */
int gw_result_decode(const char *line, size_t len, struct gw_result *out);
void gw_result_clear(struct gw_result *r);

/* Rewrites a Batch output line of job id "<batch id>.<custom_id>" to the
 * caller's custom_id, as the output file shows it. Returns a new compact
 * line (free with free) and sets *is_error (1: belongs in the error file),
 * or NULL when line is not a Batch output line. */
char *gw_result_line_for_file(const char *line, size_t len, int *is_error);

#endif
