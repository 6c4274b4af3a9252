/* A set of job ids with an integer each (a line number, an index): finds
 * duplicate custom_ids in a batch and tracks the ids a waiter still expects.
 *
 * Open addressing with linear probing; keys are borrowed and must outlive
 * the set. Not thread-safe. */
#ifndef LLMQ_JOB_IDSET_H
#define LLMQ_JOB_IDSET_H

#include <stddef.h>

struct llmq_job_idset;

/* Returns a new empty set sized for about expected ids (it grows), or NULL
 * when out of memory. Free with llmq_job_idset_free. */
struct llmq_job_idset *llmq_job_idset_new(size_t expected);

/* Frees s (not the keys); NULL is a no-op. */
void llmq_job_idset_free(struct llmq_job_idset *s);

/* Adds key (borrowed) with value. Returns 1 when added, 0 when key was there
 * (its value goes to *existing if not NULL; nothing changes), -1 when out of
 * memory. */
int llmq_job_idset_add(struct llmq_job_idset *s, const char *key, long value, long *existing);

/* Returns 1 and sets *value (may be NULL) when key is in s, else 0. */
int llmq_job_idset_get(const struct llmq_job_idset *s, const char *key, long *value);

/* Removes key; returns 1 when it was there, else 0. */
int llmq_job_idset_remove(struct llmq_job_idset *s, const char *key);

/* Number of keys in s. */
size_t llmq_job_idset_count(const struct llmq_job_idset *s);

#endif
