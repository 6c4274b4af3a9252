/* Parsing and printing nano-USD amounts; see money.h. Integer arithmetic
 * only: a float would turn "0.1" into a price that is not the one given. */
#include "cost/money.h"

#include <stdio.h>
#include <string.h>

enum llmq_rc llmq_usd_parse(const char *text, int max_decimals, long long max_nano,
                            const char *name, long long *nano, struct llmq_error *err)
{
    *nano = 0;
    if (text == NULL || text[0] == '\0')
        return llmq_error_set(err, LLMQ_EINVAL, "%s: expected an amount in USD, got ''", name);
    long long whole = 0, frac = 0;
    int digits = 0, decimals = 0, point = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '.' && !point) {
            point = 1;
        } else if (*p >= '0' && *p <= '9') {
            if (point) {
                if (++decimals > max_decimals)
                    return llmq_error_set(err, LLMQ_EINVAL, "%s: '%s' has more than %d decimals",
                                          name, text, max_decimals);
                frac = frac * 10 + (*p - '0');
            } else {
                if (whole > max_nano / LLMQ_NANO_PER_USD)
                    return llmq_error_set(err, LLMQ_EINVAL, "%s: '%s' is too large", name, text);
                whole = whole * 10 + (*p - '0');
            }
            digits++;
        } else {
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "%s: expected an amount in USD (digits and one '.'), got '%s'",
                                  name, text);
        }
    }
    if (digits == 0)
        return llmq_error_set(err, LLMQ_EINVAL, "%s: expected an amount in USD, got '%s'", name,
                              text);
    for (int i = decimals; i < 9; i++)
        frac *= 10;
    if (whole > max_nano / LLMQ_NANO_PER_USD || whole * LLMQ_NANO_PER_USD > max_nano - frac)
        return llmq_error_set(err, LLMQ_EINVAL, "%s: '%s' is too large", name, text);
    *nano = whole * LLMQ_NANO_PER_USD + frac;
    return LLMQ_OK;
}

enum llmq_rc llmq_price_parse(const char *text, const char *name, long long *nano_per_token,
                              struct llmq_error *err)
{
    long long nano = 0;
    enum llmq_rc rc = llmq_usd_parse(text, 3, 100000LL * LLMQ_NANO_PER_USD, name, &nano, err);
    *nano_per_token = rc == LLMQ_OK ? nano / 1000000 : 0;
    return rc;
}

void llmq_usd_format(long long nano, char *buf, size_t n)
{
    const char *sign = nano < 0 ? "-" : "";
    unsigned long long v =
        nano < 0 ? (unsigned long long)(-(nano + 1)) + 1 : (unsigned long long)nano;
    unsigned long long whole = v / LLMQ_NANO_PER_USD, frac = v % LLMQ_NANO_PER_USD;
    char f[16];
    snprintf(f, sizeof(f), "%09llu", frac);
    int keep = 9;
    while (keep > 2 && f[keep - 1] == '0')
        keep--;
    snprintf(buf, n, "%s%llu.%.*s", sign, whole, keep, f);
}
