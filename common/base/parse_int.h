/* Parsing an integer from text (an option, a setting): the one strict
 * decimal parser of the project's command lines. Pure; callers print their
 * own message naming the option. */
#ifndef LLMQ_PARSE_INT_H
#define LLMQ_PARSE_INT_H

#include <stdint.h>

/* Parses s (borrowed) as a whole decimal integer in min..max into *out.
 * Leading spaces, trailing bytes, an empty string, overflow or a value out
 * of range give -1 (*out unchanged); else 0. */
int llmq_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out);

#endif
