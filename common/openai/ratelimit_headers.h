/* OpenAI / Azure OpenAI rate-limit response headers, parsed into plain data.
 *
 * Pure code: no I/O, no clock of its own. A caller feeds header lines one at a
 * time (as libcurl's CURLOPT_HEADERFUNCTION delivers them) or a whole header
 * block; each recognised header that carries a valid value sets its field and
 * its bit in `present`. A missing header, or one with a bad value (not a
 * number, negative, "-1", overflow, garbage after the number), leaves the bit
 * unset; nothing here ever fails hard on hostile input.
 *
 * Recognised (names case-insensitive, values trimmed of blanks):
 *   x-ratelimit-limit-requests, x-ratelimit-limit-tokens,
 *   x-ratelimit-remaining-requests, x-ratelimit-remaining-tokens  integers >= 0
 *   x-ratelimit-reset-requests, x-ratelimit-reset-tokens   durations ("1s", "6m0s",
 *                                                          "20ms", "1h2m3.5s", "0.5s")
 *   each of the six also with the suffix "_usage_based" (kept apart)
 *   retry-after      seconds (fractional allowed) or an HTTP-date (IMF-fixdate,
 *                    "Sun, 06 Nov 1994 08:49:37 GMT"), converted to a delay
 *                    with the caller's wall clock now_unix_ms
 *   retry-after-ms   milliseconds (fractional allowed; Azure, OpenAI)
 *   x-should-retry   "true" | "false"
 *   x-request-id     kept (truncated to LLMQ_RLH_REQUEST_ID_MAX - 1 bytes,
 *                    printable ASCII only, else ignored)
 *   apim-request-id  Azure's request id, used when x-request-id is absent
 * A status line ("HTTP/...") resets the struct: after a 100-continue or any
 * interim response only the final response's headers count. */
#ifndef LLMQ_RATELIMIT_HEADERS_H
#define LLMQ_RATELIMIT_HEADERS_H

#include <stddef.h>
#include <stdint.h>

#define LLMQ_RLH_REQUEST_ID_MAX 128

/* Bits of struct llmq_ratelimit_headers.present, one per field. */
enum llmq_rlh_field {
    LLMQ_RLH_LIMIT_REQUESTS = 0,
    LLMQ_RLH_LIMIT_TOKENS,
    LLMQ_RLH_REMAINING_REQUESTS,
    LLMQ_RLH_REMAINING_TOKENS,
    LLMQ_RLH_RESET_REQUESTS_MS,
    LLMQ_RLH_RESET_TOKENS_MS,
    LLMQ_RLH_LIMIT_REQUESTS_UB, /* the *_usage_based variants */
    LLMQ_RLH_LIMIT_TOKENS_UB,
    LLMQ_RLH_REMAINING_REQUESTS_UB,
    LLMQ_RLH_REMAINING_TOKENS_UB,
    LLMQ_RLH_RESET_REQUESTS_UB_MS,
    LLMQ_RLH_RESET_TOKENS_UB_MS,
    LLMQ_RLH_RETRY_AFTER_MS,                        /* from retry-after (seconds or HTTP-date) */
    LLMQ_RLH_RETRY_AFTER_MS_EXACT,                  /* from retry-after-ms */
    LLMQ_RLH_SHOULD_RETRY,                          /* value 1 (true) or 0 (false) */
    LLMQ_RLH_INT_FIELD_COUNT,                       /* the fields above live in value[] */
    LLMQ_RLH_REQUEST_ID = LLMQ_RLH_INT_FIELD_COUNT, /* request_id[] */
    LLMQ_RLH_FIELD_COUNT
};

#define LLMQ_RLH_BIT(field) (1u << (field))

struct llmq_ratelimit_headers {
    uint32_t present;                         /* LLMQ_RLH_BIT(field) per set field */
    int64_t value[LLMQ_RLH_INT_FIELD_COUNT];  /* counts, or milliseconds for *_MS */
    char request_id[LLMQ_RLH_REQUEST_ID_MAX]; /* "" unless LLMQ_RLH_REQUEST_ID is set */
};

/* Clears h: nothing present. */
void llmq_ratelimit_headers_init(struct llmq_ratelimit_headers *h);

/* Feeds one raw header line (borrowed; may end in "\r\n"; need not be
 * NUL-terminated). Lines that are not "name: value", unknown names and bad
 * values are ignored; a line starting with "HTTP/" resets h. now_unix_ms is
 * the wall clock (ms since the epoch), used only for an HTTP-date
 * retry-after: a date in the past gives a delay of 0. */
void llmq_ratelimit_headers_feed_line(struct llmq_ratelimit_headers *h, const char *line,
                                      size_t len, int64_t now_unix_ms);

/* Feeds a block of header lines separated by "\n" or "\r\n" (borrowed), each
 * as llmq_ratelimit_headers_feed_line. Stops at the first empty line. */
void llmq_ratelimit_headers_feed_block(struct llmq_ratelimit_headers *h, const char *text,
                                       size_t len, int64_t now_unix_ms);

/* Returns 1 and stores the value in *out (may be NULL) when field is present,
 * else 0. For LLMQ_RLH_REQUEST_ID *out is the id's length. */
int llmq_ratelimit_headers_get(const struct llmq_ratelimit_headers *h, enum llmq_rlh_field field,
                               int64_t *out);

/* The server's "wait at least this long" hint in ms: retry-after-ms when
 * present, else retry-after, else -1. Does not consider the reset-* headers
 * (they say when a window refills, not when to retry). */
int64_t llmq_ratelimit_headers_retry_hint_ms(const struct llmq_ratelimit_headers *h);

/* Static snake_case name of a field ("limit_requests", "reset_tokens_ms",
 * "request_id", ...), or NULL when field is out of range. */
const char *llmq_ratelimit_headers_field_name(enum llmq_rlh_field field);

/* Parses an OpenAI duration (Go time.Duration text: a sequence of
 * <decimal><unit> with unit h, m, s, ms, us, µs, ns; or a bare non-negative
 * number, read as seconds) from s[0..len) (borrowed). Sub-millisecond parts
 * are rounded up to whole ms (never report a reset sooner than the server
 * said). Returns 0 and stores milliseconds in *out_ms, or -1 on bad input or
 * a value over 10^12 ms. */
int llmq_ratelimit_parse_duration_ms(const char *s, size_t len, int64_t *out_ms);

/* Parses an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") from s[0..len).
 * Returns 0 and stores ms since the Unix epoch in *out_unix_ms, or -1. */
int llmq_ratelimit_parse_http_date(const char *s, size_t len, int64_t *out_unix_ms);

#endif
