/* A growable byte buffer's one append: what every module that gathers bytes
 * of unknown length (a stream's events, a relay message) needs. Pure: no I/O. */
#ifndef LLMQ_BASE_BYTES_H
#define LLMQ_BASE_BYTES_H

#include <stddef.h>

/* Appends d[0..n) (borrowed) to the buffer *p of *len bytes and *cap
 * allocated (all 0/NULL for a new one; the buffer is the caller's, free()
 * it), growing it by doubling; keeps a NUL after the bytes. Returns 0, or -1
 * without memory (the buffer is unchanged). */
int llmq_bytes_append(char **p, size_t *len, size_t *cap, const char *d, size_t n);

#endif
