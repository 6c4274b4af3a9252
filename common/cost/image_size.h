/* Image dimensions (from the first bytes of PNG, JPEG, GIF and WebP files and
 * from `data:` URLs) and the prompt tokens OpenAI charges for an image. */
#ifndef LLMQ_IMAGE_SIZE_H
#define LLMQ_IMAGE_SIZE_H

#include <stddef.h>

#include "llmq/error.h"

enum llmq_image_detail {
    LLMQ_IMAGE_DETAIL_AUTO = 0,
    LLMQ_IMAGE_DETAIL_LOW,
    LLMQ_IMAGE_DETAIL_HIGH,
};

/* Reads width and height in pixels from an image file's bytes (data, len;
 * borrowed). Returns LLMQ_OK, or LLMQ_EINVAL when the bytes are not a PNG,
 * JPEG, GIF or WebP header we can read (or the size is zero). */
enum llmq_rc llmq_image_size_parse(const unsigned char *data, size_t len, unsigned *width,
                                   unsigned *height);

/* Same, from a `data:<type>;base64,<payload>` URL (len bytes, borrowed).
 * Returns LLMQ_OK, LLMQ_EINVAL (not a base64 data URL, or not a readable
 * image), or LLMQ_ENOMEM. */
enum llmq_rc llmq_image_size_from_data_url(const char *url, size_t len, unsigned *width,
                                           unsigned *height, struct llmq_error *err);

/* Parses a `detail` value ("low", "high", "auto"; NULL = auto). Unknown values
 * count as auto. */
enum llmq_image_detail llmq_image_detail_parse(const char *s);

/* Prompt tokens of one width × height image sent to model (borrowed; NULL =
 * gpt-4o's rule) with the given detail, by OpenAI's published rules:
 *  - tile models: low = base; high = fit in 2048×2048, shrink the shortest
 *    side to 768, then base + per_tile × (512-px tiles). Base/tile are 85/170
 *    (gpt-4o, gpt-4.1, gpt-4.5, default), 2833/5667 (gpt-4o-mini), 75/150
 *    (o1, o3), 70/140 (gpt-5), 65/129 (computer-use-preview);
 *  - patch models (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini): 32-px
 *    patches, scaled down to at most 1536, × 1.62 / 2.46 / 1.72; detail is
 *    not distinguished.
 * "auto" is counted as "high": OpenAI picks per image, and over-reserving a
 * little is refunded at settle time while under-reserving risks a 429. */
long long llmq_image_tokens(const char *model, unsigned width, unsigned height,
                            enum llmq_image_detail detail);

#endif
