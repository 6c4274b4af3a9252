/* A Batch input file (JSONL) checked whole: every line decoded and validated,
 * duplicate custom_ids found, before anything is written anywhere.
 *
 * Blank lines are skipped; line numbers count every line from 1. */
#ifndef LLMQ_BATCH_H
#define LLMQ_BATCH_H

#include <stddef.h>

#include "jobs/job.h"

/* Most threads one file is checked on (see batch.c). */
#define LLMQ_BATCH_THREADS_MAX 8

struct llmq_batch_error {
    long line;
    enum llmq_rc rc;
    char msg[LLMQ_ERROR_MSG_MAX];
};

/* A checked batch. All members owned by it; free with llmq_batch_clear. */
struct llmq_batch {
    struct llmq_job *jobs; /* the valid lines, in file order */
    long *job_lines;       /* line number of jobs[i] */
    size_t n_jobs;
    struct llmq_batch_error *errors; /* the invalid lines, in file order */
    size_t n_errors;
};

/* Checks buf[0..len) (borrowed) line by line with defaults d (borrowed) into
 * *out (which the caller zero-initialises). Invalid lines, including a repeated
 * custom_id (the first occurrence stays valid), land in out->errors; the call
 * still returns LLMQ_OK. Returns LLMQ_ENOMEM (out cleared) only when memory
 * runs out. */
enum llmq_rc llmq_batch_parse(const char *buf, size_t len, const struct llmq_job_defaults *d,
                              struct llmq_batch *out, struct llmq_error *err);

/* Frees b's members and zeroes it; NULL is a no-op. */
void llmq_batch_clear(struct llmq_batch *b);

/* Reads a whole file ("-": standard input) into a new NUL-terminated buffer
 * *buf (free with free) of *len bytes. Returns LLMQ_OK or LLMQ_EIO/LLMQ_ENOMEM. */
enum llmq_rc llmq_batch_read_file(const char *path, char **buf, size_t *len,
                                  struct llmq_error *err);

#endif
