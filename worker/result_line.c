/* Result lines (result_line.h): what a job that ended leaves for its
 * reader, from the job and its answer, the same for whole and streamed
 * answers. Returns new strings; reads nothing but its arguments. */
#include "result_line.h"

#include <jansson.h>

#include "http/http.h"
#include "jobs/job.h"
#include "jobs/job_id.h"
#include "openai/errorbody.h"
#include "worker.h"

/* A job a named endpoint or a fallback model served says so in its line:
 * "endpoint" and "model" (the model that served it), next to the Batch
 * fields. A job of the implicit endpoint's line is as before. */
static void add_served_by(const struct worker_job *job, json_t *line)
{
    int named = job->endpoint != NULL && job->endpoint[0] != '\0';
    int fallback = job->asked_model != NULL && job->asked_model[0] != '\0';
    if (line == NULL || (!named && !fallback))
        return;
    if (named)
        json_object_set_new(line, "endpoint", json_string(job->endpoint));
    json_object_set_new(line, "model", json_string(job->model));
    if (fallback)
        json_object_set_new(line, "asked_model", json_string(job->asked_model));
}

/* The error object of a line (see result_line.h). Returns new. */
static json_t *line_error(long status, const struct llmq_errorbody *eb, const char *err_code,
                          const char *err_message)
{
    if (err_code != NULL)
        return json_pack("{s:s, s:s}", "code", err_code, "message", err_message);
    if (status >= 200 && status <= 299)
        return json_null();
    const char *code = eb != NULL && eb->code[0]   ? eb->code
                       : eb != NULL && eb->type[0] ? eb->type
                                                   : "http_error";
    const char *message = eb != NULL && eb->message[0] ? eb->message : "request failed";
    return json_pack("{s:s, s:s}", "code", code, "message", message);
}

char *llmq_worker_result_line(const struct worker_job *job, const struct llmq_http_response *resp,
                              const char *body, size_t body_len, const struct llmq_errorbody *eb,
                              const char *err_code, const char *err_message)
{
    json_t *b = NULL;
    if (body != NULL && (b = json_loadb(body, body_len, 0, NULL)) == NULL)
        b = json_stringn_nocheck(body, body_len);
    const char *rid = resp->headers.request_id[0] ? resp->headers.request_id : "";
    char id[LLMQ_JOB_OUTPUT_ID_MAX], custom_id[LLMQ_JOB_ID_MAX + 1];
    llmq_job_output_id(rid, job->id, id, sizeof(id));
    llmq_job_id_to_custom(job->id, custom_id, sizeof(custom_id));
    json_t *line = json_pack("{s:s, s:s, s:{s:i, s:s, s:o}, s:o}", "id", id, "custom_id", custom_id,
                             "response", "status_code", (int)resp->status, "request_id", rid,
                             "body", b ? b : json_null(), "error",
                             line_error(resp->status, eb, err_code, err_message));
    add_served_by(job, line);
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    return text;
}

char *llmq_worker_error_line(const struct worker_job *job, const char *code, const char *message)
{
    char id[LLMQ_JOB_OUTPUT_ID_MAX], custom_id[LLMQ_JOB_ID_MAX + 1];
    llmq_job_output_id(NULL, job->id, id, sizeof(id));
    llmq_job_id_to_custom(job->id, custom_id, sizeof(custom_id));
    json_t *line = json_pack("{s:s, s:s, s:n, s:{s:s, s:s}}", "id", id, "custom_id", custom_id,
                             "response", "error", "code", code, "message", message);
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    return text;
}
