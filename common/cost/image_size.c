/* Image dimensions from file headers, for the image part of a request's cost.
 *
 * Only the header is trusted, and every read is bounds-checked: the bytes
 * come from a user's request. PNG (IHDR), GIF (logical screen), WebP (VP8,
 * VP8L, VP8X) and JPEG (the first SOFn segment) are read; EXIF orientation is
 * ignored, since the tile and patch counts do not change when width and
 * height swap. */
#include "base/base64.h"
#include "cost/image_size.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned be16(const unsigned char *p)
{
    return ((unsigned)p[0] << 8) | p[1];
}

static unsigned le16(const unsigned char *p)
{
    return p[0] | ((unsigned)p[1] << 8);
}

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int parse_png(const unsigned char *d, size_t len, unsigned *w, unsigned *h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (len < 24 || memcmp(d, sig, 8) != 0 || memcmp(d + 12, "IHDR", 4) != 0)
        return 0;
    uint32_t ww = be32(d + 16), hh = be32(d + 20);
    if (ww > 0x7FFFFFFF || hh > 0x7FFFFFFF)
        return 0;
    *w = ww;
    *h = hh;
    return 1;
}

static int parse_gif(const unsigned char *d, size_t len, unsigned *w, unsigned *h)
{
    if (len < 10 || (memcmp(d, "GIF87a", 6) != 0 && memcmp(d, "GIF89a", 6) != 0))
        return 0;
    *w = le16(d + 6);
    *h = le16(d + 8);
    return 1;
}

static int parse_webp(const unsigned char *d, size_t len, unsigned *w, unsigned *h)
{
    if (len < 30 || memcmp(d, "RIFF", 4) != 0 || memcmp(d + 8, "WEBP", 4) != 0)
        return 0;
    const unsigned char *c = d + 12;
    if (memcmp(c, "VP8 ", 4) == 0) {
        /* frame tag (3 bytes), start code 9d 01 2a, then 14-bit sizes */
        if (d[23] != 0x9D || d[24] != 0x01 || d[25] != 0x2A)
            return 0;
        *w = le16(d + 26) & 0x3FFF;
        *h = le16(d + 28) & 0x3FFF;
        return 1;
    }
    if (memcmp(c, "VP8L", 4) == 0) {
        if (d[20] != 0x2F)
            return 0;
        uint32_t bits =
            d[21] | ((uint32_t)d[22] << 8) | ((uint32_t)d[23] << 16) | ((uint32_t)d[24] << 24);
        *w = (bits & 0x3FFF) + 1;
        *h = ((bits >> 14) & 0x3FFF) + 1;
        return 1;
    }
    if (memcmp(c, "VP8X", 4) == 0) {
        *w = (d[24] | ((unsigned)d[25] << 8) | ((unsigned)d[26] << 16)) + 1;
        *h = (d[27] | ((unsigned)d[28] << 8) | ((unsigned)d[29] << 16)) + 1;
        return 1;
    }
    return 0;
}

/* SOFn markers carry the frame size; C4 (DHT), C8 (JPG) and CC (DAC) do not. */
static int is_sof(unsigned m)
{
    return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

static int parse_jpeg(const unsigned char *d, size_t len, unsigned *w, unsigned *h)
{
    if (len < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return 0;
    size_t pos = 2;
    while (pos + 4 <= len) {
        if (d[pos] != 0xFF)
            return 0;
        unsigned m = d[pos + 1];
        if (m == 0xFF) { /* fill byte */
            pos++;
            continue;
        }
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* no length */
            pos += 2;
            continue;
        }
        if (m == 0xD9 || m == 0xDA) /* end of image, start of scan: no SOF before */
            return 0;
        unsigned seg = be16(d + pos + 2);
        if (seg < 2)
            return 0;
        if (is_sof(m)) {
            if (pos + 9 > len || seg < 7)
                return 0;
            *h = be16(d + pos + 5);
            *w = be16(d + pos + 7);
            return 1;
        }
        pos += 2 + seg;
    }
    return 0;
}

enum llmq_rc llmq_image_size_parse(const unsigned char *data, size_t len, unsigned *width,
                                   unsigned *height)
{
    unsigned w = 0, h = 0;
    if (data == NULL)
        return LLMQ_EINVAL;
    if (!parse_png(data, len, &w, &h) && !parse_gif(data, len, &w, &h) &&
        !parse_webp(data, len, &w, &h) && !parse_jpeg(data, len, &w, &h))
        return LLMQ_EINVAL;
    if (w == 0 || h == 0)
        return LLMQ_EINVAL;
    *width = w;
    *height = h;
    return LLMQ_OK;
}

enum llmq_rc llmq_image_size_from_data_url(const char *url, size_t len, unsigned *width,
                                           unsigned *height, struct llmq_error *err)
{
    if (len < 5 || strncmp(url, "data:", 5) != 0)
        return llmq_error_set(err, LLMQ_EINVAL, "image: not a data: URL");
    const char *comma = memchr(url, ',', len);
    if (comma == NULL || comma - url < 12 || strncmp(comma - 7, ";base64", 7) != 0)
        return llmq_error_set(err, LLMQ_EINVAL, "image: data: URL is not base64");
    size_t n = len - (size_t)(comma + 1 - url);
    unsigned char *buf = malloc(n / 4 * 3 + 3);
    if (buf == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "image: out of memory");
    long got = llmq_base64_decode(comma + 1, n, buf);
    enum llmq_rc rc = LLMQ_EINVAL;
    if (got > 0)
        rc = llmq_image_size_parse(buf, (size_t)got, width, height);
    free(buf);
    if (rc != LLMQ_OK)
        return llmq_error_set(err, rc, "image: data: URL holds no PNG, JPEG, GIF or WebP header");
    return LLMQ_OK;
}

enum llmq_image_detail llmq_image_detail_parse(const char *s)
{
    if (s != NULL && strcmp(s, "low") == 0)
        return LLMQ_IMAGE_DETAIL_LOW;
    if (s != NULL && strcmp(s, "high") == 0)
        return LLMQ_IMAGE_DETAIL_HIGH;
    return LLMQ_IMAGE_DETAIL_AUTO;
}
