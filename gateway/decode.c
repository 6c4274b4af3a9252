/* Request decoders (see decode.h). Every rejection says what was wrong in
 * OpenAI's words and shape: type invalid_request_error, the offending param. */
#include "decode.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jobs/job.h"
#include "llmq/cost.h"
#include "redis/redis.h"

#define INVALID "invalid_request_error"
#define METADATA_PAIRS_MAX 16
#define METADATA_KEY_MAX 64
#define METADATA_VALUE_MAX 512

/* Copies path segment [s, s + n) into id when it is a valid name. */
static int take_id(const char *s, size_t n, char id[GW_ID_MAX + 1])
{
    if (n == 0 || n > GW_ID_MAX)
        return 0;
    memcpy(id, s, n);
    id[n] = '\0';
    if (llmq_name_valid(id))
        return 1;
    id[0] = '\0'; /* an invalid id is never handed on */
    return 0;
}

/* Matches "/v1/<coll>[/{id}[/<tail>]]" for a collection; returns 0 no match,
 * 1 the collection, 2 an id, 3 an id and tail (stored in *tail). */
static int match_collection(const char *path, const char *coll, char id[GW_ID_MAX + 1],
                            const char **tail)
{
    size_t cl = strlen(coll);
    if (strncmp(path, coll, cl) != 0)
        return 0;
    const char *p = path + cl;
    if (*p == '\0')
        return 1;
    if (*p != '/')
        return 0;
    p++;
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (!take_id(p, n, id))
        return -1;
    if (slash == NULL)
        return 2;
    *tail = slash + 1;
    return 3;
}

static enum gw_route by_method(const char *method, const char *want, enum gw_route r)
{
    return strcmp(method, want) == 0 ? r : GW_ROUTE_METHOD_NOT_ALLOWED;
}

void gw_route_decode(const char *method, const char *path, struct gw_route_match *out)
{
    memset(out, 0, sizeof(*out));
    out->route = GW_ROUTE_NOT_FOUND;
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0 ||
        strcmp(path, "/metrics") == 0) {
        out->route = !get             ? GW_ROUTE_METHOD_NOT_ALLOWED
                     : path[1] == 'h' ? GW_ROUTE_HEALTHZ
                     : path[1] == 'r' ? GW_ROUTE_READYZ
                                      : GW_ROUTE_METRICS;
        return;
    }
    if (strcmp(path, "/dashboard") == 0 || strncmp(path, "/dashboard/", 11) == 0) {
        out->route = GW_ROUTE_DASHBOARD; /* its own sub-routes: dashboard/dashboard.c */
        return;
    }
    const char *url = llmq_job_url_known(path);
    if (url != NULL) {
        out->route = by_method(method, "POST", GW_ROUTE_CALL);
        out->call_url = url;
        return;
    }
    const char *tail = NULL;
    int m = match_collection(path, "/v1/files", out->id, &tail);
    if (m == 1)
        out->route = strcmp(method, "POST") == 0 ? GW_ROUTE_FILE_CREATE
                     : get                       ? GW_ROUTE_FILE_LIST
                                                 : GW_ROUTE_METHOD_NOT_ALLOWED;
    else if (m == 2)
        out->route = get                             ? GW_ROUTE_FILE_GET
                     : strcmp(method, "DELETE") == 0 ? GW_ROUTE_FILE_DELETE
                                                     : GW_ROUTE_METHOD_NOT_ALLOWED;
    else if (m == 3 && strcmp(tail, "content") == 0)
        out->route = get ? GW_ROUTE_FILE_CONTENT : GW_ROUTE_METHOD_NOT_ALLOWED;
    if (m != 0)
        return;
    m = match_collection(path, "/v1/models", out->id, &tail);
    if (m == 1 || m == 2)
        out->route = !get     ? GW_ROUTE_METHOD_NOT_ALLOWED
                     : m == 1 ? GW_ROUTE_MODEL_LIST
                              : GW_ROUTE_MODEL_GET;
    if (m != 0)
        return;
    m = match_collection(path, "/v1/batches", out->id, &tail);
    if (m == 1)
        out->route = strcmp(method, "POST") == 0 ? GW_ROUTE_BATCH_CREATE
                     : get                       ? GW_ROUTE_BATCH_LIST
                                                 : GW_ROUTE_METHOD_NOT_ALLOWED;
    else if (m == 2)
        out->route = get ? GW_ROUTE_BATCH_GET : GW_ROUTE_METHOD_NOT_ALLOWED;
    else if (m == 3 && strcmp(tail, "cancel") == 0)
        out->route = by_method(method, "POST", GW_ROUTE_BATCH_CANCEL);
}

int gw_route_needs_key(enum gw_route r)
{
    return r != GW_ROUTE_HEALTHZ && r != GW_ROUTE_READYZ && r != GW_ROUTE_METRICS &&
           r != GW_ROUTE_NOT_FOUND && r != GW_ROUTE_METHOD_NOT_ALLOWED && r != GW_ROUTE_DASHBOARD;
}

int gw_bearer_decode(const char *header, const char **key, size_t *len)
{
    if (header == NULL)
        return 0;
    while (*header == ' ' || *header == '\t')
        header++;
    if (strncasecmp(header, "Bearer", 6) != 0 || (header[6] != ' ' && header[6] != '\t'))
        return 0;
    const char *p = header + 6;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, " \t");
    const char *rest = p + n;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    if (n == 0 || *rest != '\0')
        return 0;
    *key = p;
    *len = n;
    return 1;
}

int gw_list_query_decode(const char *after, const char *limit, int def, int max,
                         struct gw_list_query *out, struct gw_error *e)
{
    memset(out, 0, sizeof(*out));
    out->limit = def;
    if (after != NULL && after[0] != '\0' && !take_id(after, strlen(after), out->after))
        return gw_error_set(e, 400, INVALID, "after", "invalid_value",
                            "'after' must be the id of a listed object");
    if (limit != NULL) {
        char *end = NULL;
        long v = strtol(limit, &end, 10);
        if (end == limit || *end != '\0' || v < 1 || v > max)
            return gw_error_set(e, 400, INVALID, "limit", "invalid_value",
                                "'limit' must be an integer from 1 to %d", max);
        out->limit = (int)v;
    }
    return 0;
}

/* A user the request names in "user": kept as it is when it is a valid llmq
 * name, else (OpenAI allows any string) replaced by "u-" and 32 hex digits of
 * its SHA-256, so each end user still gets one bucket of its own. */
static void user_name(const char *s, size_t n, char out[LLMQ_JOB_ID_MAX + 1])
{
    if (n <= LLMQ_JOB_ID_MAX) {
        memcpy(out, s, n);
        out[n] = '\0';
        if (strlen(out) == n && llmq_name_valid(out))
            return;
    }
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)s, n, md);
    memcpy(out, "u-", 2);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 + 2 * i, 3, "%02x", md[i]);
}

static int json_invalid(json_error_t *je, struct gw_error *e)
{
    return gw_error_set(e, 400, INVALID, NULL, NULL,
                        "We could not parse the JSON body of your request. (HINT: This likely "
                        "means you aren't using your HTTP library correctly. The OpenAI API "
                        "expects a JSON payload.) Detail: %s at byte %d",
                        je->text, je->position);
}

/* The fields that size a call's cost (llmq/cost.h), refused here with their
 * param so that no cost is computed from a value out of OpenAI's bounds. */
static int cost_params_check(const json_t *root, struct gw_error *e)
{
    const char *param = NULL;
    struct llmq_error ce = {0};
    if (llmq_cost_check_params(root, &param, &ce) == LLMQ_OK)
        return 0;
    return gw_error_set(e, 400, INVALID, param,
                        json_is_integer(json_object_get(root, param)) ? "invalid_value"
                                                                      : "invalid_type",
                        "%s", ce.msg);
}

int gw_call_decode(const char *url, const char *body, size_t len, struct gw_call *out,
                   struct gw_error *e)
{
    const char *need = url != NULL ? llmq_job_prompt_field(url) : NULL;
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL)
        return json_invalid(&je, e);
    int rc = 0;
    json_t *model = json_object_get(root, "model");
    json_t *stream = json_object_get(root, "stream");
    json_t *user = json_object_get(root, "user");
    if (!json_is_object(root))
        rc = gw_error_set(e, 400, INVALID, NULL, NULL, "The request body must be a JSON object.");
    else if (model == NULL)
        rc = gw_error_set(e, 400, INVALID, "model", NULL, "you must provide a model parameter");
    else if (!json_is_string(model) || json_string_length(model) == 0 ||
             json_string_length(model) > LLMQ_JOB_ID_MAX ||
             !llmq_name_valid(json_string_value(model)))
        rc = gw_error_set(e, 400, INVALID, "model", "invalid_value",
                          "'model' must be a model name (a non-empty string of at most %d "
                          "characters without spaces, '/', '|', '{' or '}')",
                          LLMQ_JOB_ID_MAX);
    else if (need != NULL && json_object_get(root, need) == NULL)
        rc = gw_error_set(e, 400, INVALID, need, "missing_required_parameter",
                          "Missing required parameter: '%s'.", need);
    else if (stream != NULL && !json_is_boolean(stream) && !json_is_null(stream))
        rc = gw_error_set(e, 400, INVALID, "stream", "invalid_type", "'stream' must be a boolean");
    else if (json_is_true(stream) && url != NULL && strcmp(url, "/v1/chat/completions") != 0 &&
             strcmp(url, "/v1/completions") != 0 && strcmp(url, "/v1/responses") != 0)
        rc = gw_error_set(e, 400, INVALID, "stream", "unsupported_value",
                          "%s does not stream: send the request without \"stream\": true", url);
    else if (user != NULL && !json_is_string(user) && !json_is_null(user))
        rc = gw_error_set(e, 400, INVALID, "user", "invalid_type", "'user' must be a string");
    else
        rc = cost_params_check(root, e);
    if (rc != 0) {
        json_decref(root);
        return rc;
    }
    out->stream = json_is_true(stream);
    snprintf(out->model, sizeof(out->model), "%s", json_string_value(model));
    if (json_is_string(user) && json_string_length(user) > 0)
        user_name(json_string_value(user), json_string_length(user), out->user);
    out->body = root;
    return 0;
}

void gw_call_clear(struct gw_call *c)
{
    json_decref(c->body);
    c->body = NULL;
}

/* Parses "<N>s|m|h|d" into ms; 0 when it is not of that form. */
static long long window_parse(const char *s)
{
    char *end = NULL;
    if (!isdigit((unsigned char)s[0]))
        return 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || end[0] == '\0' || end[1] != '\0' || v <= 0 || v > 1000000)
        return 0;
    switch (end[0]) {
    case 's':
        return v * 1000;
    case 'm':
        return v * 60 * 1000;
    case 'h':
        return v * 3600 * 1000;
    case 'd':
        return v * 24 * 3600 * 1000;
    default:
        return 0;
    }
}

static int metadata_check(json_t *md, struct gw_error *e)
{
    if (!json_is_object(md))
        return gw_error_set(e, 400, INVALID, "metadata", "invalid_type",
                            "'metadata' must be an object of strings");
    if (json_object_size(md) > METADATA_PAIRS_MAX)
        return gw_error_set(e, 400, INVALID, "metadata", "invalid_value",
                            "'metadata' may have at most %d keys", METADATA_PAIRS_MAX);
    const char *k;
    json_t *v;
    json_object_foreach(md, k, v)
    {
        if (strlen(k) > METADATA_KEY_MAX || !json_is_string(v) ||
            json_string_length(v) > METADATA_VALUE_MAX)
            return gw_error_set(e, 400, INVALID, "metadata", "invalid_value",
                                "'metadata' keys are at most %d characters and values strings "
                                "of at most %d",
                                METADATA_KEY_MAX, METADATA_VALUE_MAX);
    }
    return 0;
}

int gw_batch_request_decode(const char *body, size_t len, long long window_max_ms,
                            struct gw_batch_request *out, struct gw_error *e)
{
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL)
        return json_invalid(&je, e);
    json_t *file = json_object_get(root, "input_file_id");
    json_t *ep = json_object_get(root, "endpoint");
    json_t *win = json_object_get(root, "completion_window");
    json_t *md = json_object_get(root, "metadata");
    int rc = 0;
    if (!json_is_object(root))
        rc = gw_error_set(e, 400, INVALID, NULL, NULL, "The request body must be a JSON object.");
    else if (!json_is_string(file) ||
             !take_id(json_string_value(file), json_string_length(file), out->input_file_id))
        rc = gw_error_set(e, 400, INVALID, "input_file_id",
                          file ? "invalid_value" : "missing_required_parameter",
                          "'input_file_id' must be the id of an uploaded file");
    else if (!json_is_string(ep) ||
             (out->endpoint = llmq_job_url_known(json_string_value(ep))) == NULL)
        rc = gw_error_set(e, 400, INVALID, "endpoint",
                          ep ? "invalid_value" : "missing_required_parameter",
                          "'endpoint' must be one of /v1/chat/completions, /v1/embeddings, "
                          "/v1/responses, /v1/completions");
    else if (!json_is_string(win) || json_string_length(win) >= sizeof(out->completion_window) ||
             (out->window_ms = window_parse(json_string_value(win))) == 0 ||
             out->window_ms > window_max_ms)
        rc = gw_error_set(e, 400, INVALID, "completion_window",
                          win ? "invalid_value" : "missing_required_parameter",
                          "'completion_window' must be a duration such as \"24h\" (N followed "
                          "by s, m, h or d) of at most %lld hours",
                          window_max_ms / 3600000);
    else if (md != NULL && !json_is_null(md))
        rc = metadata_check(md, e);
    if (rc == 0) {
        snprintf(out->completion_window, sizeof(out->completion_window), "%s",
                 json_string_value(win));
        if (md != NULL && !json_is_null(md)) {
            out->metadata = json_dumps(md, JSON_COMPACT);
            if (out->metadata == NULL)
                rc = gw_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    json_decref(root);
    return rc;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int gw_result_decode(const char *line, size_t len, struct gw_result *out)
{
    memset(out, 0, sizeof(*out));
    json_t *root = json_loadb(line, len, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return -1;
    }
    json_t *resp = json_object_get(root, "response");
    json_t *err = json_object_get(root, "error");
    if (json_is_object(resp)) {
        json_t *sc = json_object_get(resp, "status_code");
        json_t *rid = json_object_get(resp, "request_id");
        json_t *body = json_object_get(resp, "body");
        if (json_is_integer(sc) && json_integer_value(sc) >= 100 && json_integer_value(sc) <= 599)
            out->status = (int)json_integer_value(sc);
        if (json_is_string(rid))
            snprintf(out->request_id, sizeof(out->request_id), "%s", json_string_value(rid));
        if (json_is_string(body))
            out->body = strdup(json_string_value(body));
        else if (body != NULL && !json_is_null(body))
            out->body = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    }
    if (json_is_object(err)) {
        out->error_code = dup_or_null(json_string_value(json_object_get(err, "code")));
        out->error_message = dup_or_null(json_string_value(json_object_get(err, "message")));
        if (out->error_code == NULL)
            out->error_code = strdup("error");
    }
    json_decref(root);
    return out->status == 0 && out->error_code == NULL ? -1 : 0;
}

void gw_result_clear(struct gw_result *r)
{
    if (r == NULL)
        return;
    free(r->body);
    free(r->error_code);
    free(r->error_message);
    memset(r, 0, sizeof(*r));
}

char *gw_result_line_for_file(const char *line, size_t len, int *is_error)
{
    json_t *root = json_loadb(line, len, 0, NULL);
    json_t *cid = json_object_get(root, "custom_id");
    char *out = NULL;
    if (json_is_object(root) && json_is_string(cid)) {
        const char *dot = strchr(json_string_value(cid), '.');
        if (dot != NULL)
            json_object_set_new(root, "custom_id", json_string(dot + 1));
        json_t *err = json_object_get(root, "error");
        *is_error = err != NULL && !json_is_null(err);
        out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(root);
    return out;
}
