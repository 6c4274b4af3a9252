/* Prompt tokens of an image, by OpenAI's published vision rules (see
 * llmq_image_tokens in image_size.h for the table and the formulas).
 *
 * Integer arithmetic throughout, rounding scaled sizes down as OpenAI's
 * worked examples do (2048×4096 high → 768×1536 → 6 tiles → 1105 tokens). */
#include <math.h>
#include <string.h>

#include "cost/image_size.h"

struct image_rule {
    const char *prefix; /* model name prefix; checked in table order */
    int patch;          /* 1: 32-px patch rule, 0: 512-px tile rule */
    long long base;     /* tile rule: tokens for low detail and added to high */
    long long per_tile;
    double multiplier; /* patch rule */
};

static const struct image_rule rules[] = {
    {"gpt-4o-mini", 0, 2833, 5667, 0},
    {"gpt-4.1-mini", 1, 0, 0, 1.62},
    {"gpt-4.1-nano", 1, 0, 0, 2.46},
    {"gpt-5-mini", 1, 0, 0, 1.62},
    {"gpt-5-nano", 1, 0, 0, 2.46},
    {"o4-mini", 1, 0, 0, 1.72},
    {"gpt-5", 0, 70, 140, 0},
    {"o1", 0, 75, 150, 0},
    {"o3", 0, 75, 150, 0},
    {"computer-use-preview", 0, 65, 129, 0},
};

static const struct image_rule default_rule = {"", 0, 85, 170, 0};

static const struct image_rule *rule_for(const char *model)
{
    if (model != NULL && strncmp(model, "ft:", 3) == 0)
        model += 3;
    for (size_t i = 0; model != NULL && i < sizeof(rules) / sizeof(rules[0]); i++) {
        if (strncmp(model, rules[i].prefix, strlen(rules[i].prefix)) == 0)
            return &rules[i];
    }
    return &default_rule;
}

static long long ceil_div(long long a, long long b)
{
    return (a + b - 1) / b;
}

static long long tile_tokens(const struct image_rule *r, long long w, long long h,
                             enum llmq_image_detail detail)
{
    if (detail == LLMQ_IMAGE_DETAIL_LOW)
        return r->base;
    long long longest = w > h ? w : h;
    if (longest > 2048) {
        w = w * 2048 / longest;
        h = h * 2048 / longest;
    }
    long long shortest = w < h ? w : h;
    if (shortest > 768) {
        w = w * 768 / shortest;
        h = h * 768 / shortest;
    }
    if (w < 1)
        w = 1;
    if (h < 1)
        h = 1;
    return r->base + r->per_tile * ceil_div(w, 512) * ceil_div(h, 512);
}

static long long patch_tokens(const struct image_rule *r, long long w, long long h)
{
    const long long cap = 1536;
    long long patches = ceil_div(w, 32) * ceil_div(h, 32);
    if (patches > cap) {
        /* Shrink so the area holds `cap` patches, then so whole patches fit
         * along each side, as OpenAI's description of the rule goes. */
        double shrink = sqrt(32.0 * 32.0 * (double)cap / ((double)w * (double)h));
        double fw = (double)w * shrink / 32.0, fh = (double)h * shrink / 32.0;
        double adj = fmin(floor(fw) / fw, floor(fh) / fh);
        double rw = (double)w * shrink * adj, rh = (double)h * shrink * adj;
        patches = (long long)(ceil(rw / 32.0) * ceil(rh / 32.0));
        if (patches > cap)
            patches = cap;
    }
    return (long long)ceil((double)patches * r->multiplier);
}

long long llmq_image_tokens(const char *model, unsigned width, unsigned height,
                            enum llmq_image_detail detail)
{
    const struct image_rule *r = rule_for(model);
    long long w = width ? width : 1, h = height ? height : 1;
    if (r->patch)
        return patch_tokens(r, w, h);
    return tile_tokens(r, w, h, detail);
}
