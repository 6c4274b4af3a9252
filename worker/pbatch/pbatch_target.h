/* Where a provider batch lives (docs/DESIGN.md §3.10): the endpoint it was
 * made for, as lua/lib/pbatch_ep.lua recorded it (pb:<id> fields ep, ep_url,
 * ep_ver, ep_dep), and how its Files and Batches calls are addressed there:
 * the implicit endpoint (the worker's --base-url and the account's key), a
 * named OpenAI-style endpoint (its base URL, the key the worker holds for
 * it, Bearer auth), or a named Azure OpenAI resource (its /openai/files and
 * /openai/batches with ?api-version=, the api-key header, the deployment as
 * each line's model, the line url without "/v1"). Pure: no I/O. */
#ifndef LLMQ_WORKER_PBATCH_TARGET_H
#define LLMQ_WORKER_PBATCH_TARGET_H

#include <stddef.h>

#include "config.h"

struct llmq_pbatch_target {
    char ep[LLMQ_WORKER_ENDPOINT_NAME_MAX + 1]; /* "" the implicit endpoint */
    char base_url[1024];                        /* named: as `llmq endpoints` stored it */
    char api_version[64];                       /* non-empty: Azure */
    char deployment[201];                       /* Azure: the model's deployment */
};

/* 1 when t is an Azure OpenAI resource. */
int llmq_pbatch_target_azure(const struct llmq_pbatch_target *t);

/* The URL of API path ("/v1/files", "/v1/batches/ID/cancel") on t for cfg
 * (borrowed) into buf of size n. Returns 0, or -1 when it does not fit. */
int llmq_pbatch_target_url(const struct llmq_pbatch_target *t, const struct llmq_worker_config *cfg,
                           const char *path, char *buf, size_t n);

/* The key to send to t (borrowed from cfg, or account_key for the implicit
 * endpoint), or NULL when this worker holds none for it. */
const char *llmq_pbatch_target_key(const struct llmq_pbatch_target *t,
                                   const struct llmq_worker_config *cfg, const char *account_key);

/* The url a line and the batch name on t for Batch url path (borrowed):
 * path itself, or on Azure path without its "/v1" ("/chat/completions"),
 * as Azure's global batch takes it. */
const char *llmq_pbatch_target_line_url(const struct llmq_pbatch_target *t, const char *path);

#endif
