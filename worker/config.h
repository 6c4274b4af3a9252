/* llmq-worker configuration: flags over environment over defaults.
 *
 * Invalid configuration is reported as one line naming the setting, and the
 * process exits 2. API keys come from OPENAI_API_KEY or --api-key-file, are
 * held only in memory, and never written to Redis or logs. */
#ifndef LLMQ_WORKER_CONFIG_H
#define LLMQ_WORKER_CONFIG_H

#include <stdint.h>

#include "base/log.h"
#include "redis/redis_async.h"
#include "redis/redis_url.h"

#define LLMQ_WORKER_MAX_ACCOUNTS 16
#define LLMQ_WORKER_MAX_ENDPOINTS 64
#define LLMQ_WORKER_ENDPOINT_NAME_MAX 64
#define LLMQ_WORKER_STREAM_COALESCE_MS_DEFAULT 20

struct llmq_worker_account {
    char name[201];
    char *api_key;   /* owned; wiped on free; NULL: none (the worker serves endpoints only) */
    char key_id[17]; /* first 16 hex of SHA-256 of the key: safe to log */
};

/* The key of one endpoint (`llmq endpoints`, docs/DESIGN.md §3.9): the worker
 * takes jobs only for endpoints it has a key for, in every account it
 * serves. */
struct llmq_worker_endpoint_key {
    char name[LLMQ_WORKER_ENDPOINT_NAME_MAX + 1];
    char *key;       /* owned; wiped on free */
    char key_id[17]; /* first 16 hex of SHA-256 of the key: safe to log */
};

struct llmq_worker_config {
    struct llmq_redis_url redis;
    int redis_timeout_ms; /* command timeout of its Redis connections (redis_async.h) */
    struct llmq_worker_account accounts[LLMQ_WORKER_MAX_ACCOUNTS];
    int n_accounts;
    char base_url[1024];        /* without a trailing "/v1" or "/" */
    char azure_api_version[64]; /* non-empty: Azure OpenAI (api-key auth, deployment URL) */
    int concurrency;            /* jobs in hand per process (job_slot.h): calls in flight
                                   and settles waiting for Redis */
    int64_t request_timeout_ms;
    int64_t connect_timeout_ms;
    int max_attempts; /* default for jobs that set none: enqueue stores one */
    int64_t backoff_base_ms, backoff_cap_ms;
    int64_t visibility_ms; /* a silent consumer's jobs are reclaimed after this */
    int64_t grace_ms;      /* SIGTERM: time to finish in-flight requests */
    char consumer[256];
    char ca_file[1024];
    int http1_only;
    enum llmq_log_level log_level;
    enum llmq_log_format log_format;
    int exit_when_idle_ms;      /* > 0: exit 0 after this long with nothing to do (tests, demo) */
    int64_t max_response_bytes; /* a longer response body is cut: the job dies, response_too_big */
    int64_t stream_coalesce_ms; /* a streamed answer's events wait at most this long to be
                                   relayed together (stream_call.h); 0: each at once */
    char spool_dir[1024];     /* settles Redis could not take are written here at exit (spool.h) */
    int spool_max_jobs;       /* settles kept in memory at most; at it, no new jobs are taken */
    int64_t offload_lease_ms; /* a provider batch's step is one worker's this long (pbatch.h) */
    int64_t offload_max_file_bytes; /* a provider batch's result file larger is not taken */
    int metrics_port;               /* > 0: serve /metrics, /healthz, /readyz on it; 0: off */
    char metrics_host[64]; /* numeric address to bind; default 0.0.0.0 (reachable in a pod) */
    struct llmq_worker_endpoint_key endpoint_keys[LLMQ_WORKER_MAX_ENDPOINTS];
    int n_endpoint_keys;
    /* What dispatch is told this worker serves (lua/dispatch.lua ARGV[3]):
     * the endpoint names, comma-separated, an empty first name when it also
     * holds the accounts' own key (the implicit endpoint). */
    char serves[LLMQ_WORKER_MAX_ENDPOINTS * (LLMQ_WORKER_ENDPOINT_NAME_MAX + 1) + 2];
};

/* Parses argv/env into *cfg. Returns 0; or prints usage (--help) and returns
 * 1; or prints one line naming the bad setting and returns 2. */
int llmq_worker_config_parse(struct llmq_worker_config *cfg, int argc, char **argv);

/* Wipes and frees the keys. */
void llmq_worker_config_free(struct llmq_worker_config *cfg);

/* The key of endpoint name in cfg (borrowed), or NULL when it holds none. */
const struct llmq_worker_endpoint_key *
llmq_worker_endpoint_key(const struct llmq_worker_config *cfg, const char *name);

/* The full URL of a Batch `url` path ("/v1/chat/completions") for cfg into
 * buf of size n; returns 0, or -1 when it does not fit. */
int llmq_worker_request_url(const struct llmq_worker_config *cfg, const char *path, char *buf,
                            size_t n);

/* The URL of path on an endpoint (base_url as `llmq endpoints` stored it:
 * no trailing "/v1"; api_version non-empty: Azure, the deployment path
 * /openai/deployments/<deployment> unless base_url already holds one) into
 * buf of size n; returns 0, or -1 when it does not fit. */
int llmq_worker_endpoint_url(const char *base_url, const char *api_version, const char *deployment,
                             const char *path, char *buf, size_t n);

/* The URL of an API path of the resource itself, not of a deployment (the
 * Files and Batches APIs: "/v1/files?purpose=batch", "/v1/batches/ID") on an
 * endpoint (base_url as stored) into buf of size n. OpenAI style: base_url
 * and path. Azure (api_version non-empty): the resource's URL (base_url
 * up to any "/openai/"), "/openai" and path without its "/v1", with
 * api-version=V added to its query. Returns 0, or -1 when it does not fit. */
int llmq_worker_endpoint_api_url(const char *base_url, const char *api_version, const char *path,
                                 char *buf, size_t n);

#endif
