/* Growable byte buffers for openai-sim: responses, request bodies, log lines.
 *
 * A struct sim_buf owns its bytes (data is NULL or malloc'd). Appends grow it
 * geometrically; on allocation failure the buffer is marked failed (oom = 1),
 * later appends are ignored and the caller checks oom once at the end, which
 * keeps the many small appends of a response free of error plumbing. */
#ifndef SIM_BUF_H
#define SIM_BUF_H

#include <stddef.h>
#include <stdint.h>

struct sim_buf {
    char *data;
    size_t len;
    size_t cap;
    int oom;
};

/* Frees the bytes and zeroes the buffer; NULL is a no-op. */
void sim_buf_free(struct sim_buf *b);

/* Empties the buffer and clears oom, keeping its capacity for reuse. */
void sim_buf_reset(struct sim_buf *b);

/* Makes room for at least extra more bytes; returns 0, or -1 (and sets oom). */
int sim_buf_reserve(struct sim_buf *b, size_t extra);

/* Appends n bytes (borrowed). */
void sim_buf_add(struct sim_buf *b, const void *p, size_t n);

/* Appends a NUL-terminated string (borrowed). */
void sim_buf_adds(struct sim_buf *b, const char *s);

/* Appends printf-formatted text. */
void sim_buf_addf(struct sim_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends a signed decimal integer. */
void sim_buf_addi(struct sim_buf *b, int64_t v);

/* Appends s[0..n) as the inside of a JSON string (quotes not included):
 * escapes quote, backslash and control bytes; other bytes pass through. */
void sim_buf_add_json_esc(struct sim_buf *b, const char *s, size_t n);

/* Removes the first n bytes (n <= len), moving the rest to the front. */
void sim_buf_consume(struct sim_buf *b, size_t n);

#endif
