/* Fuzzes the Batch input line decoder (llmq_job_from_line, common/jobs/job.h).
 * For each line it accepts, two round trips must hold (else a trap):
 *   - the job written back as a Batch line (custom_id, url, compact body,
 *     every option explicit) decodes to the same job, cost included;
 *   - the output line encoder gives JSON naming the same custom_id.
 *
 * The first byte picks the defaults (priority, tenant/user, a small body
 * limit, a clock for deadlines, the character-count charge model) so that
 * every branch of the option handling is reachable; the rest is the line. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "jobs/job.h"
#include "jobs/job_id.h"

static void check_output_round_trip(const struct llmq_job *job, uint8_t sel)
{
    struct llmq_job_output o = {
        .custom_id = job->id,
        .status_code = (sel & 0x40) ? 429 : 200,
        .request_id = "req_fuzz",
        .body = job->body,
        .body_len = job->body_len,
        .error_code = (sel & 0x40) ? "rate_limit_exceeded" : NULL,
        .error_message = (sel & 0x40) ? job->model : NULL,
    };
    struct llmq_error err = {0};
    char *line = llmq_job_output_encode(&o, &err);
    if (line == NULL)
        return; /* out of memory */
    json_error_t jerr;
    json_t *root = json_loads(line, 0, &jerr);
    /* the line names the custom_id, which maps back to exactly this job id */
    const char *cid = json_string_value(json_object_get(root, "custom_id"));
    char id[LLMQ_JOB_ID_MAX + 1];
    if (cid == NULL || llmq_job_id_from_custom(cid, strlen(cid), id, sizeof(id), NULL) != LLMQ_OK ||
        strcmp(id, job->id) != 0)
        __builtin_trap();
    json_decref(root);
    free(line);
}

static int str_eq(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void check_line_round_trip(const struct llmq_job *job, const struct llmq_job_defaults *d)
{
    json_error_t jerr;
    json_t *body = json_loads(job->body, 0, &jerr);
    if (body == NULL)
        __builtin_trap(); /* the compact body is JSON */
    json_t *opts = json_pack("{s:s, s:I}", "priority", llmq_priority_name(job->priority),
                             "max_attempts", (json_int_t)job->max_attempts);
    char custom_id[LLMQ_JOB_ID_MAX + 1]; /* the line's, which gives the same id again */
    llmq_job_id_to_custom(job->id, custom_id, sizeof(custom_id));
    json_t *line = json_pack("{s:s, s:s, s:s, s:o, s:o}", "custom_id", custom_id, "method", "POST",
                             "url", job->url, "body", body, "llmq", opts);
    if (line == NULL)
        return; /* out of memory */
    if (job->tenant != NULL)
        json_object_set_new(opts, "tenant", json_string(job->tenant));
    if (job->user != NULL)
        json_object_set_new(opts, "user", json_string(job->user));
    if (job->deadline_ms > 0)
        json_object_set_new(opts, "deadline_ms", json_integer(job->deadline_ms));
    if (job->ttl_ms > 0)
        json_object_set_new(opts, "ttl_ms", json_integer(job->ttl_ms));
    char *text = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    if (text == NULL)
        return;
    /* the options are all explicit now: defaults must not matter, except
     * the body limit, the clock and the cost options */
    struct llmq_job_defaults d2;
    llmq_job_defaults_init(&d2);
    d2.max_body_bytes = d->max_body_bytes;
    d2.now_ms = d->now_ms;
    d2.cost = d->cost;
    struct llmq_job again;
    struct llmq_error err = {0};
    if (llmq_job_from_line(text, strlen(text), &d2, &again, &err) != LLMQ_OK)
        __builtin_trap();
    if (strcmp(again.id, job->id) != 0 || strcmp(again.model, job->model) != 0 ||
        again.url != job->url || again.body_len != job->body_len ||
        strcmp(again.body, job->body) != 0 || again.priority != job->priority ||
        !str_eq(again.tenant, job->tenant) || !str_eq(again.user, job->user) ||
        again.deadline_ms != job->deadline_ms || again.ttl_ms != job->ttl_ms ||
        again.max_attempts != job->max_attempts ||
        memcmp(&again.cost, &job->cost, sizeof(again.cost)) != 0)
        __builtin_trap();
    llmq_job_clear(&again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t sel = fuzz_take_byte(&data, &size);
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    d.priority = (enum llmq_priority)(sel % 3);
    if (sel & 0x04)
        d.tenant = "acme";
    if (sel & 0x08)
        d.user = "bob";
    if (sel & 0x10)
        d.max_body_bytes = 256;
    if (sel & 0x20)
        d.now_ms = 1790000000000LL;
    d.deadline_ms = (sel & 0x80) ? 1800000000000LL : 0;
    struct llmq_cost_options cost;
    llmq_cost_options_default(&cost);
    if ((sel & 0x03) == 0x03) {
        cost.charge_model = LLMQ_CHARGE_CHARS;
        d.cost = &cost;
    }

    struct llmq_job job;
    struct llmq_error err = {0};
    if (llmq_job_from_line((const char *)data, size, &d, &job, &err) == LLMQ_OK) {
        check_line_round_trip(&job, &d);
        check_output_round_trip(&job, sel);
        llmq_job_clear(&job);
    }
    return 0;
}
