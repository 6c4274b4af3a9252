/* The provider batch's files and lines (pbatch_file.h): pure, jansson only. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job.h"
#include "jobs/job_id.h"
#include "pbatch/pbatch_file.h"

void llmq_pbatch_buf_free(struct llmq_pbatch_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    memset(b, 0, sizeof(*b));
}

static int buf_add(struct llmq_pbatch_buf *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (d == NULL)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static int buf_adds(struct llmq_pbatch_buf *b, const char *s)
{
    return buf_add(b, s, strlen(s));
}

/* 1 when s needs no JSON escaping (printable ASCII without quote or backslash). */
static int json_plain(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f || *s == '"' || *s == '\\')
            return 0;
    return 1;
}

enum llmq_rc llmq_pbatch_input_line(struct llmq_pbatch_buf *b, const char *job_id, const char *url,
                                    const char *body, size_t body_len)
{
    if (!json_plain(job_id) || !json_plain(url))
        return LLMQ_EINVAL;
    size_t mark = b->len;
    if (buf_adds(b, "{\"custom_id\":\"") || buf_adds(b, job_id) ||
        buf_adds(b, "\",\"method\":\"POST\",\"url\":\"") || buf_adds(b, url) ||
        buf_adds(b, "\",\"body\":") || buf_add(b, body, body_len) || buf_adds(b, "}\n")) {
        b->len = mark;
        return LLMQ_ENOMEM;
    }
    return LLMQ_OK;
}

enum llmq_rc llmq_pbatch_multipart(const char *filename, const char *data, size_t len,
                                   struct llmq_pbatch_buf *out, char *ctype, size_t n)
{
    char boundary[64];
    unsigned k = 0;
    do {
        snprintf(boundary, sizeof(boundary), "llmq-pbatch-%08x", 0x5bd1e995u * ++k);
    } while (memmem(data, len, boundary, strlen(boundary)) != NULL);
    snprintf(ctype, n, "multipart/form-data; boundary=%s", boundary);
    memset(out, 0, sizeof(*out));
    char head[512];
    snprintf(head, sizeof(head),
             "--%s\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
             "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%.200s\"\r\n"
             "Content-Type: application/jsonl\r\n\r\n",
             boundary, boundary, filename);
    char tail[96];
    snprintf(tail, sizeof(tail), "\r\n--%s--\r\n", boundary);
    if (buf_adds(out, head) || buf_add(out, data, len) || buf_adds(out, tail)) {
        llmq_pbatch_buf_free(out);
        return LLMQ_ENOMEM;
    }
    return LLMQ_OK;
}

/* The error of a line: response.body.error or the line's error, into
 * reason as "<code>: <message>". */
static void line_reason(const json_t *line, const json_t *body, int status, char *reason, size_t n)
{
    const json_t *e = json_object_get(body, "error");
    if (!json_is_object(e))
        e = json_object_get(line, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    if (code == NULL)
        code = json_string_value(json_object_get(e, "type"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    if (code == NULL && status > 0)
        snprintf(reason, n, "http_%d: %.200s", status, msg ? msg : "provider batch line failed");
    else
        snprintf(reason, n, "%.60s: %.180s", code ? code : "provider_error",
                 msg ? msg : "provider batch line failed");
}

enum llmq_rc llmq_pbatch_line_parse(const char *line, size_t len, struct llmq_pbatch_line *out)
{
    memset(out, 0, sizeof(*out));
    json_t *j = json_loadb(line, len, 0, NULL);
    const char *cid = json_string_value(json_object_get(j, "custom_id"));
    if (!json_is_object(j) || cid == NULL || cid[0] == '\0' || strlen(cid) >= sizeof(out->job_id)) {
        json_decref(j);
        return LLMQ_EINVAL;
    }
    snprintf(out->job_id, sizeof(out->job_id), "%s", cid);
    const json_t *resp = json_object_get(j, "response");
    const json_t *st = json_object_get(resp, "status_code");
    const json_t *body = json_object_get(resp, "body");
    out->status = json_is_integer(st) ? (int)json_integer_value(st) : 0;
    const char *rid = json_string_value(json_object_get(resp, "request_id"));
    snprintf(out->request_id, sizeof(out->request_id), "%s", rid ? rid : "");
    if (out->status >= 200 && out->status <= 299 && json_is_object(body)) {
        out->verdict = LLMQ_PBATCH_DONE;
        char *text = json_dumps(body, JSON_COMPACT);
        if (text != NULL)
            llmq_usage_parse_json(text, strlen(text), &out->usage);
        free(text);
    } else {
        int st4 = out->status >= 400 && out->status <= 499;
        /* a 4xx the request itself caused: not a limit (429), a timeout
         * (408) or a conflict (409) that another try may pass */
        int refused = st4 && out->status != 408 && out->status != 409 && out->status != 429;
        out->verdict = refused ? LLMQ_PBATCH_DEAD : LLMQ_PBATCH_RETRY;
        const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
        if (out->status == 0 && code != NULL &&
            (strcmp(code, "batch_expired") == 0 || strcmp(code, "batch_cancelled") == 0))
            out->verdict = LLMQ_PBATCH_BACK;
        line_reason(j, body, out->status, out->reason, sizeof(out->reason));
    }
    json_decref(j);
    return LLMQ_OK;
}

char *llmq_pbatch_result_line(const struct llmq_pbatch_line *pl, const char *line, size_t len,
                              const char *provider_batch_id)
{
    json_t *src = json_loadb(line, len, 0, NULL);
    if (!json_is_object(src)) {
        json_decref(src);
        return NULL;
    }
    char id[LLMQ_JOB_OUTPUT_ID_MAX], custom_id[LLMQ_JOB_ID_MAX + 1];
    llmq_job_output_id(pl->request_id, pl->job_id, id, sizeof(id));
    llmq_job_id_to_custom(pl->job_id, custom_id, sizeof(custom_id));
    json_t *resp = json_object_get(src, "response");
    json_t *error = json_null();
    if (pl->verdict != LLMQ_PBATCH_DONE) {
        const char *colon = strstr(pl->reason, ": ");
        char code[64];
        snprintf(code, sizeof(code), "%.*s", colon ? (int)(colon - pl->reason) : 0, pl->reason);
        error = json_pack("{s:s, s:s}", "code", code[0] ? code : "provider_error", "message",
                          colon ? colon + 2 : pl->reason);
    }
    json_t *out = json_pack("{s:s, s:s, s:O?, s:o?, s:b, s:s}", "id", id, "custom_id", custom_id,
                            "response", json_is_object(resp) ? resp : NULL, "error", error,
                            "offloaded", 1, "provider_batch_id", provider_batch_id);
    char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    json_decref(src);
    return text;
}

int64_t llmq_pbatch_poll_delay_ms(int64_t poll_ms, int64_t polls)
{
    int64_t k = 1 + (polls > 10 ? (polls - 10) / 10 + 1 : 0);
    return poll_ms * (k > 10 ? 10 : k);
}
