/* Gateway keys: random text from OpenSSL's CSPRNG, known by its SHA-256. */
#include "auth/gw_key.h"

#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

static void hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

enum llmq_rc llmq_gw_key_generate(char *buf, size_t n, struct llmq_error *err)
{
    unsigned char raw[24];
    if (n <= LLMQ_GW_KEY_LEN)
        return llmq_error_set(err, LLMQ_EINVAL, "gateway key: buffer too small");
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return llmq_error_set(err, LLMQ_EIO, "gateway key: no random bytes");
    memcpy(buf, LLMQ_GW_KEY_PREFIX, strlen(LLMQ_GW_KEY_PREFIX));
    hex(raw, sizeof(raw), buf + strlen(LLMQ_GW_KEY_PREFIX));
    memset(raw, 0, sizeof(raw));
    return LLMQ_OK;
}

void llmq_gw_key_hash(const char *key, size_t len, char out[LLMQ_GW_KEY_HASH_LEN + 1])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)key, len, md);
    hex(md, sizeof(md), out);
}
