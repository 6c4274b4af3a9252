/* The process's local clock: monotonic milliseconds, for timeouts, backoff
 * and progress. Shared decisions never use it: they use Redis TIME inside
 * the scripts. */
#ifndef LLMQ_CLOCK_H
#define LLMQ_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t llmq_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
