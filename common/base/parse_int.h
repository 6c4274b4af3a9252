/* Parsing numbers from text: the one strict decimal parser of the project's
 * command lines (an option, a setting), the one of a digits field inside a
 * buffer (a URL's port, a cluster reply, a stored record), and the value of
 * one hex digit (the %XX escapes of URLs and job ids). Pure; callers print
 * their own message naming the option. */
#ifndef LLMQ_PARSE_INT_H
#define LLMQ_PARSE_INT_H

#include <stddef.h>
#include <stdint.h>

/* Parses s (borrowed) as a whole decimal integer in min..max into *out.
 * Leading spaces, trailing bytes, an empty string, overflow or a value out
 * of range give -1 (*out unchanged); else 0. */
int llmq_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out);

/* Parses s[0..len) (borrowed; no NUL needed, so a field inside a reply or a
 * record) as decimal digits only, at most 18, in min..max into *out. A sign,
 * any other byte, no digit or a value out of range give -1 (*out unchanged);
 * else 0. */
int llmq_parse_digits(const char *s, size_t len, int64_t min, int64_t max, int64_t *out);

/* The value 0..15 of the hex digit c (either case), or -1 when c is not one. */
int llmq_hex_digit_value(unsigned char c);

#endif
