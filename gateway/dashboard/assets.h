/* The dashboard's files (gateway/dashboard/assets/), embedded in the binary
 * at build time by cmake/embed_assets.cmake: nothing is read from disk and
 * nothing is fetched from elsewhere (it works in a closed network). */
#ifndef LLMQ_GW_DASH_ASSETS_H
#define LLMQ_GW_DASH_ASSETS_H

#include <stddef.h>

struct gw_dash_asset {
    const char *name;         /* the file's name, "app.js" */
    const char *content_type; /* from its extension */
    const unsigned char *data;
    size_t len;
};

/* The asset called name (borrowed), or NULL. Static data: never freed. */
const struct gw_dash_asset *gw_dash_asset_find(const char *name);

#endif
