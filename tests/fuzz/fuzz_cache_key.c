/* Fuzzes the response cache's key (common/jobs/cache_key.h) and cached line
 * reader (common/jobs/cache_line.h). The bytes as a request body: when they
 * parse to an object, its canonical text must parse again to a text that is
 * canonical already (one canonical form), and its key must be 64 hex
 * digits. The bytes as a stored result line (cached or not): read or
 * refused, and what is read is a JSON object that says "cached": true when
 * the line was a cached one. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/cache_key.h"
#include "jobs/cache_line.h"

static void check_key(const uint8_t *data, size_t size)
{
    json_t *b = json_loadb((const char *)data, size, 0, NULL);
    if (!json_is_object(b)) {
        json_decref(b);
        return;
    }
    char *t = llmq_cache_key_canonical(b, NULL);
    char key[LLMQ_CACHE_KEY_HEX + 1];
    if (t == NULL || llmq_cache_key("/v1/chat/completions", b, key, NULL) != 0 ||
        strlen(key) != LLMQ_CACHE_KEY_HEX)
        __builtin_trap();
    json_t *again = json_loads(t, 0, NULL);
    char *t2 = again ? llmq_cache_key_canonical(again, NULL) : NULL;
    if (t2 == NULL || strcmp(t, t2) != 0)
        __builtin_trap();
    free(t);
    free(t2);
    json_decref(again);
    json_decref(b);
}

static void check_line(const uint8_t *data, size_t size)
{
    char *out = NULL;
    size_t len = 0;
    if (llmq_cache_line_read((const char *)data, size, 1 << 20, &out, &len, NULL) != 0) {
        if (out != NULL)
            __builtin_trap();
        return;
    }
    if (llmq_cache_line_is((const char *)data, size)) {
        json_t *o = json_loadb(out, len, 0, NULL);
        if (!json_is_true(json_object_get(o, "cached")))
            __builtin_trap();
        json_decref(o);
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_key(data, size);
    check_line(data, size);
    return 0;
}
