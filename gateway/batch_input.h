/* A batch's input file read back for POST /v1/batches (batches.c): its
 * requests as jobs, in file order, ready for the key's policy and the
 * enqueue.
 *
 * A file stored with layout jobs1 (file_jobs.h) is read as its records, in
 * pages (LRANGE), and decoded where they lie: nothing is parsed again. A
 * file stored before that layout (its bytes in the hash's field content) is
 * checked again as the upload checked it, on the offload thread (offload.h),
 * never on the loop; its lines the check refuses now (a smaller body limit
 * since) are counted in n_invalid.
 *
 * Runs on the gateway's loop. The request is held until done has run. */
#ifndef LLMQ_GW_BATCH_INPUT_H
#define LLMQ_GW_BATCH_INPUT_H

#include <stddef.h>

#include "jobs/job.h"

struct gw_request;

struct gw_batch_input {
    struct llmq_job *jobs; /* strings borrowed from the records: never llmq_job_clear */
    long *lines;           /* line number of jobs[i] */
    size_t n;
    size_t n_invalid; /* a stored-before-jobs1 file: lines refused by today's check */
    long invalid_line;
    char invalid_msg[LLMQ_ERROR_MSG_MAX];
    int checked_again; /* 1: the file was stored before jobs1 and checked here */
    /* the records, back to back (private) */
    char *arena;
    size_t arena_len, arena_cap;
    size_t *off, *len, cap;
};

enum gw_batch_input_status {
    GW_BATCH_INPUT_OK = 0,
    GW_BATCH_INPUT_NO_FILE,   /* no such file, or another tenant's */
    GW_BATCH_INPUT_NOT_BATCH, /* not uploaded with purpose batch */
    GW_BATCH_INPUT_NO_REDIS,  /* Redis failed */
    GW_BATCH_INPUT_FAILED,    /* out of memory, a damaged record, the gateway stopping */
};

/* Told once when the read ended; in is filled on GW_BATCH_INPUT_OK. */
typedef void gw_batch_input_done_fn(struct gw_request *r, enum gw_batch_input_status st,
                                    struct gw_batch_input *in);

/* Reads file file_id (the caller's tenant's: r->key) into in (zeroed; the
 * caller's, living until done ran). job_body_max: the limit of a
 * stored-before-jobs1 file's check. Returns 0, after which done runs
 * exactly once from a later callback (r held until then); -1 when r was
 * answered here (no Redis, out of memory) and done never runs. */
int gw_batch_input_read(struct gw_request *r, const char *file_id, size_t job_body_max,
                        struct gw_batch_input *in, gw_batch_input_done_fn *done);

/* Frees what in holds; zeroes it. */
void gw_batch_input_clear(struct gw_batch_input *in);

#endif
