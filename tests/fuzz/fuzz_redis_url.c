/* Fuzzes the Redis URL parser (common/redis/redis_url.h) and the redacted form it
 * prints for logs, which must never depend on the password. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "redis/redis_url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    if (s == NULL)
        return 0;
    struct llmq_redis_url u;
    struct llmq_error err = {0};
    if (llmq_redis_url_parse(s, &u, &err) == LLMQ_OK) {
        if (u.port < 0 || u.port > 65535 || u.db < 0)
            __builtin_trap();
        /* the redacted form must not depend on the password's text */
        char red[1024], red_other[1024];
        llmq_redis_url_redacted(&u, red, sizeof(red));
        if (u.password[0] != '\0') {
            struct llmq_redis_url other = u;
            snprintf(other.password, sizeof(other.password), "x");
            llmq_redis_url_redacted(&other, red_other, sizeof(red_other));
            if (strcmp(red, red_other) != 0)
                __builtin_trap();
        }
    }
    free(s);
    return 0;
}
