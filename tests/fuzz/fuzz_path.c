/* Fuzzes the limiter path parser (llmq_path_parse, common/include/llmq/
 * limiter.h) and the bucket names derived from a path it accepts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "redis/keys.h"
#include "llmq/limiter.h"
#include "limiter/path.h"
#include "redis/redis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    if (s == NULL)
        return 0;
    struct llmq_path p;
    struct llmq_error err = {0};
    if (llmq_path_parse(s, &p, &err) == LLMQ_OK) {
        if (p.account[0] == '\0' || p.model[0] == '\0')
            __builtin_trap();
        char names[3][LLMQ_BUCKET_NAME_MAX];
        int n = llmq_path_bucket_names(&p, names);
        if (n < 1 || n > 3)
            __builtin_trap();
        char prefix[LLMQ_KEY_PREFIX_MAX];
        if (llmq_account_prefix(p.account, prefix, sizeof(prefix), &err) != LLMQ_OK)
            __builtin_trap();
    }
    free(s);
    return 0;
}
