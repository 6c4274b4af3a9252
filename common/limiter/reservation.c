/* The reservation text of reservation.h: built and split in one place. */
#include "limiter/reservation.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmq/limiter.h"

int llmq_reservation_format(char *buf, size_t len, const char *account, const char *id_prefix,
                            int64_t id, int64_t cost, int64_t at_ms, const char *tags)
{
    int n = snprintf(buf, len, "%s|%s%" PRId64 "|%" PRId64 "|%" PRId64 "%s", account, id_prefix, id,
                     cost, at_ms, tags);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int llmq_reservation_add_bucket(char *buf, size_t len, char mode, const char *bucket)
{
    size_t used = strnlen(buf, len);
    if (used >= len)
        return -1;
    int n = snprintf(buf + used, len - used, "|%c%s", mode, bucket);
    return n < 0 || (size_t)n >= len - used ? -1 : 0;
}

int llmq_reservation_is_local(const char *reservation)
{
    const char *bar = strchr(reservation, '|');
    return bar != NULL && bar[1] == 'L';
}

const char *llmq_reservation_split(const char *reservation, char *account, size_t len)
{
    const char *bar = reservation != NULL ? strchr(reservation, '|') : NULL;
    if (bar == NULL)
        return NULL;
    size_t alen = (size_t)(bar - reservation);
    if (alen > LLMQ_NAME_MAX || alen >= len)
        return NULL;
    memcpy(account, reservation, alen);
    account[alen] = '\0';
    return bar + 1;
}

int64_t llmq_reservation_cost(const char *handle)
{
    const char *bar = strchr(handle, '|');
    if (bar == NULL)
        return -1;
    char *end = NULL;
    long long cost = strtoll(bar + 1, &end, 10);
    return end == bar + 1 ? -1 : (int64_t)cost;
}

const char *llmq_reservation_buckets(const char *handle)
{
    /* Skip "<resid>|<cost>|<at>|" to the first tag. */
    const char *p = handle;
    for (int skip = 0; skip < 3 && p != NULL; skip++) {
        p = strchr(p, '|');
        if (p != NULL)
            p++;
    }
    return p;
}

const char *llmq_reservation_bucket(const char *tag, char *mode, char *name, size_t len)
{
    *mode = tag[0];
    const char *end = tag[0] != '\0' ? strchr(tag + 1, '|') : NULL;
    size_t n = end != NULL ? (size_t)(end - tag - 1) : (tag[0] != '\0' ? strlen(tag + 1) : 0);
    if (n < len) {
        memcpy(name, tag + 1, n);
        name[n] = '\0';
    } else if (len > 0) {
        name[0] = '\0';
    }
    return end != NULL ? end + 1 : NULL;
}
