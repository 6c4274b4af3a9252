/* Reading values out of a redisReply: the accessors a parser of Redis
 * replies should use (the limiter's, the dispatch reply's and some of the
 * CLI's do; many older parsers still index element[] themselves,
 * CONTRIBUTING.md "Where code goes").
 *
 * Replies are untrusted (a hostile stream entry, a broken proxy): every
 * accessor checks the type and size of what it reads and takes NULL for a
 * missing element, so a wrong shape is a -1 or a default, never a crash.
 * Nothing here allocates but llmq_reply_dup; all pointers into a reply are
 * borrowed and live as long as the reply. Pure: no I/O, no globals. */
#ifndef LLMQ_REPLY_READ_H
#define LLMQ_REPLY_READ_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* Element i of the array reply r (borrowed), or NULL when r is NULL, not an
 * array, or has no element i. */
const redisReply *llmq_reply_at(const redisReply *r, size_t i);

/* An integer reply, or a string reply holding a whole decimal int64 (no
 * spaces, no trailing bytes), into *out. Returns 0, or -1 (*out unchanged)
 * when e is NULL or neither. */
int llmq_reply_int(const redisReply *e, int64_t *out);

/* llmq_reply_int, or def when e holds no integer (long long: what printf
 * and jansson's json_int_t take). */
long long llmq_reply_int_or(const redisReply *e, long long def);

/* Copies a string reply (or an integer reply, in decimal) with its
 * terminating NUL into buf (n bytes). Returns 0, or -1 (buf unchanged) when
 * e is NULL or neither, or does not fit. */
int llmq_reply_copy(const redisReply *e, char *buf, size_t n);

/* The text of a string reply (borrowed), or def when e is NULL or not one. */
const char *llmq_reply_str_or(const redisReply *e, const char *def);

/* A new NUL-terminated copy of a string or status reply (free with free), or
 * NULL when e is NULL or neither, or out of memory. */
char *llmq_reply_dup(const redisReply *e);

#endif
