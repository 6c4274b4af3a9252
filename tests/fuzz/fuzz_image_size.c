/* Fuzzes the image header readers (common/cost/image_size.h): a job's
 * `data:image/...;base64,` URL is decoded and its PNG/JPEG/GIF/WebP header
 * read to price the image, so these bytes come straight from a Batch line.
 * The same input is read as raw image bytes and, with a data-URL prefix
 * picked by the first byte, as a data URL; an accepted size is then priced
 * for a tile model and a patch model. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "cost/image_size.h"

static const char *const prefixes[] = {
    "", /* the input names its own scheme */
    "data:image/png;base64,",
    "data:image/jpeg;base64,",
    "data:;base64,",
};

static void price(unsigned w, unsigned h)
{
    if (w == 0 || h == 0)
        __builtin_trap();
    for (int d = LLMQ_IMAGE_DETAIL_AUTO; d <= LLMQ_IMAGE_DETAIL_HIGH; d++) {
        if (llmq_image_tokens("gpt-4o", w, h, (enum llmq_image_detail)d) < 0 ||
            llmq_image_tokens("gpt-4.1-mini", w, h, (enum llmq_image_detail)d) < 0)
            __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t sel = fuzz_take_byte(&data, &size);
    unsigned w, h;
    if (llmq_image_size_parse(data, size, &w, &h) == LLMQ_OK)
        price(w, h);

    const char *prefix = prefixes[sel % 4];
    size_t plen = strlen(prefix);
    char *url = malloc(plen + size + 1);
    if (url == NULL)
        return 0;
    memcpy(url, prefix, plen);
    if (size > 0)
        memcpy(url + plen, data, size);
    url[plen + size] = '\0';
    struct llmq_error err = {0};
    if (llmq_image_size_from_data_url(url, plen + size, &w, &h, &err) == LLMQ_OK)
        price(w, h);
    free(url);
    return 0;
}
