/* Fuzzes the assembly of streamed answers (worker/stream_assemble.h): the
 * first byte picks the API, the rest is a stream cut into events as the
 * worker cuts it. The assembled result must always be JSON. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "stream_assemble.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum llmq_stream_api api = (enum llmq_stream_api)(fuzz_take_byte(&data, &size) % 3);
    struct llmq_stream_asm *a = llmq_stream_asm_new(api);
    if (a == NULL)
        return 0;
    const char *text = (const char *)data;
    size_t off = 0, n;
    while ((n = llmq_sse_event_len(text + off, size - off)) > 0) {
        if (n > size - off)
            __builtin_trap();
        (void)llmq_stream_asm_event(a, text + off, n);
        off += n;
    }
    size_t len;
    char *r = llmq_stream_asm_result(a, &len);
    if (r != NULL) {
        json_t *j = json_loadb(r, len, 0, NULL);
        if (j == NULL)
            __builtin_trap();
        json_decref(j);
    }
    free(r);
    if (strnlen(llmq_stream_asm_error_code(a), 64) == 64)
        __builtin_trap();
    llmq_stream_asm_free(a);
    return 0;
}
