/* Fuzzes the stream relay's decoders (common/jobs/stream_relay.c): a relay
 * message comes from Redis pub/sub, which anyone with access to the account's
 * Redis can publish to. Every frame read must lie inside the message and
 * carry a valid kind; a cancel's id must lie inside it. */
#include <stdint.h>
#include <string.h>

#include "jobs/stream_relay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *m = (const char *)data;
    const char *name;
    size_t name_len;
    long off = llmq_relay_sender(m, size, &name, &name_len);
    if (off >= 0) {
        if ((size_t)off > size || name_len == 0 || name + name_len > m + size)
            __builtin_trap();
        size_t o = (size_t)off, before = o;
        struct llmq_relay_frame f;
        int rc;
        while ((rc = llmq_relay_frame_next(m, size, &o, &f)) == 1) {
            if (o <= before || o > size || f.job_id < m || f.job_id + f.job_id_len > m + size ||
                f.payload < m || f.payload + f.payload_len > m + size ||
                strchr(LLMQ_RELAY_KINDS, f.kind) == NULL || f.kind == '\0' || f.seq < 0)
                __builtin_trap();
            before = o;
        }
    }
    const char *id;
    size_t id_len;
    if (llmq_relay_cancel_decode(m, size, &id, &id_len) == 0 &&
        (id < m || id + id_len > m + size || id_len == 0))
        __builtin_trap();
    return 0;
}
