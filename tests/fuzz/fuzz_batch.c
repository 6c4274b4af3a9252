/* Fuzzes the Batch file checker (llmq_batch_parse, common/jobs/batch.h): a whole
 * small JSONL file, every line decoded, repeated custom_ids found. Files
 * under 256 KiB are checked on one thread, so this covers the line splitting,
 * numbering and duplicate detection, not the thread split. */
#include <stdint.h>

#include "jobs/batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    struct llmq_batch b = {0};
    struct llmq_error err = {0};
    if (llmq_batch_parse((const char *)data, size, &d, &b, &err) == LLMQ_OK) {
        /* every line is either a job or an error, numbered in file order */
        for (size_t i = 1; i < b.n_jobs; i++)
            if (b.job_lines[i] <= b.job_lines[i - 1])
                __builtin_trap();
        llmq_batch_clear(&b);
    }
    return 0;
}
