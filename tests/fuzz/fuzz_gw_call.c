/* Fuzzes the decoder of a synchronous call's body (gateway/decode.h
 * gw_call_decode) and the error body built from its rejection: a valid body
 * yields a valid model name (and user, when one), a rejection an error body
 * that is JSON with the four members. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "redis/redis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_call c;
    struct gw_error e;
    if (gw_call_decode("/v1/chat/completions", (const char *)data, size, &c, &e) == 0) {
        if (!llmq_name_valid(c.model) || (c.user[0] && !llmq_name_valid(c.user)) ||
            !json_is_object(c.body))
            __builtin_trap();
        gw_call_clear(&c);
        return 0;
    }
    size_t len = 0;
    char *body = gw_error_body(&e, &len);
    if (body == NULL)
        return 0; /* out of memory only */
    json_t *v = json_loadb(body, len, 0, NULL);
    json_t *err = json_object_get(v, "error");
    if (!json_is_object(err) || json_object_size(err) != 4 ||
        !json_is_string(json_object_get(err, "message")) || e.status < 400 || e.status > 599)
        __builtin_trap();
    json_decref(v);
    free(body);
    return 0;
}
