/* Fuzzes the worker's classification of an API call's outcome
 * (worker/classify.h): everything the API sends. Byte 0 picks the endpoint
 * (low 3 bits) and the transport outcome (the rest); bytes 1-2 the status
 * (mostly 0..999); then a header block up to the first empty line ("\n\n"),
 * and the rest is the body. The verdict, cause and reason must be valid and
 * the reason NUL-terminated (LLMQ_CALL_CAUSE_STALE is the last cause). */
#include <stdint.h>
#include <string.h>

#include "classify.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const paths[8] = {"/v1/chat/completions",
                                         "/v1/embeddings",
                                         "/v1/responses",
                                         "/v1/completions",
                                         "/v1/moderations",
                                         "/openai/deployments/d/chat/completions?x=1",
                                         "",
                                         NULL};
    int b0 = fuzz_take_byte(&data, &size);
    int status = fuzz_take_byte(&data, &size) << 8;
    status |= fuzz_take_byte(&data, &size);
    struct llmq_ratelimit_headers h;
    llmq_ratelimit_headers_init(&h);
    const uint8_t *end = NULL;
    for (size_t i = 0; i + 1 < size; i++)
        if (data[i] == '\n' && data[i + 1] == '\n') {
            end = data + i;
            break;
        }
    if (end != NULL) {
        llmq_ratelimit_headers_feed_block(&h, (const char *)data, (size_t)(end - data), 0);
        size -= (size_t)(end - data) + 2;
        data = end + 2;
    }
    struct llmq_call_response in = {
        .outcome = (enum llmq_http_outcome)((b0 >> 3) % (LLMQ_HTTP_OTHER + 1)),
        .request_sent = b0 & 0x80 ? 1 : 0,
        .error = "fuzzed",
        .status = status % 1000,
        .headers = (b0 & 0x40) ? NULL : &h,
        .body = size ? (const char *)data : NULL,
        .body_len = size,
        .url_path = paths[b0 & 7],
    };
    struct llmq_call_class c;
    llmq_call_classify(&in, &c);
    if ((unsigned)c.verdict > LLMQ_CALL_HANDBACK || (unsigned)c.cause > LLMQ_CALL_CAUSE_STALE ||
        strnlen(c.reason, sizeof(c.reason)) == sizeof(c.reason) || c.reason[0] == '\0')
        __builtin_trap();
    if (strcmp(llmq_call_cause_name(c.cause), "unknown") == 0)
        __builtin_trap();
    return 0;
}
