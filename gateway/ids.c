/* Ids and times of the gateway's objects (see ids.h). */
#include "ids.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

void gw_new_id(const char *prefix, char *buf, size_t n)
{
    unsigned char raw[12];
    if (RAND_bytes(raw, sizeof(raw)) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long x =
            (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 20);
        memcpy(raw, &x, sizeof(x));
    }
    int k = snprintf(buf, n, "%s", prefix);
    for (size_t i = 0; i < sizeof(raw) && k + 2 < (int)n; i++)
        k += snprintf(buf + k, n - (size_t)k, "%02x", raw[i]);
}

long long gw_unix_s(void)
{
    return (long long)(llmq_wall_ms() / 1000);
}
