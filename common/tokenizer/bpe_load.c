/* Loading a `.tiktoken` vocabulary: read the whole file, check its SHA-256,
 * decode each "<base64> <rank>" line into one byte pool, and index it.
 *
 * Ranks must be dense (0 .. n-1, each once), which both OpenAI vocabularies
 * are; anything else is reported as a malformed file rather than guessed at. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base64.h"
#include "tokenizer/bpe.h"
#include "tokenizer/bpe_internal.h"

/* Reads path into a new buffer (*buf, *len). */
static enum llmq_rc read_file(const char *path, unsigned char **buf, size_t *len,
                              struct llmq_error *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return llmq_error_set(err, errno == ENOENT ? LLMQ_ENOTFOUND : LLMQ_EIO,
                              "tokenizer: cannot open %s: %s", path, strerror(errno));
    }
    size_t cap = 1 << 22, n = 0;
    unsigned char *b = malloc(cap);
    while (b != NULL) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *nb = realloc(b, cap * 2);
        if (nb == NULL) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int bad = b != NULL && ferror(f);
    fclose(f);
    if (b == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "tokenizer: out of memory reading %s", path);
    if (bad) {
        free(b);
        return llmq_error_set(err, LLMQ_EIO, "tokenizer: read error on %s", path);
    }
    *buf = b;
    *len = n;
    return LLMQ_OK;
}

static enum llmq_rc check_sha256(const unsigned char *buf, size_t len, const char *want_hex,
                                 const char *path, struct llmq_error *err)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    static const char digits[] = "0123456789abcdef";
    if (EVP_Digest(buf, len, md, &md_len, EVP_sha256(), NULL) != 1)
        return llmq_error_set(err, LLMQ_EIO, "tokenizer: SHA-256 failed");
    for (unsigned i = 0; i < md_len; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * md_len] = '\0';
    if (strcmp(hex, want_hex) != 0) {
        return llmq_error_set(err, LLMQ_EINVAL, "tokenizer: %s has SHA-256 %s, expected %s", path,
                              hex, want_hex);
    }
    return LLMQ_OK;
}

/* Parses the decimal rank in s[0..n); -1 when it is not one. */
static long parse_rank(const unsigned char *s, size_t n)
{
    long v = 0;
    if (n == 0 || n > 9)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* Inserts rank r (whose bytes are in the pool) into the table. Returns 0, or
 * -1 when the same bytes are already there. */
static int table_insert(struct llmq_bpe_vocab *v, uint32_t r)
{
    const unsigned char *b = v->pool + v->off[r];
    size_t len = v->off[r + 1] - v->off[r];
    uint64_t h = llmq_bpe_hash(b, len);
    uint64_t i = h & v->mask;
    for (;;) {
        uint64_t e = v->table[i];
        if (e == 0) {
            v->table[i] = (h & 0xFFFFFFFF00000000ull) | ((uint64_t)r + 1);
            return 0;
        }
        uint32_t o = (uint32_t)(e & 0xFFFFFFFFu) - 1;
        if (v->off[o + 1] - v->off[o] == len && memcmp(v->pool + v->off[o], b, len) == 0)
            return -1;
        i = (i + 1) & v->mask;
    }
}

/* Parses every line of buf into v (pool, off, n_tokens). */
static enum llmq_rc parse_lines(struct llmq_bpe_vocab *v, const unsigned char *buf, size_t len,
                                const char *path, struct llmq_error *err)
{
    size_t lines = 0, pos = 0;
    for (size_t i = 0; i < len; i++)
        lines += buf[i] == '\n';
    if (len > 0 && buf[len - 1] != '\n')
        lines++;
    v->pool = malloc(len + 1); /* decoded bytes are shorter than their base64 */
    v->off = malloc((lines + 1) * sizeof(uint32_t));
    if (v->pool == NULL || v->off == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "tokenizer: out of memory");
    uint32_t n = 0, used = 0;
    while (pos < len) {
        const unsigned char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;
        const unsigned char *sp = memchr(buf + pos, ' ', end - pos);
        if (end == pos) { /* tolerate a blank line */
            pos = end + 1;
            continue;
        }
        long rank = sp ? parse_rank(sp + 1, (size_t)(buf + end - (sp + 1))) : -1;
        long nb = sp ? llmq_base64_decode((const char *)buf + pos, (size_t)(sp - (buf + pos)),
                                          v->pool + used)
                     : -1;
        if (nb <= 0 || rank != (long)n)
            return llmq_error_set(err, LLMQ_EINVAL, "tokenizer: %s line %u is malformed", path,
                                  n + 1);
        v->off[n++] = used;
        used += (uint32_t)nb;
        pos = end + 1;
    }
    v->off[n] = used;
    v->n_tokens = n;
    return LLMQ_OK;
}

/* Builds the hash table and the single-byte ranks. */
static enum llmq_rc build_index(struct llmq_bpe_vocab *v, const char *path, struct llmq_error *err)
{
    uint64_t size = 1024;
    while (size < 2ull * v->n_tokens)
        size <<= 1;
    v->mask = size - 1;
    v->table = calloc(size, sizeof(uint64_t));
    if (v->table == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "tokenizer: out of memory");
    for (uint32_t r = 0; r < v->n_tokens; r++) {
        if (table_insert(v, r) != 0)
            return llmq_error_set(err, LLMQ_EINVAL, "tokenizer: %s repeats token %u", path, r);
    }
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        int64_t r = llmq_bpe_rank(v, &c, 1);
        if (r < 0)
            return llmq_error_set(err, LLMQ_EINVAL, "tokenizer: %s lacks byte %d", path, b);
        v->byte_rank[b] = (uint32_t)r;
    }
    return LLMQ_OK;
}

enum llmq_rc llmq_bpe_load(const char *path, const char *sha256_hex, struct llmq_bpe_vocab **out,
                           struct llmq_error *err)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    enum llmq_rc rc = read_file(path, &buf, &len, err);
    if (rc != LLMQ_OK)
        return rc;
    if (sha256_hex != NULL) {
        rc = check_sha256(buf, len, sha256_hex, path, err);
        if (rc != LLMQ_OK) {
            free(buf);
            return rc;
        }
    }
    struct llmq_bpe_vocab *v = calloc(1, sizeof(*v));
    if (v == NULL) {
        free(buf);
        return llmq_error_set(err, LLMQ_ENOMEM, "tokenizer: out of memory");
    }
    rc = parse_lines(v, buf, len, path, err);
    free(buf);
    if (rc == LLMQ_OK)
        rc = build_index(v, path, err);
    if (rc != LLMQ_OK) {
        llmq_bpe_free(v);
        return rc;
    }
    /* The pool was sized for the base64 text; give back the rest. */
    unsigned char *shrunk = realloc(v->pool, v->off[v->n_tokens] + 1);
    if (shrunk != NULL)
        v->pool = shrunk;
    *out = v;
    return LLMQ_OK;
}

void llmq_bpe_free(struct llmq_bpe_vocab *v)
{
    if (v == NULL)
        return;
    free(v->pool);
    free(v->off);
    free(v->table);
    free(v);
}
