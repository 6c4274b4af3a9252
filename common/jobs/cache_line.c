/* Reading result lines answered from the cache (cache_line.h): the header
 * is parsed, the line inside unpacked and parsed, the job's own fields set,
 * and the line dumped again. */
#include "jobs/cache_line.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job_id.h"
#include "jobs/job_pack.h"
#include "llmq/llmq.h"
#include "redis/keys.h"

int llmq_cache_line_is(const char *stored, size_t len)
{
    return len > 0 && (unsigned char)stored[0] == LLMQ_CACHE_LINE_TAG;
}

/* Reads the header text h[0..len): the job id into job (n bytes) and the
 * age. Returns 0, or -1 when it is no such header. */
static int read_header(const char *h, size_t len, char *job, size_t n, long long *age_ms)
{
    json_t *o = json_loadb(h, len, JSON_REJECT_DUPLICATES, NULL);
    const json_t *j = json_object_get(o, "job"), *a = json_object_get(o, "age_ms");
    int ok = json_is_string(j) && json_string_length(j) < n && json_is_integer(a) &&
             json_integer_value(a) >= 0 && llmq_name_valid(json_string_value(j));
    if (ok) {
        memcpy(job, json_string_value(j), json_string_length(j) + 1);
        *age_ms = json_integer_value(a);
    }
    json_decref(o);
    return ok ? 0 : -1;
}

/* Sets the job's own fields on line root (a JSON object). */
static int set_own(json_t *root, const char *job, long long age_ms)
{
    char custom[LLMQ_JOB_ID_MAX + 1];
    if (llmq_job_id_to_custom(job, custom, sizeof(custom)) == NULL)
        return -1;
    return json_object_set_new(root, "custom_id", json_string(custom)) != 0 ||
                   json_object_set_new(root, "cached", json_true()) != 0 ||
                   json_object_set_new(root, "cache_age_s", json_integer(age_ms / 1000)) != 0
               ? -1
               : 0;
}

enum llmq_rc llmq_cache_line_read(const char *stored, size_t len, size_t max_bytes, char **out,
                                  size_t *out_len, struct llmq_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (!llmq_cache_line_is(stored, len))
        return llmq_job_unpack(stored, len, max_bytes, out, out_len, err);
    const char *nl = memchr(stored + 1, '\n', len - 1);
    char job[LLMQ_JOB_ID_MAX + 1];
    long long age_ms = 0;
    if (nl == NULL ||
        read_header(stored + 1, (size_t)(nl - stored - 1), job, sizeof(job), &age_ms) != 0)
        return llmq_error_set(err, LLMQ_EINVAL, "cached line: its header is no {job, age_ms}");
    const char *inner = nl + 1;
    size_t inner_len = len - (size_t)(inner - stored);
    if (llmq_cache_line_is(inner, inner_len))
        return llmq_error_set(err, LLMQ_EINVAL, "cached line: it holds another cached line");
    char *text = NULL;
    size_t text_len = 0;
    enum llmq_rc rc = llmq_job_unpack(inner, inner_len, max_bytes, &text, &text_len, err);
    if (rc != LLMQ_OK)
        return rc;
    json_t *root = json_loadb(text, text_len, 0, NULL);
    free(text);
    if (!json_is_object(root)) {
        json_decref(root);
        return llmq_error_set(err, LLMQ_EINVAL, "cached line: the line inside is no JSON object");
    }
    if (set_own(root, job, age_ms) != 0) {
        json_decref(root);
        return llmq_error_set(err, LLMQ_ENOMEM, "cached line: out of memory");
    }
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (s == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "cached line: out of memory");
    *out = s;
    *out_len = strlen(s);
    return LLMQ_OK;
}
