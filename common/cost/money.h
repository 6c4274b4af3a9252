/* Amounts of money as llmq keeps them: integers of nano-USD (1e-9 USD), so
 * budgets, prices and sums are exact (lua/lib/budget.lua does the same
 * arithmetic in Redis). A price of X USD per 1M tokens is X * 1000 nano-USD
 * per token: prices take at most three decimals.
 *
 * Pure functions: no I/O, no allocation, any thread. */
#ifndef LLMQ_MONEY_H
#define LLMQ_MONEY_H

#include <stddef.h>

#include "llmq/error.h"

#define LLMQ_NANO_PER_USD 1000000000LL
/* The most a budget may be (exact in Lua numbers, under 2^53 nano-USD). */
#define LLMQ_USD_MAX_NANO (1000000LL * LLMQ_NANO_PER_USD)

/* Parses a decimal amount of USD ("12", "0.50", ".5", no sign, no
 * exponent) with at most max_decimals (0..9) digits after the point, into
 * nano-USD (*nano), at most max_nano. Returns LLMQ_OK, or LLMQ_EINVAL with err
 * saying what is wrong (name, borrowed, names the value: "--usd"). */
enum llmq_rc llmq_usd_parse(const char *text, int max_decimals, long long max_nano,
                            const char *name, long long *nano, struct llmq_error *err);

/* Parses a price in USD per 1M tokens into nano-USD per token (at most 3
 * decimals, at most 100000 USD per 1M). */
enum llmq_rc llmq_price_parse(const char *text, const char *name, long long *nano_per_token,
                              struct llmq_error *err);

/* Writes nano-USD as USD text into buf (n bytes): at least two decimals,
 * more (up to nine) only when they are not zero ("12.50", "0.000075"). */
void llmq_usd_format(long long nano, char *buf, size_t n);

#endif
