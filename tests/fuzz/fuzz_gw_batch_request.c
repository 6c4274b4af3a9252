/* Fuzzes the decoder of POST /v1/batches bodies (gateway/decode.h
 * gw_batch_request_decode): an accepted body names a valid file id, a known
 * endpoint, a window within the maximum, and metadata that is a JSON object. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "jobs/job.h"
#include "redis/redis.h"

#define WINDOW_MAX_MS (168LL * 3600 * 1000)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_batch_request b;
    struct gw_error e;
    if (gw_batch_request_decode((const char *)data, size, WINDOW_MAX_MS, &b, &e) != 0) {
        if (e.status != 400 && e.status != 500)
            __builtin_trap();
        return 0;
    }
    if (!llmq_name_valid(b.input_file_id) || llmq_job_url_known(b.endpoint) != b.endpoint ||
        b.window_ms <= 0 || b.window_ms > WINDOW_MAX_MS)
        __builtin_trap();
    if (b.metadata != NULL) {
        json_t *md = json_loads(b.metadata, 0, NULL);
        if (!json_is_object(md))
            __builtin_trap();
        json_decref(md);
    }
    free(b.metadata);
    return 0;
}
