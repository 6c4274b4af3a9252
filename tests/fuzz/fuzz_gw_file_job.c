/* Fuzzes the decoder of a stored request record (gateway/file_jobs.h
 * gw_file_job_decode), which reads what Redis holds in P gw:file:<id>:jobs
 * (written by the gateway, but a damaged or hand-edited key must be refused,
 * never read past). A decoded record must encode back to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "file_jobs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees an overread */
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    struct llmq_job j;
    long line = 0;
    if (gw_file_job_decode(copy, size, &j, &line) == 0) {
        if (j.body + j.body_len > copy + size || j.body[j.body_len] != '\0')
            __builtin_trap();
        char *again = NULL;
        size_t len = 0;
        if (gw_file_job_encode(&j, line, &again, &len) != 0)
            __builtin_trap();
        struct llmq_job k;
        long line2 = 0;
        if (gw_file_job_decode(again, len, &k, &line2) != 0 || line2 != line ||
            k.body_len != j.body_len || strcmp(k.id, j.id) != 0 ||
            (k.fallback_model == NULL) != (j.fallback_model == NULL) ||
            (j.fallback_model != NULL &&
             (strcmp(k.fallback_model, j.fallback_model) != 0 ||
              k.fallback_cost.total_tokens != j.fallback_cost.total_tokens)))
            __builtin_trap();
        free(again);
    }
    free(copy);
    return 0;
}
