/* Fuzzes the decoders of result lines read back from Redis (gateway/
 * decode.h): gw_result_decode (a sync call's answer) and
 * gw_result_line_for_file (a batch output or error file line). A status is
 * an HTTP status; a file line is JSON. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_result r;
    if (gw_result_decode((const char *)data, size, &r) == 0 && r.status != 0 &&
        (r.status < 100 || r.status > 599))
        __builtin_trap();
    gw_result_clear(&r);
    int is_error = -1;
    char *line = gw_result_line_for_file((const char *)data, size, &is_error);
    if (line != NULL) {
        json_t *v = json_loads(line, 0, NULL);
        if (!json_is_object(v) || (is_error != 0 && is_error != 1))
            __builtin_trap();
        json_decref(v);
        free(line);
    }
    return 0;
}
