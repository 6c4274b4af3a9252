/* The job id set: open addressing, linear probing, tombstones on removal.
 *
 * Invariant: used slots (live + tombstones) stay under 3/4 of the table, so
 * every probe ends at an empty slot. Growing rehashes the live keys only. */
#include "jobs/job_idset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    const char *key; /* NULL: empty; TOMBSTONE: removed */
    long value;
};

struct llmq_job_idset {
    struct slot *slots;
    size_t cap; /* a power of two */
    size_t live;
    size_t used; /* live + tombstones */
};

static const char tombstone_mark;
#define TOMBSTONE (&tombstone_mark)

/* FNV-1a: short keys, no adversary that could choose collisions cheaply
 * matters here (a batch is the user's own file). */
static size_t hash_key(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 32));
}

struct llmq_job_idset *llmq_job_idset_new(size_t expected)
{
    struct llmq_job_idset *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->cap = 16;
    while (s->cap * 3 / 4 <= expected)
        s->cap *= 2;
    s->slots = calloc(s->cap, sizeof(*s->slots));
    if (s->slots == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

void llmq_job_idset_free(struct llmq_job_idset *s)
{
    if (s == NULL)
        return;
    free(s->slots);
    free(s);
}

/* The slot holding key, or NULL. */
static struct slot *find(const struct llmq_job_idset *s, const char *key)
{
    size_t mask = s->cap - 1;
    for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask) {
        struct slot *sl = &s->slots[i];
        if (sl->key == NULL)
            return NULL;
        if (sl->key != TOMBSTONE && strcmp(sl->key, key) == 0)
            return sl;
    }
}

/* Puts a key known to be absent into a table with room. */
static void put_new(struct llmq_job_idset *s, const char *key, long value)
{
    size_t mask = s->cap - 1;
    size_t i = hash_key(key) & mask;
    while (s->slots[i].key != NULL && s->slots[i].key != TOMBSTONE)
        i = (i + 1) & mask;
    if (s->slots[i].key == NULL)
        s->used++;
    s->slots[i].key = key;
    s->slots[i].value = value;
    s->live++;
}

static int grow(struct llmq_job_idset *s)
{
    size_t new_cap = s->cap;
    while (new_cap * 3 / 4 <= (s->live + 1) * 2)
        new_cap *= 2;
    struct slot *old = s->slots;
    size_t old_cap = s->cap;
    s->slots = calloc(new_cap, sizeof(*s->slots));
    if (s->slots == NULL) {
        s->slots = old;
        return -1;
    }
    s->cap = new_cap;
    s->live = s->used = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key != NULL && old[i].key != TOMBSTONE)
            put_new(s, old[i].key, old[i].value);
    free(old);
    return 0;
}

int llmq_job_idset_add(struct llmq_job_idset *s, const char *key, long value, long *existing)
{
    struct slot *sl = find(s, key);
    if (sl != NULL) {
        if (existing != NULL)
            *existing = sl->value;
        return 0;
    }
    if ((s->used + 1) > s->cap * 3 / 4 && grow(s) != 0)
        return -1;
    put_new(s, key, value);
    return 1;
}

int llmq_job_idset_get(const struct llmq_job_idset *s, const char *key, long *value)
{
    const struct slot *sl = find(s, key);
    if (sl == NULL)
        return 0;
    if (value != NULL)
        *value = sl->value;
    return 1;
}

int llmq_job_idset_remove(struct llmq_job_idset *s, const char *key)
{
    struct slot *sl = find(s, key);
    if (sl == NULL)
        return 0;
    sl->key = TOMBSTONE;
    s->live--;
    return 1;
}

size_t llmq_job_idset_count(const struct llmq_job_idset *s)
{
    return s->live;
}
