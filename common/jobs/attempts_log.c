/* A job's calls as JSON (see attempts_log.h): the log split at '|', each
 * call read with one sscanf of its eight words. */
#include "jobs/attempts_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmq/llmq.h"

json_t *llmq_attempts_log_json(const char *log, size_t len, long long *calls_total)
{
    char *text = strndup(log, len);
    json_t *list = json_array();
    if (text == NULL || list == NULL) {
        free(text);
        json_decref(list);
        return NULL;
    }
    char *save = NULL;
    char *part = strtok_r(text, "|", &save);
    long long calls = part != NULL ? strtoll(part, NULL, 10) : 0;
    while ((part = strtok_r(NULL, "|", &save)) != NULL) {
        /* (%200s: LLMQ_JOB_ID_MAX, a name's most). A word longer than its
         * field would spill into the next: the call must end where the
         * eighth word does (%n), or it is left out. */
        char mode[16], status[32], endpoint[LLMQ_JOB_ID_MAX + 1], model[LLMQ_JOB_ID_MAX + 1];
        long long start_ms, took_ms, in_tok, out_tok;
        int end = -1;
        if (sscanf(part, "%15s %31s %lld %lld %lld %lld %200s %200s%n", mode, status, &start_ms,
                   &took_ms, &in_tok, &out_tok, endpoint, model, &end) != 8 ||
            end < 0 || part[end] != '\0')
            continue;
        json_array_append_new(
            list,
            json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:s}", "mode", mode, "status", status,
                      "start_ms", (json_int_t)start_ms, "took_ms", (json_int_t)took_ms, "in_tokens",
                      (json_int_t)in_tok, "out_tokens", (json_int_t)out_tok, "endpoint",
                      strcmp(endpoint, "-") ? endpoint : "", "model", model));
    }
    free(text);
    if (calls_total != NULL)
        *calls_total = calls;
    return list;
}
