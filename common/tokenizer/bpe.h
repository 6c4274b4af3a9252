/* Byte-pair encoding over a tiktoken vocabulary (mergeable ranks).
 *
 * A vocabulary maps byte strings to ranks (= token ids); lower ranks merge
 * first. Loading reads a `.tiktoken` file (one "<base64 bytes> <rank>" a line),
 * checks its SHA-256, and builds an open-addressing hash table. A loaded
 * vocabulary is immutable, so any number of threads may encode with it. */
#ifndef LLMQ_BPE_H
#define LLMQ_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "llmq/error.h"

struct llmq_bpe_vocab;

/* Loads the vocabulary at path (borrowed) and checks that the file's SHA-256
 * is sha256_hex (64 lower-case hex digits, borrowed; NULL skips the check).
 * Returns LLMQ_OK and a new vocabulary in *out (free with llmq_bpe_free),
 * LLMQ_ENOTFOUND when the file does not exist, LLMQ_EIO on a read error,
 * LLMQ_EINVAL for a checksum mismatch or a malformed file, LLMQ_ENOMEM. */
enum llmq_rc llmq_bpe_load(const char *path, const char *sha256_hex, struct llmq_bpe_vocab **out,
                           struct llmq_error *err);

/* Frees v; NULL is a no-op. */
void llmq_bpe_free(struct llmq_bpe_vocab *v);

/* Number of ranks in v. */
uint32_t llmq_bpe_size(const struct llmq_bpe_vocab *v);

/* Rank of the byte string b (len bytes), or -1 when it is not a token. */
int64_t llmq_bpe_rank(const struct llmq_bpe_vocab *v, const unsigned char *b, size_t len);

/* Bytes of token rank into *len; returns a pointer into v (borrowed), or NULL
 * for a rank out of range. */
const unsigned char *llmq_bpe_token_bytes(const struct llmq_bpe_vocab *v, uint32_t rank,
                                          size_t *len);

/* Where encoded ranks go: ids may be NULL to only count. The caller owns ids
 * (grown with realloc) and sets all fields to zero before the first use. */
struct llmq_bpe_out {
    uint32_t *ids;
    size_t n;
    size_t cap;
    int want_ids; /* 0: count only */
};

/* Encodes one pre-tokenized piece (len >= 1 bytes, borrowed) and appends its
 * ranks to out. small_max is the longest piece merged with the quadratic scan
 * (longer ones use a heap); pass LLMQ_BPE_SMALL_MAX. Returns LLMQ_OK,
 * LLMQ_ENOMEM, or LLMQ_ETOOBIG for a piece of 4 GiB or more. */
#define LLMQ_BPE_SMALL_MAX 96
enum llmq_rc llmq_bpe_encode_piece(const struct llmq_bpe_vocab *v, const unsigned char *piece,
                                   size_t len, size_t small_max, struct llmq_bpe_out *out);

#endif
