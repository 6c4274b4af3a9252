/* Token counting: model → encoding, the process-wide vocabularies, and the
 * pre-tokenize-then-BPE loop.
 *
 * Each encoding's vocabulary is loaded at most once per process, under
 * pthread_once, and never freed (it is read-only and shared by all threads;
 * freeing it at exit would only race with threads still counting). A failed
 * load is remembered with its error and reported to every later caller. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "tokenizer/bpe_internal.h"
#include "llmq/tokens.h"
#include "tokenizer/pretok.h"
#include "tokenizer/unicode.h"

struct encoding_def {
    const char *name;
    const char *file;
    const char *sha256;
    enum llmq_pretok_pattern pattern;
};

static const struct encoding_def defs[LLMQ_ENCODING_COUNT] = {
    [LLMQ_ENCODING_O200K_BASE] =
        {"o200k_base", "o200k_base.tiktoken",
         "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d", LLMQ_PRETOK_O200K},
    [LLMQ_ENCODING_CL100K_BASE] =
        {"cl100k_base", "cl100k_base.tiktoken",
         "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", LLMQ_PRETOK_CL100K},
};

struct loaded {
    pthread_once_t once;
    struct llmq_bpe_vocab *vocab;
    struct llmq_error err; /* the load's outcome; err.rc == LLMQ_OK on success */
};

static struct loaded loaded[LLMQ_ENCODING_COUNT] = {
    {PTHREAD_ONCE_INIT, NULL, {LLMQ_OK, ""}},
    {PTHREAD_ONCE_INIT, NULL, {LLMQ_OK, ""}},
};

const char *llmq_tokens_encoding_name(enum llmq_encoding e)
{
    if ((unsigned)e >= LLMQ_ENCODING_COUNT)
        return "unknown";
    return defs[e].name;
}

enum llmq_rc llmq_tokens_encoding_parse(const char *name, enum llmq_encoding *out)
{
    for (int e = 0; name != NULL && e < LLMQ_ENCODING_COUNT; e++) {
        if (strcmp(name, defs[e].name) == 0) {
            *out = (enum llmq_encoding)e;
            return LLMQ_OK;
        }
    }
    return LLMQ_EINVAL;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum llmq_encoding llmq_tokens_encoding_for_model(const char *model)
{
    /* Checked in order: the o200k families first, since "gpt-4o" also starts
     * with "gpt-4". */
    static const char *const o200k[] = {"gpt-4o", "gpt-4.1", "gpt-4.5",    "gpt-5",   "o1",
                                        "o3",     "o4",      "chatgpt-4o", "gpt-oss", "codex-"};
    static const char *const cl100k[] = {"gpt-4",           "gpt-3.5",     "gpt-35",
                                         "text-embedding-", "davinci-002", "babbage-002"};
    if (model == NULL)
        return LLMQ_ENCODING_DEFAULT;
    if (starts_with(model, "ft:"))
        model += 3;
    for (size_t i = 0; i < sizeof(o200k) / sizeof(o200k[0]); i++) {
        if (starts_with(model, o200k[i]))
            return LLMQ_ENCODING_O200K_BASE;
    }
    for (size_t i = 0; i < sizeof(cl100k) / sizeof(cl100k[0]); i++) {
        if (starts_with(model, cl100k[i]))
            return LLMQ_ENCODING_CL100K_BASE;
    }
    return LLMQ_ENCODING_DEFAULT;
}

/* Loads defs[e] from the first directory that has the file. */
static void load_encoding(enum llmq_encoding e)
{
    const char *dirs[3] = {getenv("LLMQ_DATA_DIR"), LLMQ_DATA_DIR, LLMQ_SOURCE_DATA_DIR};
    struct loaded *l = &loaded[e];
    char path[4096];
    llmq_error_set(&l->err, LLMQ_ENOTFOUND, "tokenizer: %s not found in $LLMQ_DATA_DIR, %s or %s",
                   defs[e].file, LLMQ_DATA_DIR, LLMQ_SOURCE_DATA_DIR);
    for (int i = 0; i < 3; i++) {
        if (dirs[i] == NULL || dirs[i][0] == '\0')
            continue;
        int n = snprintf(path, sizeof(path), "%s/%s", dirs[i], defs[e].file);
        if (n < 0 || (size_t)n >= sizeof(path))
            continue;
        struct llmq_error err;
        enum llmq_rc rc = llmq_bpe_load(path, defs[e].sha256, &l->vocab, &err);
        if (rc == LLMQ_ENOTFOUND)
            continue;
        l->err = err;
        if (rc == LLMQ_OK)
            llmq_error_clear(&l->err);
        return;
    }
}

static void load_o200k(void)
{
    load_encoding(LLMQ_ENCODING_O200K_BASE);
}

static void load_cl100k(void)
{
    load_encoding(LLMQ_ENCODING_CL100K_BASE);
}

enum llmq_rc llmq_tokens_load(enum llmq_encoding e, struct llmq_error *err)
{
    static void (*const loaders[LLMQ_ENCODING_COUNT])(void) = {load_o200k, load_cl100k};
    if ((unsigned)e >= LLMQ_ENCODING_COUNT)
        return llmq_error_set(err, LLMQ_EINVAL, "tokenizer: unknown encoding %d", (int)e);
    pthread_once(&loaded[e].once, loaders[e]);
    if (loaded[e].err.rc != LLMQ_OK) {
        if (err != NULL)
            *err = loaded[e].err;
        return loaded[e].err.rc;
    }
    return LLMQ_OK;
}

/* Pre-tokenizes and encodes valid UTF-8 s into out. */
static enum llmq_rc encode_valid(enum llmq_encoding e, const unsigned char *s, size_t len,
                                 struct llmq_bpe_out *out)
{
    const struct llmq_bpe_vocab *v = loaded[e].vocab;
    enum llmq_pretok_pattern pat = defs[e].pattern;
    size_t pos = 0;
    while (pos < len) {
        size_t end = llmq_pretok_next(pat, s, len, pos);
        enum llmq_rc rc = llmq_bpe_encode_piece(v, s + pos, end - pos, LLMQ_BPE_SMALL_MAX, out);
        if (rc != LLMQ_OK)
            return rc;
        pos = end;
    }
    return LLMQ_OK;
}

static enum llmq_rc encode_any(enum llmq_encoding e, const char *text, size_t len,
                               struct llmq_bpe_out *out, struct llmq_error *err)
{
    enum llmq_rc rc = llmq_tokens_load(e, err);
    if (rc != LLMQ_OK)
        return rc;
    const unsigned char *s = (const unsigned char *)text;
    if (llmq_utf8_valid_prefix(s, len) == len) {
        rc = encode_valid(e, s, len, out);
    } else {
        size_t fixed_len = 0;
        unsigned char *fixed = llmq_utf8_sanitize(s, len, &fixed_len);
        rc = fixed == NULL ? LLMQ_ENOMEM : encode_valid(e, fixed, fixed_len, out);
        free(fixed);
    }
    if (rc != LLMQ_OK)
        return llmq_error_set(err, rc, "tokenizer: %s",
                              rc == LLMQ_ETOOBIG ? "text too large" : "out of memory");
    return LLMQ_OK;
}

enum llmq_rc llmq_tokens_count(enum llmq_encoding e, const char *text, size_t len,
                               size_t *out_tokens, struct llmq_error *err)
{
    struct llmq_bpe_out out = {0};
    enum llmq_rc rc = encode_any(e, text, len, &out, err);
    if (rc == LLMQ_OK)
        *out_tokens = out.n;
    return rc;
}

enum llmq_rc llmq_tokens_encode(enum llmq_encoding e, const char *text, size_t len,
                                uint32_t **out_ids, size_t *out_n, struct llmq_error *err)
{
    struct llmq_bpe_out out = {.want_ids = 1};
    enum llmq_rc rc = encode_any(e, text, len, &out, err);
    if (rc != LLMQ_OK) {
        free(out.ids);
        return rc;
    }
    *out_ids = out.ids;
    *out_n = out.n;
    return LLMQ_OK;
}

const unsigned char *llmq_tokens_token_bytes(enum llmq_encoding e, uint32_t id, size_t *len)
{
    if ((unsigned)e >= LLMQ_ENCODING_COUNT || llmq_tokens_load(e, NULL) != LLMQ_OK)
        return NULL;
    return llmq_bpe_token_bytes(loaded[e].vocab, id, len);
}

size_t llmq_tokens_memory_bytes(enum llmq_encoding e)
{
    if ((unsigned)e >= LLMQ_ENCODING_COUNT || llmq_tokens_load(e, NULL) != LLMQ_OK)
        return 0;
    const struct llmq_bpe_vocab *v = loaded[e].vocab;
    return sizeof(*v) + v->off[v->n_tokens] + (v->n_tokens + 1) * sizeof(uint32_t) +
           (v->mask + 1) * sizeof(uint64_t);
}
