/* Fuzzes the USD amount and price parsers (common/cost/money.h): any text
 * is an amount or an error, never a crash; an accepted amount is within its
 * bounds and prints back (llmq_usd_format) to text that parses to the same
 * amount. The first byte picks the decimals allowed (0..9). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cost/money.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int decimals = fuzz_take_byte(&data, &size) % 10;
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    long long v = -1;
    struct llmq_error err = {0};
    if (llmq_usd_parse(text, decimals, LLMQ_USD_MAX_NANO, "--usd", &v, &err) == LLMQ_OK) {
        if (v < 0 || v > LLMQ_USD_MAX_NANO)
            __builtin_trap();
        char back[48];
        long long again = -1;
        llmq_usd_format(v, back, sizeof(back));
        if (llmq_usd_parse(back, 9, LLMQ_USD_MAX_NANO, "--usd", &again, &err) != LLMQ_OK ||
            again != v)
            __builtin_trap();
    } else if (v != 0 || err.msg[0] == '\0') {
        __builtin_trap();
    }
    long long p = -1;
    if (llmq_price_parse(text, "--x", &p, &err) == LLMQ_OK && (p < 0 || p > 100000000))
        __builtin_trap();
    free(text);
    return 0;
}
