/* custom_id <-> job id (job_id.h): percent-escaping of what a name cannot
 * hold. */
#include "jobs/job_id.h"

#include <string.h>

#include "llmq/llmq.h"
#include "base/parse_int.h"

/* True when s[i] starts "%XX" within len bytes. */
static int escape_at(const char *s, size_t len, size_t i)
{
    return s[i] == '%' && i + 2 < len && llmq_hex_digit_value((unsigned char)s[i + 1]) >= 0 &&
           llmq_hex_digit_value((unsigned char)s[i + 2]) >= 0;
}

/* The bytes llmq_name_valid refuses, and '%' where it would read as "%XX". */
static int needs_escape(const char *s, size_t len, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    return c <= 0x20 || c == 0x7f || c == '/' || c == '|' || c == '{' || c == '}' ||
           (c == '%' && escape_at(s, len, i));
}

enum llmq_rc llmq_job_id_from_custom(const char *s, size_t len, char *out, size_t n,
                                     struct llmq_error *err)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t w = 0;
    if (n > 0)
        out[0] = '\0';
    if (len == 0)
        return llmq_error_set(err, LLMQ_EINVAL, "custom_id must not be empty");
    if (memchr(s, '\0', len) != NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "custom_id \"%.60s\" holds a NUL character", s);
    for (size_t i = 0; i < len; i++) {
        int esc = needs_escape(s, len, i);
        if (w + (esc ? 3 : 1) > LLMQ_JOB_ID_MAX || w + (esc ? 3 : 1) >= n) {
            if (n > 0)
                out[0] = '\0';
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "custom_id \"%.60s%s\" is too long: its job id may have %d "
                                  "bytes (whitespace, control characters, '/', '|', '{' and '}' "
                                  "take 3)",
                                  s, len > 60 ? "..." : "", LLMQ_JOB_ID_MAX);
        }
        if (esc) {
            unsigned char c = (unsigned char)s[i];
            out[w++] = '%';
            out[w++] = hex[c >> 4];
            out[w++] = hex[c & 15];
        } else {
            out[w++] = s[i];
        }
    }
    out[w] = '\0';
    return LLMQ_OK;
}

char *llmq_job_id_to_custom(const char *id, char *out, size_t n)
{
    size_t len = strlen(id), w = 0;
    for (size_t i = 0; i < len && w + 1 < n; i++) {
        if (escape_at(id, len, i)) {
            out[w++] = (char)(llmq_hex_digit_value((unsigned char)id[i + 1]) * 16 +
                              llmq_hex_digit_value((unsigned char)id[i + 2]));
            i += 2;
        } else {
            out[w++] = id[i];
        }
    }
    if (n > 0)
        out[w] = '\0';
    return out;
}
