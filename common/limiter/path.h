/* Bucket names of a path (private helpers; the path API is in llmq/limiter.h).
 * Buckets: "<model>" (account+model), "<model>/t/<tenant>", "<model>/u/<user>";
 * "*" as tenant or user names the default limit of every tenant or user. */
#ifndef LLMQ_PATH_H
#define LLMQ_PATH_H

#include <stddef.h>

#include "llmq/limiter.h"

#define LLMQ_BUCKET_NAME_MAX (2 * LLMQ_NAME_MAX + 8)

/* Writes the 1..3 bucket names of path, account+model first; returns how many. */
int llmq_path_bucket_names(const struct llmq_path *path, char names[3][LLMQ_BUCKET_NAME_MAX]);

/* The bucket for model alone, or model+tenant, or model+user (tenant and user
 * may be NULL/""; at most one of them is used, tenant first; "*" allowed). */
enum llmq_rc llmq_bucket_name(char *buf, size_t n, const char *model, const char *tenant,
                              const char *user, struct llmq_error *err);

#endif
