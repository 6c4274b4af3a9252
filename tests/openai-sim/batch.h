/* Internals of openai-sim's Files and Batches APIs: batch.c (routes, files,
 * batch objects) and batch_run.c (validation of an input file, running its
 * lines when the batch is due). Everything is in memory, owned by the
 * server's struct sim_batches, and lives until exit. */
#ifndef SIM_BATCH_H
#define SIM_BATCH_H

#include <jansson.h>
#include <stdint.h>

#include "sim.h"

struct sim_file {
    struct sim_file *next;
    char id[48];
    char filename[256];
    char purpose[32]; /* batch, batch_output */
    int64_t created_s;
    int64_t visible_ms; /* unix ms from which lists and look-ups see it (--batch-api-slow-ms) */
    struct sim_buf data;
};

struct sim_batch {
    struct sim_batch *next;
    char id[48];
    char input_file_id[48];
    char endpoint[64];
    char window[16];
    json_t *metadata; /* owned: an object, or JSON null */
    json_t *errors;   /* owned: NULL, or {"object":"list","data":[...]} */
    char status[16];  /* validating, failed, in_progress, completed, expired, cancelling,
                         cancelled */
    int64_t created_ms, in_progress_ms, completed_ms, failed_ms, cancelled_ms; /* unix ms; 0 */
    int64_t visible_ms;                                                        /* as sim_file's */
    int64_t expires_ms;    /* --batch-expire-after-ms: it expires then (0: never early) */
    int64_t expired_ms;    /* when it expired; 0 */
    int64_t cancelling_ms; /* when a cancel was asked; 0 */
    char output_file_id[48], error_file_id[48]; /* "" until there is one */
    int64_t total, completed, failed;
    char model[128];      /* of its lines (validated: one model) */
    int64_t queue_tokens; /* its lines' prompt tokens, counted while it is unfinished */
};

struct sim_batches {
    struct sim_file *files;    /* newest first */
    struct sim_batch *batches; /* newest first */
    uint64_t seq;              /* ids */
    char **failed_ids;         /* custom_ids --batch-fail-once failed already */
    size_t n_failed, cap_failed;
    /* the enqueued-token limit (--batch-queue-tokens), for tests: the most
     * prompt tokens any model's unfinished batches held at once, and the
     * batches failed with token_limit_exceeded */
    int64_t queue_max_tokens, queue_refused;
    int64_t expiring;    /* batches --batch-expire-after-ms made expire so far */
    int64_t slowed;      /* POSTs --batch-api-slow-first slowed so far */
    int64_t released_ms; /* --batch-hold: when SIGUSR2 let the batches go on; 0 */
};

/* batch.c */
/* The server's batches, created at the first use; NULL when out of memory. */
struct sim_batches *sim_batches_get(struct sim_server *srv);
/* A new id "<head><hex>" into out[n]. */
void sim_batch_new_id(struct sim_server *srv, const char *head, char *out, size_t n);
/* Stores a copy of data[0..len) as a new file. Returns it, or NULL (no memory). */
struct sim_file *sim_file_add(struct sim_server *srv, const char *filename, const char *purpose,
                              const char *data, size_t len);

/* batch_run.c */
/* 1 when ep is an endpoint the Batch API takes (azure: Azure's form, also
 * without "/v1"). */
int sim_batch_endpoint_ok(const char *ep, int azure);
/* Checks input file f of new batch x: status failed with errors, or in_progress. */
void sim_batch_validate(struct sim_server *srv, struct sim_batch *x, const struct sim_file *f);
/* Completes x when it is in progress and due (--batch-pace-ms after creation):
 * runs every line, writes the output and error files, sets the counts. */
void sim_batch_advance(struct sim_server *srv, struct sim_batch *x);

#endif
