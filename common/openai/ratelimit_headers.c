/* Parsing of OpenAI / Azure rate-limit headers (see ratelimit_headers.h).
 *
 * Invariants: every input byte is borrowed and read only within [0, len);
 * nothing is allocated; a field's bit in `present` is set only together with
 * a valid value, so a half-parsed header never leaves a stale number behind.
 * Numbers are bounded (counts <= 10^15, durations <= 10^12 ms) so no
 * arithmetic here can overflow. */
#include "openai/ratelimit_headers.h"

#include <math.h>
#include <string.h>

#define MAX_COUNT 1000000000000000LL /* 10^15 */
#define MAX_MS 1000000000000LL       /* 10^12 ms, about 31 years */
#define NS_PER_MS 1000000LL

enum value_kind { KIND_COUNT, KIND_DURATION, KIND_SECONDS, KIND_MS, KIND_BOOL, KIND_ID };

struct header_rule {
    const char *name; /* lower case */
    int field;
    enum value_kind kind;
};

/* The six x-ratelimit-* headers may carry "_usage_based"; their UB field is
 * field + UB_OFFSET. */
#define UB_OFFSET (LLMQ_RLH_LIMIT_REQUESTS_UB - LLMQ_RLH_LIMIT_REQUESTS)
#define UB_SUFFIX "_usage_based"

static const struct header_rule rules[] = {
    {"x-ratelimit-limit-requests", LLMQ_RLH_LIMIT_REQUESTS, KIND_COUNT},
    {"x-ratelimit-limit-tokens", LLMQ_RLH_LIMIT_TOKENS, KIND_COUNT},
    {"x-ratelimit-remaining-requests", LLMQ_RLH_REMAINING_REQUESTS, KIND_COUNT},
    {"x-ratelimit-remaining-tokens", LLMQ_RLH_REMAINING_TOKENS, KIND_COUNT},
    {"x-ratelimit-reset-requests", LLMQ_RLH_RESET_REQUESTS_MS, KIND_DURATION},
    {"x-ratelimit-reset-tokens", LLMQ_RLH_RESET_TOKENS_MS, KIND_DURATION},
    {"retry-after", LLMQ_RLH_RETRY_AFTER_MS, KIND_SECONDS},
    {"retry-after-ms", LLMQ_RLH_RETRY_AFTER_MS_EXACT, KIND_MS},
    {"x-should-retry", LLMQ_RLH_SHOULD_RETRY, KIND_BOOL},
    {"x-request-id", LLMQ_RLH_REQUEST_ID, KIND_ID},
    {"apim-request-id", LLMQ_RLH_REQUEST_ID, KIND_ID},
};
#define N_RULES (sizeof(rules) / sizeof(rules[0]))
#define N_RATELIMIT_RULES 6 /* the first six rules take the _usage_based suffix */

static const char *const field_names[LLMQ_RLH_FIELD_COUNT] = {
    [LLMQ_RLH_LIMIT_REQUESTS] = "limit_requests",
    [LLMQ_RLH_LIMIT_TOKENS] = "limit_tokens",
    [LLMQ_RLH_REMAINING_REQUESTS] = "remaining_requests",
    [LLMQ_RLH_REMAINING_TOKENS] = "remaining_tokens",
    [LLMQ_RLH_RESET_REQUESTS_MS] = "reset_requests_ms",
    [LLMQ_RLH_RESET_TOKENS_MS] = "reset_tokens_ms",
    [LLMQ_RLH_LIMIT_REQUESTS_UB] = "limit_requests_ub",
    [LLMQ_RLH_LIMIT_TOKENS_UB] = "limit_tokens_ub",
    [LLMQ_RLH_REMAINING_REQUESTS_UB] = "remaining_requests_ub",
    [LLMQ_RLH_REMAINING_TOKENS_UB] = "remaining_tokens_ub",
    [LLMQ_RLH_RESET_REQUESTS_UB_MS] = "reset_requests_ub_ms",
    [LLMQ_RLH_RESET_TOKENS_UB_MS] = "reset_tokens_ub_ms",
    [LLMQ_RLH_RETRY_AFTER_MS] = "retry_after_ms",
    [LLMQ_RLH_RETRY_AFTER_MS_EXACT] = "retry_after_ms_exact",
    [LLMQ_RLH_SHOULD_RETRY] = "should_retry",
    [LLMQ_RLH_REQUEST_ID] = "request_id",
};

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Case-insensitive equality of s[0..len) and the NUL-terminated lower-case lit. */
static int name_eq(const char *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    if (len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower(s[i]) != lit[i])
            return 0;
    return 1;
}

/* Parses "<digits>[.<digits>]" at s[*pos..len). Stores the integer part in
 * *ip (capped: returns -1 above MAX_COUNT) and the fraction as a value in
 * [0, 1) in *frac. Advances *pos. Returns 0, or -1 when no digit was found. */
static int parse_decimal(const char *s, size_t len, size_t *pos, int64_t *ip, double *frac)
{
    size_t i = *pos;
    int64_t v = 0;
    int digits = 0;
    for (; i < len && is_digit(s[i]); i++, digits++) {
        v = v * 10 + (s[i] - '0');
        if (v > MAX_COUNT)
            return -1;
    }
    double f = 0.0, scale = 0.1;
    if (i < len && s[i] == '.') {
        i++;
        for (; i < len && is_digit(s[i]); i++, digits++) {
            f += (s[i] - '0') * scale;
            scale /= 10.0;
        }
    }
    if (digits == 0)
        return -1;
    *pos = i;
    *ip = v;
    *frac = f;
    return 0;
}

/* A non-negative integer filling all of s[0..len). */
static int parse_count(const char *s, size_t len, int64_t *out)
{
    if (len == 0)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
        if (v > MAX_COUNT)
            return -1;
    }
    *out = v;
    return 0;
}

/* A non-negative decimal filling all of s[0..len), times unit_ns, rounded up
 * to whole milliseconds. */
static int parse_scaled_ms(const char *s, size_t len, int64_t unit_ns, int64_t *out_ms)
{
    size_t pos = 0;
    int64_t ip;
    double frac;
    if (parse_decimal(s, len, &pos, &ip, &frac) != 0 || pos != len)
        return -1;
    if (ip > (MAX_MS * NS_PER_MS) / unit_ns)
        return -1;
    int64_t ns = ip * unit_ns + (int64_t)llround(frac * (double)unit_ns);
    int64_t ms = (ns + NS_PER_MS - 1) / NS_PER_MS;
    if (ms > MAX_MS)
        return -1;
    *out_ms = ms;
    return 0;
}

/* Reads a duration unit at s[*pos..len); returns its length in ns, or 0. */
static int64_t parse_unit(const char *s, size_t len, size_t *pos)
{
    size_t i = *pos, left = len - i;
    const unsigned char *u = (const unsigned char *)s + i;
    int64_t ns = 0;
    size_t n = 0;
    if (left >= 2 && u[0] == 'm' && u[1] == 's')
        ns = NS_PER_MS, n = 2;
    else if (left >= 2 && u[0] == 'u' && u[1] == 's')
        ns = 1000, n = 2;
    else if (left >= 3 && ((u[0] == 0xC2 && u[1] == 0xB5) || (u[0] == 0xCE && u[1] == 0xBC)) &&
             u[2] == 's')
        ns = 1000, n = 3; /* U+00B5 micro sign, U+03BC Greek mu */
    else if (left >= 2 && u[0] == 'n' && u[1] == 's')
        ns = 1, n = 2;
    else if (left >= 1 && u[0] == 'h')
        ns = 3600LL * 1000 * NS_PER_MS, n = 1;
    else if (left >= 1 && u[0] == 'm')
        ns = 60LL * 1000 * NS_PER_MS, n = 1;
    else if (left >= 1 && u[0] == 's')
        ns = 1000 * NS_PER_MS, n = 1;
    *pos = i + n;
    return ns;
}

int llmq_ratelimit_parse_duration_ms(const char *s, size_t len, int64_t *out_ms)
{
    if (s == NULL || len == 0)
        return -1;
    size_t pos = 0;
    int64_t total_ns = 0;
    int parts = 0;
    while (pos < len) {
        int64_t ip;
        double frac;
        if (parse_decimal(s, len, &pos, &ip, &frac) != 0)
            return -1;
        int64_t unit_ns;
        if (pos == len && parts == 0)
            unit_ns = 1000 * NS_PER_MS; /* a bare number: seconds */
        else if ((unit_ns = parse_unit(s, len, &pos)) == 0)
            return -1;
        if (ip > (MAX_MS * NS_PER_MS) / unit_ns)
            return -1;
        total_ns += ip * unit_ns + (int64_t)llround(frac * (double)unit_ns);
        if (total_ns > MAX_MS * NS_PER_MS)
            return -1;
        parts++;
    }
    *out_ms = (total_ns + NS_PER_MS - 1) / NS_PER_MS;
    return 0;
}

static int parse_fixed_digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1..12). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int llmq_ratelimit_parse_http_date(const char *s, size_t len, int64_t *out_unix_ms)
{
    static const char *const days[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    /* "Sun, 06 Nov 1994 08:49:37 GMT" */
    if (s == NULL || len != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' ||
        s[16] != ' ' || s[19] != ':' || s[22] != ':' || memcmp(s + 25, " GMT", 4) != 0)
        return -1;
    int ok = 0, mon = -1;
    for (int i = 0; i < 7; i++)
        ok |= memcmp(s, days[i], 3) == 0;
    for (int i = 0; i < 12; i++)
        if (memcmp(s + 8, months[i], 3) == 0)
            mon = i + 1;
    int day, year, hh, mm, ss;
    if (!ok || mon < 0 || parse_fixed_digits(s + 5, 2, &day) ||
        parse_fixed_digits(s + 12, 4, &year) || parse_fixed_digits(s + 17, 2, &hh) ||
        parse_fixed_digits(s + 20, 2, &mm) || parse_fixed_digits(s + 23, 2, &ss))
        return -1;
    if (day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60)
        return -1;
    int64_t secs = days_from_civil(year, mon, day) * 86400 + hh * 3600 + mm * 60 + ss;
    *out_unix_ms = secs * 1000;
    return 0;
}

void llmq_ratelimit_headers_init(struct llmq_ratelimit_headers *h)
{
    memset(h, 0, sizeof(*h));
}

static int parse_bool(const char *v, size_t n, int64_t *out)
{
    if (name_eq(v, n, "true"))
        *out = 1;
    else if (name_eq(v, n, "false"))
        *out = 0;
    else
        return -1;
    return 0;
}

static void set_request_id(struct llmq_ratelimit_headers *h, const char *v, size_t n, int primary)
{
    if (n == 0 || (!primary && (h->present & LLMQ_RLH_BIT(LLMQ_RLH_REQUEST_ID))))
        return; /* apim-request-id never overrides x-request-id */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
            return;
    if (n >= sizeof(h->request_id))
        n = sizeof(h->request_id) - 1;
    memcpy(h->request_id, v, n);
    h->request_id[n] = '\0';
    h->present |= LLMQ_RLH_BIT(LLMQ_RLH_REQUEST_ID);
}

/* Parses value v[0..n) of the given kind; returns 0 and *out, or -1. */
static int parse_value(enum value_kind kind, const char *v, size_t n, int64_t now_unix_ms,
                       int64_t *out)
{
    switch (kind) {
    case KIND_COUNT:
        return parse_count(v, n, out);
    case KIND_DURATION:
        return llmq_ratelimit_parse_duration_ms(v, n, out);
    case KIND_MS:
        return parse_scaled_ms(v, n, 1 * NS_PER_MS, out);
    case KIND_BOOL:
        return parse_bool(v, n, out);
    case KIND_SECONDS: {
        if (parse_scaled_ms(v, n, 1000 * NS_PER_MS, out) == 0)
            return 0;
        int64_t at_ms;
        if (llmq_ratelimit_parse_http_date(v, n, &at_ms) != 0)
            return -1;
        *out = at_ms > now_unix_ms ? at_ms - now_unix_ms : 0;
        return 0;
    }
    case KIND_ID:
        break;
    }
    return -1;
}

static void apply(struct llmq_ratelimit_headers *h, const char *name, size_t nlen, const char *v,
                  size_t vlen, int64_t now_unix_ms)
{
    int ub = 0;
    size_t sl = sizeof(UB_SUFFIX) - 1;
    if (nlen > sl && name_eq(name + nlen - sl, sl, UB_SUFFIX)) {
        ub = 1;
        nlen -= sl;
    }
    for (size_t i = 0; i < N_RULES; i++) {
        if (!name_eq(name, nlen, rules[i].name))
            continue;
        if (ub && i >= N_RATELIMIT_RULES)
            return;
        if (rules[i].kind == KIND_ID) {
            set_request_id(h, v, vlen, rules[i].name[0] == 'x');
            return;
        }
        int field = rules[i].field + (ub ? UB_OFFSET : 0);
        int64_t val;
        if (parse_value(rules[i].kind, v, vlen, now_unix_ms, &val) == 0) {
            h->value[field] = val;
            h->present |= LLMQ_RLH_BIT(field);
        }
        return;
    }
}

void llmq_ratelimit_headers_feed_line(struct llmq_ratelimit_headers *h, const char *line,
                                      size_t len, int64_t now_unix_ms)
{
    if (h == NULL || line == NULL)
        return;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        llmq_ratelimit_headers_init(h);
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (colon == NULL || colon == line)
        return;
    size_t nlen = (size_t)(colon - line);
    if (is_blank(line[nlen - 1]))
        return; /* "name :" is not a valid field name (RFC 9112 5.1) */
    const char *v = colon + 1;
    size_t vlen = len - nlen - 1;
    while (vlen > 0 && is_blank(*v))
        v++, vlen--;
    while (vlen > 0 && is_blank(v[vlen - 1]))
        vlen--;
    apply(h, line, nlen, v, vlen, now_unix_ms);
}

void llmq_ratelimit_headers_feed_block(struct llmq_ratelimit_headers *h, const char *text,
                                       size_t len, int64_t now_unix_ms)
{
    if (h == NULL || text == NULL)
        return;
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t l = end - pos;
        if (l > 0 && text[pos + l - 1] == '\r')
            l--;
        if (l == 0)
            return;
        llmq_ratelimit_headers_feed_line(h, text + pos, l, now_unix_ms);
        pos = end + 1;
    }
}

int llmq_ratelimit_headers_get(const struct llmq_ratelimit_headers *h, enum llmq_rlh_field field,
                               int64_t *out)
{
    if (h == NULL || (int)field < 0 || field >= LLMQ_RLH_FIELD_COUNT ||
        !(h->present & LLMQ_RLH_BIT(field)))
        return 0;
    if (out != NULL)
        *out = field == LLMQ_RLH_REQUEST_ID ? (int64_t)strlen(h->request_id) : h->value[field];
    return 1;
}

int64_t llmq_ratelimit_headers_retry_hint_ms(const struct llmq_ratelimit_headers *h)
{
    int64_t v;
    if (llmq_ratelimit_headers_get(h, LLMQ_RLH_RETRY_AFTER_MS_EXACT, &v))
        return v;
    if (llmq_ratelimit_headers_get(h, LLMQ_RLH_RETRY_AFTER_MS, &v))
        return v;
    return -1;
}

const char *llmq_ratelimit_headers_field_name(enum llmq_rlh_field field)
{
    if ((int)field < 0 || field >= LLMQ_RLH_FIELD_COUNT)
        return NULL;
    return field_names[field];
}
