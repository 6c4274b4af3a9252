/* Fuzzes llmq-gateway's request-head decoders (gateway/decode.h): the route
 * of a method and path, the Authorization header, the list query. Input:
 * NUL-separated fields "method\0path\0authorization\0after\0limit". Every
 * decoded id must be a valid name and NUL-terminated; a key found must lie
 * inside the header. */
#include <stdint.h>
#include <string.h>

#include "decode.h"
#include "fuzz_util.h"
#include "redis/redis.h"

static const char *next_field(char **p, char *end)
{
    char *s = *p;
    if (s >= end)
        return NULL;
    size_t n = strnlen(s, (size_t)(end - s));
    *p = s + n + 1;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_strndup(data, size);
    if (buf == NULL)
        return 0;
    char *p = buf, *end = buf + size;
    const char *method = next_field(&p, end), *path = next_field(&p, end);
    const char *auth = next_field(&p, end), *after = next_field(&p, end);
    const char *limit = next_field(&p, end);
    struct gw_route_match m;
    gw_route_decode(method ? method : "", path ? path : "", &m);
    if (strnlen(m.id, sizeof(m.id)) == sizeof(m.id) || (m.id[0] && !llmq_name_valid(m.id)))
        __builtin_trap();
    if (m.route == GW_ROUTE_CALL && m.call_url == NULL)
        __builtin_trap();
    (void)gw_route_needs_key(m.route);
    const char *key = NULL;
    size_t len = 0;
    if (gw_bearer_decode(auth, &key, &len) &&
        (len == 0 || key < auth || key + len > auth + strlen(auth)))
        __builtin_trap();
    struct gw_list_query q;
    struct gw_error e;
    if (gw_list_query_decode(after, limit, 20, 100, &q, &e) == 0) {
        if (q.limit < 1 || q.limit > 100 || (q.after[0] && !llmq_name_valid(q.after)))
            __builtin_trap();
    } else if (e.status != 400 || strnlen(e.msg, sizeof(e.msg)) == sizeof(e.msg)) {
        __builtin_trap();
    }
    free(buf);
    return 0;
}
