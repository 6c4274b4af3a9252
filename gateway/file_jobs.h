/* The stored form of an uploaded Batch file's requests (common/redis/keys.h
 * P gw:file:<id>:jobs, one record per request in file order): each request
 * is checked once, at upload, on the offload thread, and kept as what
 * creating a batch needs, so POST /v1/batches reads the records back instead
 * of reading and checking the file's JSON again on the loop.
 *
 * A record is a header line of numbers, then the job's strings each followed
 * by a NUL:
 *   "J1 <priority name> <line> <deadline_ms> <ttl_ms> <max_attempts> <prompt>
 *    <completion> <estimated> <margin> <total> <id len> <model len> <url len>
 *    <tenant len|-1> <user len|-1> <body len>\n" id\0 model\0 url\0 tenant\0
 *   user\0 body\0
 * (-1: none; ttl_ms 0: the line set none, the batch's completion window
 * applies). A job whose model had a fallback when the file was uploaded
 * (fallbacks.h) is a J2 record: J1's numbers, then "<fallback total>
 * <fallback prompt> <fallback len>", and after body\0 the fallback's
 * name\0 (a gateway before J2 reads it as damaged: gateways are upgraded
 * together, docs/upgrading.md). A job that uses the response cache (its
 * line's llmq.cache, or asks nothing and gets its key for the account's
 * default) is a J3 record (J1's) or a J4 (J2's): three more numbers at the
 * header's end, "<mode> <ttl_s> <store_truncated>" (enum llmq_job_cache,
 * never off), and after every other string its key's 64 hex digits\0. Decoding points the job's
 * strings into the record itself: no copy, no allocation.
 *
 * Pure, no I/O; thread-safe. */
#ifndef LLMQ_GW_FILE_JOBS_H
#define LLMQ_GW_FILE_JOBS_H

#include <stddef.h>

#include "jobs/job.h"

/* The value of the file hash's field layout for files stored this way. */
#define GW_FILE_LAYOUT_JOBS "jobs1"

/* Encodes j (read only) and its line number as a new record *out (free with
 * free) of *len bytes. Returns 0, or -1 when out of memory. */
int gw_file_job_encode(const struct llmq_job *j, long line, char **out, size_t *len);

/* Decodes the record rec[0..len) into *j and *line. j's strings (and
 * j->fallback_model, a J2 record's) point into rec, which must outlive j
 * (never llmq_job_clear it); j->url is the static spelling. Returns 0, or -1 when rec is not a
 * well-formed record (j unchanged). */
int gw_file_job_decode(const char *rec, size_t len, struct llmq_job *j, long *line);

#endif
