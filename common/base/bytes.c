/* The growable buffer's append; see bytes.h. */
#include "base/bytes.h"

#include <stdlib.h>
#include <string.h>

int llmq_bytes_append(char **p, size_t *len, size_t *cap, const char *d, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < *len + n + 1)
            c *= 2;
        char *np = realloc(*p, c);
        if (np == NULL)
            return -1;
        *p = np;
        *cap = c;
    }
    if (n > 0)
        memcpy(*p + *len, d, n);
    *len += n;
    (*p)[*len] = '\0';
    return 0;
}
