/* Growable byte buffers (see buf.h for the oom convention). */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_buf_free(struct sim_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

void sim_buf_reset(struct sim_buf *b)
{
    b->len = 0;
    b->oom = 0;
}

int sim_buf_reserve(struct sim_buf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (b->cap - b->len > extra)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= extra) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (p == NULL) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void sim_buf_add(struct sim_buf *b, const void *p, size_t n)
{
    if (n == 0 || sim_buf_reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0'; /* reserve keeps one spare byte: handy for debugging */
}

void sim_buf_adds(struct sim_buf *b, const char *s)
{
    sim_buf_add(b, s, strlen(s));
}

void sim_buf_addf(struct sim_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        sim_buf_add(b, small, (size_t)n);
        return;
    }
    if (sim_buf_reserve(b, (size_t)n + 1) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sim_buf_addi(struct sim_buf *b, int64_t v)
{
    char tmp[24];
    char *end = tmp + sizeof(tmp);
    char *p = end;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--p = '-';
    sim_buf_add(b, p, (size_t)(end - p));
}

void sim_buf_add_json_esc(struct sim_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0; /* start of the current run of bytes that need no escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        sim_buf_add(b, s + run, i - run);
        run = i + 1;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            sim_buf_add(b, esc, 2);
        } else {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            sim_buf_add(b, esc, 6);
        }
    }
    sim_buf_add(b, s + run, n - run);
}

void sim_buf_consume(struct sim_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}
