/* The strict integer parser and the hex digit of parse_int.h. */
#include "base/parse_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

int llmq_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (s == NULL || isspace((unsigned char)s[0]))
        return -1; /* strtoll would skip it */
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int llmq_parse_digits(const char *s, size_t len, int64_t min, int64_t max, int64_t *out)
{
    if (len == 0 || len > 18) /* 18 digits never overflow an int64_t */
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int llmq_hex_digit_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}
