/* Fuzzes the worker's decoding of the dispatch script's reply
 * (worker/dispatch_reply.c): the one place where data from Redis streams and
 * job hashes — which hostile producers or a broken Redis can fill with
 * anything — enters the worker. The bytes are decoded by hiredis's RESP
 * reader into a redisReply, as a connection would, then decoded; every
 * accepted job must carry sane, NUL-terminated fields. */
#include <stdint.h>
#include <string.h>

#include "dispatch_reply.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisReply *r = fuzz_reply_from_bytes(data, size);
    if (r == NULL)
        return 0;
    struct llmq_dispatch_head head;
    if (llmq_dispatch_head_decode(r, &head) == 0) {
        if (strlen(head.wake_id) >= sizeof(head.wake_id))
            __builtin_trap();
        for (size_t i = 0; i < head.n_jobs; i++) {
            struct llmq_dispatch_job j;
            if (llmq_dispatch_job_decode(r, i, &j) != 0)
                continue;
            if (j.id[0] == '\0' || j.model[0] == '\0' || j.url_path[0] != '/' || j.cost < 0 ||
                j.attempts < 0 || j.max_attempts < 0 || strlen(j.prio) >= sizeof(j.prio))
                __builtin_trap();
            llmq_dispatch_job_clear(&j);
        }
        /* Out of range is an error, not a read past the reply. */
        struct llmq_dispatch_job past;
        if (llmq_dispatch_job_decode(r, head.n_jobs, &past) == 0)
            __builtin_trap();
    }
    freeReplyObject(r);
    return 0;
}
