/* Addressing a provider batch's endpoint (pbatch_target.h). */
#include <string.h>

#include "pbatch/pbatch_target.h"

int llmq_pbatch_target_azure(const struct llmq_pbatch_target *t)
{
    return t->ep[0] != '\0' && t->api_version[0] != '\0';
}

int llmq_pbatch_target_url(const struct llmq_pbatch_target *t, const struct llmq_worker_config *cfg,
                           const char *path, char *buf, size_t n)
{
    if (t->ep[0] == '\0')
        return llmq_worker_request_url(cfg, path, buf, n);
    return llmq_worker_endpoint_api_url(t->base_url, t->api_version, path, buf, n);
}

const char *llmq_pbatch_target_key(const struct llmq_pbatch_target *t,
                                   const struct llmq_worker_config *cfg, const char *account_key)
{
    if (t->ep[0] == '\0')
        return account_key;
    const struct llmq_worker_endpoint_key *k = llmq_worker_endpoint_key(cfg, t->ep);
    return k != NULL ? k->key : NULL;
}

const char *llmq_pbatch_target_line_url(const struct llmq_pbatch_target *t, const char *path)
{
    if (llmq_pbatch_target_azure(t) && strncmp(path, "/v1/", 4) == 0)
        return path + 3;
    return path;
}
