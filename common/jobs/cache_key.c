/* The cache key of a request (cache_key.h): a deep copy of the body with
 * the fields that do not change the answer removed and its numbers
 * normalised, dumped with sorted keys, then hashed with the url. The copy
 * keeps the caller's body untouched. */
#include "jobs/cache_key.h"

#include <math.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Top-level members that never change the answer (cache_key.h). */
static const char *const IGNORED[] = {"stream", "stream_options", "user", "metadata", "llmq"};

/* Integral doubles up to this magnitude are exact and written as integers. */
#define EXACT_INT_MAX 9007199254740992.0 /* 2^53 */

/* Replaces, in the tree v (owned by the caller, changed in place), every
 * integral real within 2^53 by an integer, so 1.0 and 1 are one key.
 * Returns 0, or -1 when memory runs out. The recursion is as deep as the
 * tree, which jansson's parser bounds (2048 levels). */
static int normalise(json_t *v)
{
    if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m)
        {
            if (json_is_real(m)) {
                double d = json_real_value(m);
                if (d == floor(d) && fabs(d) <= EXACT_INT_MAX &&
                    json_object_set_new(v, k, json_integer((json_int_t)d)) != 0)
                    return -1;
            } else if (normalise(m) != 0) {
                return -1;
            }
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *m = json_array_get(v, i);
            if (json_is_real(m)) {
                double d = json_real_value(m);
                if (d == floor(d) && fabs(d) <= EXACT_INT_MAX &&
                    json_array_set_new(v, i, json_integer((json_int_t)d)) != 0)
                    return -1;
            } else if (normalise(m) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

char *llmq_cache_key_canonical(const json_t *body, struct llmq_error *err)
{
    if (!json_is_object(body)) {
        llmq_error_set(err, LLMQ_EINVAL, "cache key: the body is no JSON object");
        return NULL;
    }
    json_t *copy = json_deep_copy(body);
    if (copy == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "cache key: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < sizeof(IGNORED) / sizeof(IGNORED[0]); i++)
        json_object_del(copy, IGNORED[i]);
    char *text = NULL;
    if (normalise(copy) == 0)
        text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(copy);
    if (text == NULL)
        llmq_error_set(err, LLMQ_ENOMEM, "cache key: out of memory");
    return text;
}

enum llmq_rc llmq_cache_key(const char *url, const json_t *body, char *out, struct llmq_error *err)
{
    out[0] = '\0';
    if (url == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "cache key: no url");
    char *text = llmq_cache_key_canonical(body, err);
    if (text == NULL)
        return err != NULL ? err->rc : LLMQ_ENOMEM;
    size_t ulen = strlen(url), tlen = strlen(text);
    char *all = malloc(ulen + 1 + tlen);
    if (all == NULL) {
        free(text);
        return llmq_error_set(err, LLMQ_ENOMEM, "cache key: out of memory");
    }
    memcpy(all, url, ulen);
    all[ulen] = '\n';
    memcpy(all + ulen + 1, text, tlen);
    free(text);
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)all, ulen + 1 + tlen, md);
    free(all);
    for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return LLMQ_OK;
}
