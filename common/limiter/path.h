/* Bucket names of a path (private helpers; the path API is in llmq/limiter.h).
 * Buckets (common/redis/keys.h): "<model>" (account+model),
 * "<model>/t/<tenant>", and a user's: "<model>/t/<tenant>/u/<user>" (a user
 * is a user of its tenant), "<model>/u/<user>" for a user without a tenant.
 * "*" as a name is a default: "<model>/t/" + "*" of every tenant,
 * "<model>/t/<tenant>/u/" + "*" of that tenant's users, "<model>/u/<user>"
 * also of that user in every tenant, "<model>/u/" + "*" of every user. */
#ifndef LLMQ_PATH_H
#define LLMQ_PATH_H

#include <stddef.h>

#include "llmq/limiter.h"

#define LLMQ_BUCKET_NAME_MAX (3 * LLMQ_NAME_MAX + 8)

/* Writes the 1..3 bucket names of path, account+model first; returns how many. */
int llmq_path_bucket_names(const struct llmq_path *path, char names[3][LLMQ_BUCKET_NAME_MAX]);

/* The bucket `llmq limits` names with model, tenant and user (each of tenant
 * and user may be NULL/"" for none, or "*" for the default): model alone,
 * tenant "<model>/t/<tenant>", user "<model>/u/<user>" (that user in every
 * tenant), both "<model>/t/<tenant>/u/<user>". Tenant "*" with a user is
 * LLMQ_EINVAL (the user alone says "in every tenant"), as is a bad name or
 * a name that does not fit n. */
enum llmq_rc llmq_bucket_name(char *buf, size_t n, const char *model, const char *tenant,
                              const char *user, struct llmq_error *err);

#endif
