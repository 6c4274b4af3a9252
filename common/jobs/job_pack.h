/* A job's body (and a result line) as stored in Redis: the one codec of
 * stored values (docs/operations.md "Sizing Redis", common/redis/keys.h).
 *
 * A stored value is either the JSON text itself (every version before this
 * one, and values too short to be worth packing) or packed:
 *
 *   byte 0      LLMQ_JOB_PACK_TAG (0x01; JSON text never starts with it)
 *   varint      the text's length in bytes (LEB128, at most 5 bytes)
 *   the rest    the text as a raw DEFLATE stream (RFC 1951) compressed with
 *               the preset dictionary of version 1 (job_pack.c: common
 *               OpenAI request and Batch output JSON), so that even a
 *               short chat request shrinks
 *
 * The dictionary is part of the format: it never changes; another one would
 * be another tag. Redis rounds every allocation up to its size class (up to
 * a quarter above 128 B), so packing is what keeps a body of kilobytes
 * within its own size. Lua never unpacks (Redis has no zlib): the scripts
 * treat a stored body as opaque bytes and the worker unpacks it.
 *
 * Pure functions (zlib only), thread-safe. Untrusted input: the unpacker is
 * fuzzed (tests/fuzz/fuzz_job_pack.c). */
#ifndef LLMQ_JOB_PACK_H
#define LLMQ_JOB_PACK_H

#include <stddef.h>

#include "llmq/error.h"

#define LLMQ_JOB_PACK_TAG 0x01
/* Texts shorter than this are stored as they are (packing cannot save
 * anything there). */
#define LLMQ_JOB_PACK_MIN_BYTES 32
/* The longest text a reader of stored values unpacks (a bound against a
 * damaged length, far above any body the API takes). */
#define LLMQ_JOB_PACK_TEXT_MAX (256u << 20)

/* A packer keeps zlib's state from one text to the next (setting it up
 * costs more than packing a short body): one per thread at a time. */
struct llmq_job_packer;

/* Returns a new packer (llmq_job_packer_free), or NULL when memory runs out. */
struct llmq_job_packer *llmq_job_packer_new(void);

/* Frees pk; NULL is a no-op. */
void llmq_job_packer_free(struct llmq_job_packer *pk);

/* Packs text[0..len) (borrowed) with pk. *out gets a new buffer (free with
 * free) of *out_len bytes, or NULL when the text is better stored as it is
 * (shorter than LLMQ_JOB_PACK_MIN_BYTES, or packing would not make it
 * shorter). Returns LLMQ_OK, LLMQ_ENOMEM, or LLMQ_EINVAL when len is over
 * 4 GiB - 1 (err says which). */
enum llmq_rc llmq_job_packer_pack(struct llmq_job_packer *pk, const char *text, size_t len,
                                  char **out, size_t *out_len, struct llmq_error *err);

/* The same with a packer of its own, for one text. */
enum llmq_rc llmq_job_pack(const char *text, size_t len, char **out, size_t *out_len,
                           struct llmq_error *err);

/* 1 when stored[0..len) is a packed value (its first byte is the tag). */
int llmq_job_packed(const char *stored, size_t len);

/* The text of stored value stored[0..len) (borrowed): *out gets a new
 * NUL-terminated buffer (free with free) of *out_len bytes; an unpacked
 * value is copied as it is. max_bytes bounds the text (a packed value that
 * says it is longer is refused before anything is allocated). Returns
 * LLMQ_OK, LLMQ_ENOMEM, or LLMQ_EINVAL with err naming what is wrong (a
 * length that is no varint or over max_bytes, a damaged stream, a text
 * shorter or longer than its length); on failure *out is NULL. */
enum llmq_rc llmq_job_unpack(const char *stored, size_t len, size_t max_bytes, char **out,
                             size_t *out_len, struct llmq_error *err);

#endif
