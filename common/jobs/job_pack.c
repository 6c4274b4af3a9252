/* The stored-value codec; see job_pack.h. zlib's raw DEFLATE (window bits
 * -15: no zlib header or checksum, the length prefix checks the end) with a
 * preset dictionary, at level 6 (zlib's default: within a few per cent of
 * level 9's size on request JSON, at a third of its time). */
#include "jobs/job_pack.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* The preset dictionary of tag 1: JSON that OpenAI requests and Batch output
 * lines share, most common last (DEFLATE codes nearer matches shorter). Part
 * of the stored format: never edit it (a new dictionary is a new tag). */
static const char DICT_V1[] =
    "{\"type\":\"function\",\"function\":{\"name\":\"\",\"description\":\"\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"type\":\"string\",\"enum\":[\"required\":["
    "\"additionalProperties\":false,\"strict\":true}}],\"tool_choice\":\"auto\","
    "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"schema\":"
    "{\"type\":\"json_object\"},\"seed\":\"stop\":[\"presence_penalty\":\"frequency_penalty\":"
    "\"logprobs\":false,\"n\":1,\"stream\":false,\"stream_options\":{\"include_usage\":true},"
    "\"encoding_format\":\"float\",\"dimensions\":\"model\":\"text-embedding-3-small\","
    "\"input\":[\"\"model\":\"text-embedding-3-large\",\"input\":\""
    "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/"
    "png;base64,\",\"detail\":\"auto\"}}"
    "{\"type\":\"text\",\"text\":\""
    "\"usage\":{\"prompt_tokens\":\"completion_tokens\":\"total_tokens\":"
    "\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},"
    "\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,"
    "\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}},"
    "\"service_tier\":\"default\",\"system_fingerprint\":\"fp_\"}},\"error\":null}\n"
    "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\""
    "\",\"refusal\":null,\"annotations\":[]},\"logprobs\":null,\"finish_reason\":\"stop\"}],"
    "{\"id\":\"batch_req_\",\"custom_id\":\"\",\"response\":{\"status_code\":200,"
    "\"request_id\":\"\",\"body\":{\"id\":\"chatcmpl-\",\"object\":\"chat.completion\","
    "\"created\":\"model\":\"gpt-4o-mini-2024-07-18\","
    "\"model\":\"gpt-4.1-mini\",\"model\":\"gpt-4.1\",\"model\":\"o4-mini\",\"model\":\"gpt-4o\","
    "\"temperature\":0,\"top_p\":1,\"max_completion_tokens\":\"reasoning_effort\":\"low\","
    "{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
    "{\"model\":\"gpt-4o-mini\",\"max_tokens\":\"messages\":[{\"role\":\"user\",\"content\":\""
    " the of and to a in is that for it you with as on this be are or not";

/* LEB128 length prefix: 7 bits a byte, low first, high bit "more". */
#define VARINT_MAX 5

static size_t varint_put(unsigned char *p, size_t v)
{
    size_t n = 0;
    do {
        unsigned char b = (unsigned char)(v & 0x7f);
        v >>= 7;
        p[n++] = v ? (unsigned char)(b | 0x80) : b;
    } while (v);
    return n;
}

/* Reads a varint from p[0..len): its value into *v; returns the bytes used,
 * 0 when it is not one (cut short, longer than VARINT_MAX, over UINT_MAX). */
static size_t varint_get(const unsigned char *p, size_t len, size_t *v)
{
    unsigned long long x = 0;
    for (size_t i = 0; i < len && i < VARINT_MAX; i++) {
        x |= (unsigned long long)(p[i] & 0x7f) << (7 * i);
        if ((p[i] & 0x80) == 0) {
            if (x > UINT_MAX)
                return 0;
            *v = (size_t)x;
            return i + 1;
        }
    }
    return 0;
}

struct llmq_job_packer {
    z_stream z;
};

struct llmq_job_packer *llmq_job_packer_new(void)
{
    struct llmq_job_packer *pk = calloc(1, sizeof(*pk));
    if (pk == NULL)
        return NULL;
    if (deflateInit2(&pk->z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(pk);
        return NULL;
    }
    return pk;
}

void llmq_job_packer_free(struct llmq_job_packer *pk)
{
    if (pk == NULL)
        return;
    deflateEnd(&pk->z);
    free(pk);
}

enum llmq_rc llmq_job_packer_pack(struct llmq_job_packer *pk, const char *text, size_t len,
                                  char **out, size_t *out_len, struct llmq_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (len > UINT_MAX)
        return llmq_error_set(err, LLMQ_EINVAL, "job pack: text of %zu bytes is over 4 GiB", len);
    if (len < LLMQ_JOB_PACK_MIN_BYTES)
        return LLMQ_OK;
    z_stream *z = &pk->z;
    if (deflateReset(z) != Z_OK ||
        deflateSetDictionary(z, (const Bytef *)DICT_V1, (uInt)(sizeof(DICT_V1) - 1)) != Z_OK)
        return llmq_error_set(err, LLMQ_ENOMEM, "job pack: cannot reset zlib");
    /* Worth it only when shorter: the output may use len - 1 bytes at most. */
    size_t cap = len - 1;
    unsigned char *buf = malloc(cap);
    if (buf == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "job pack: out of memory");
    buf[0] = LLMQ_JOB_PACK_TAG;
    size_t head = 1 + varint_put(buf + 1, len);
    z->next_in = (Bytef *)(uintptr_t)text;
    z->avail_in = (uInt)len;
    z->next_out = buf + head;
    z->avail_out = (uInt)(cap - head);
    int zr = deflate(z, Z_FINISH);
    size_t used = cap - z->avail_out;
    if (zr != Z_STREAM_END) { /* it did not fit in len - 1 bytes: keep the text */
        free(buf);
        return zr == Z_OK || zr == Z_BUF_ERROR
                   ? LLMQ_OK
                   : llmq_error_set(err, LLMQ_ENOMEM, "job pack: zlib failed (%d)", zr);
    }
    *out = (char *)buf;
    *out_len = used;
    return LLMQ_OK;
}

enum llmq_rc llmq_job_pack(const char *text, size_t len, char **out, size_t *out_len,
                           struct llmq_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (len < LLMQ_JOB_PACK_MIN_BYTES)
        return LLMQ_OK;
    struct llmq_job_packer *pk = llmq_job_packer_new();
    if (pk == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "job pack: cannot start zlib");
    enum llmq_rc rc = llmq_job_packer_pack(pk, text, len, out, out_len, err);
    llmq_job_packer_free(pk);
    return rc;
}

int llmq_job_packed(const char *stored, size_t len)
{
    return len > 0 && (unsigned char)stored[0] == LLMQ_JOB_PACK_TAG;
}

static enum llmq_rc copy_text(const char *stored, size_t len, size_t max_bytes, char **out,
                              size_t *out_len, struct llmq_error *err)
{
    if (len > max_bytes)
        return llmq_error_set(err, LLMQ_EINVAL, "stored value of %zu bytes is over %zu", len,
                              max_bytes);
    char *s = malloc(len + 1);
    if (s == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "stored value: out of memory");
    if (len > 0)
        memcpy(s, stored, len);
    s[len] = '\0';
    *out = s;
    *out_len = len;
    return LLMQ_OK;
}

enum llmq_rc llmq_job_unpack(const char *stored, size_t len, size_t max_bytes, char **out,
                             size_t *out_len, struct llmq_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (!llmq_job_packed(stored, len))
        return copy_text(stored, len, max_bytes, out, out_len, err);
    const unsigned char *p = (const unsigned char *)stored;
    size_t text_len = 0;
    size_t head = varint_get(p + 1, len - 1, &text_len);
    if (head == 0)
        return llmq_error_set(err, LLMQ_EINVAL, "packed value: its length is no varint");
    head += 1;
    if (text_len > max_bytes)
        return llmq_error_set(err, LLMQ_EINVAL, "packed value: text of %zu bytes is over %zu",
                              text_len, max_bytes);
    if (len - head > UINT_MAX)
        return llmq_error_set(err, LLMQ_EINVAL, "packed value: over 4 GiB");
    char *s = malloc(text_len + 1);
    if (s == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "packed value: out of memory");
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, -15) != Z_OK ||
        inflateSetDictionary(&z, (const Bytef *)DICT_V1, (uInt)(sizeof(DICT_V1) - 1)) != Z_OK) {
        inflateEnd(&z);
        free(s);
        return llmq_error_set(err, LLMQ_ENOMEM, "packed value: cannot start zlib");
    }
    z.next_in = (Bytef *)(uintptr_t)(p + head);
    z.avail_in = (uInt)(len - head);
    z.next_out = (Bytef *)s;
    z.avail_out = (uInt)text_len;
    int zr = inflate(&z, Z_FINISH);
    /* Whole: the stream ended, filled exactly text_len bytes, used every input byte. */
    int whole = zr == Z_STREAM_END && z.avail_out == 0 && z.avail_in == 0;
    int longer = (zr == Z_BUF_ERROR || zr == Z_OK) && z.avail_out == 0;
    inflateEnd(&z);
    if (!whole) {
        free(s);
        if (zr == Z_MEM_ERROR)
            return llmq_error_set(err, LLMQ_ENOMEM, "packed value: out of memory");
        return llmq_error_set(err, LLMQ_EINVAL, "packed value: %s",
                              zr == Z_STREAM_END ? "bytes after its end, or shorter than its length"
                              : longer           ? "longer than its length"
                                                 : "damaged or cut short");
    }
    s[text_len] = '\0';
    *out = s;
    *out_len = text_len;
    return LLMQ_OK;
}
