/* Fuzzes the HTTP error body classifier (common/openai/errorbody.h). The first two
 * bytes are the status (0..65535, so out-of-range statuses are reached too);
 * the rest is the body. Every string of the result must be NUL-terminated
 * within its buffer and free of control bytes (they reach logs). */
#include <stdint.h>
#include <string.h>

#include "openai/errorbody.h"
#include "fuzz_util.h"

static void check_str(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    if (len == n)
        __builtin_trap();
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int status = fuzz_take_byte(&data, &size) << 8;
    status |= fuzz_take_byte(&data, &size);
    if (status >= 1000)
        status = status % 1000; /* mostly plausible statuses, still all of 0..999 */
    struct llmq_errorbody eb;
    llmq_errorbody_classify(status, size ? (const char *)data : NULL, size, &eb);
    check_str(eb.code, sizeof(eb.code));
    check_str(eb.type, sizeof(eb.type));
    check_str(eb.param, sizeof(eb.param));
    check_str(eb.message, sizeof(eb.message));
    if (llmq_errorbody_kind_name(eb.kind) == NULL)
        __builtin_trap();
    return 0;
}
