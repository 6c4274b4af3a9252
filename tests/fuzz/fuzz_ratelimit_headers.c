/* Fuzzes the rate-limit response header parser (common/openai/ratelimit_headers.h):
 * a whole header block, the same text fed line by line (as libcurl delivers
 * it), and the two value parsers on their own. The result of the block and of
 * the lines must agree up to the first empty line; all of them must leave
 * every present field in range and the request id printable.
 *
 * The first byte picks the wall clock (for HTTP-date retry-after values). */
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "openai/ratelimit_headers.h"

static void check_fields(const struct llmq_ratelimit_headers *h)
{
    for (int f = 0; f < LLMQ_RLH_INT_FIELD_COUNT; f++) {
        int64_t v;
        if (llmq_ratelimit_headers_get(h, (enum llmq_rlh_field)f, &v) && v < 0)
            __builtin_trap();
    }
    size_t len = strnlen(h->request_id, sizeof(h->request_id));
    if (len == sizeof(h->request_id))
        __builtin_trap();
    for (size_t i = 0; i < len; i++)
        if (h->request_id[i] < 0x20 || h->request_id[i] > 0x7e)
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t sel = fuzz_take_byte(&data, &size);
    int64_t now_unix_ms = sel < 128 ? 1795000000000LL + sel * 86400000LL : 0;
    const char *text = (const char *)data;

    struct llmq_ratelimit_headers block, lines;
    llmq_ratelimit_headers_init(&block);
    llmq_ratelimit_headers_feed_block(&block, text, size, now_unix_ms);
    check_fields(&block);

    llmq_ratelimit_headers_init(&lines);
    size_t start = 0;
    while (start < size) {
        const char *nl = memchr(text + start, '\n', size - start);
        size_t end = nl ? (size_t)(nl - text) + 1 : size;
        size_t body = end - start;
        if (body > 0 && text[end - 1] == '\n')
            body--;
        if (body > 0 && text[start + body - 1] == '\r')
            body--;
        if (body == 0)
            break; /* feed_block stops at the first empty line */
        llmq_ratelimit_headers_feed_line(&lines, text + start, end - start, now_unix_ms);
        start = end;
    }
    check_fields(&lines);
    if (block.present != lines.present ||
        memcmp(block.value, lines.value, sizeof(block.value)) != 0 ||
        strcmp(block.request_id, lines.request_id) != 0)
        __builtin_trap();
    (void)llmq_ratelimit_headers_retry_hint_ms(&block);

    int64_t ms;
    if (llmq_ratelimit_parse_duration_ms(text, size, &ms) == 0 && (ms < 0 || ms > 1000000000000LL))
        __builtin_trap();
    int64_t at;
    (void)llmq_ratelimit_parse_http_date(text, size, &at);
    return 0;
}
