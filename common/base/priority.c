/* The priorities' one names table; see llmq/priority.h. */
#include "llmq/priority.h"

#include <string.h>

/* In the order dispatch serves them. */
static const struct {
    enum llmq_priority prio;
    const char *name;
} priorities[LLMQ_PRIORITY_COUNT] = {
    {LLMQ_PRIORITY_HIGH, "high"},
    {LLMQ_PRIORITY_NORMAL, "normal"},
    {LLMQ_PRIORITY_LOW, "low"},
};

int llmq_priority_parse(const char *s, enum llmq_priority *out)
{
    for (int i = 0; s != NULL && i < LLMQ_PRIORITY_COUNT; i++) {
        if (strcmp(s, priorities[i].name) == 0) {
            *out = priorities[i].prio;
            return 0;
        }
    }
    return -1;
}

const char *llmq_priority_name(enum llmq_priority p)
{
    for (int i = 0; i < LLMQ_PRIORITY_COUNT; i++)
        if (priorities[i].prio == p)
            return priorities[i].name;
    return "normal";
}

enum llmq_priority llmq_priority_by_rank(int rank)
{
    return rank >= 0 && rank < LLMQ_PRIORITY_COUNT ? priorities[rank].prio : LLMQ_PRIORITY_NORMAL;
}
