/* Fuzzes the stored-value codec (common/jobs/job_pack.h). The bytes are a
 * stored value as Redis hands it back: unpacking never overruns, never
 * yields more than its bound, and fails with no output. Then the bytes as a
 * text: pack and unpack give them back exactly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job_pack.h"

#define BOUND (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    char *out = NULL;
    size_t out_len = 0;
    enum llmq_rc rc = llmq_job_unpack(in, size, BOUND, &out, &out_len, NULL);
    if (rc == LLMQ_OK && (out == NULL || out_len > BOUND || out[out_len] != '\0'))
        __builtin_trap();
    if (rc != LLMQ_OK && (out != NULL || out_len != 0))
        __builtin_trap();
    if (rc == LLMQ_OK && !llmq_job_packed(in, size) && (out_len != size || memcmp(out, in, size)))
        __builtin_trap();
    free(out);

    char *packed = NULL;
    size_t plen = 0;
    if (llmq_job_pack(in, size, &packed, &plen, NULL) != LLMQ_OK)
        return 0;
    if (packed != NULL) {
        if (plen >= size || !llmq_job_packed(packed, plen))
            __builtin_trap();
        char *back = NULL;
        size_t blen = 0;
        if (llmq_job_unpack(packed, plen, size, &back, &blen, NULL) != LLMQ_OK || blen != size ||
            memcmp(back, in, size) != 0)
            __builtin_trap();
        free(back);
        free(packed);
    }
    return 0;
}
