/* The process's clocks, the one place they are read: monotonic milliseconds
 * for timeouts, backoff and progress; wall-clock (unix) milliseconds only
 * for what is stored or shown as a date (enq_ms, created_ms, log stamps,
 * ids). Shared decisions never use either: they use Redis TIME inside the
 * scripts. */
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

/* Unix time in ms (CLOCK_REALTIME: may jump; never measure intervals). */
static inline int64_t llmq_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
