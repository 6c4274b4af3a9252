/* The job codec: OpenAI Batch input lines in, validated jobs with their cost
 * out; Batch output lines encoded for results. Pure: no I/O, no Redis.
 *
 * A Batch input line is {"custom_id", "method": "POST", "url", "body"} plus
 * llmq's own optional "llmq": {"priority", "tenant", "user", "deadline_ms",
 * "ttl_ms", "max_attempts", "endpoints", "completion_window", "cache",
 * "cache_ttl_s", "cache_store_truncated"}; per-line options
 * win over the defaults. "completion_window": "24h" marks a job that may wait
 * the provider's Batch window (offload, llmq.h llmq_job_options). "endpoints" pins the job to some
 * endpoints of its model: a comma-separated string or an array of names. */
#ifndef LLMQ_JOB_H
#define LLMQ_JOB_H

#include <jansson.h>
#include <stddef.h>

#include "llmq/cost.h"
#include "llmq/error.h"
#include "llmq/llmq.h"

#define LLMQ_JOB_MAX_BODY_BYTES_DEFAULT (1024 * 1024)
#define LLMQ_JOB_MAX_BODY_BYTES_LIMIT (1LL << 34) /* the most a setting or flag may ask */
#define LLMQ_JOB_MAX_ATTEMPTS_DEFAULT 5
#define LLMQ_JOB_MAX_ATTEMPTS_LIMIT 100
#define LLMQ_JOB_CACHE_KEY_HEX 64  /* LLMQ_CACHE_KEY_HEX (jobs/cache_key.h) */
#define LLMQ_JOB_ENDPOINTS_MAX 400 /* bytes of a job's endpoint pin list */
/* The provider's Batch completion window (OpenAI offers "24h" only). */
#define LLMQ_JOB_COMPLETION_WINDOW_MS 86400000LL
/* A stored answer's life when nothing says (s), and the most one may ask. */
#define LLMQ_JOB_CACHE_TTL_S_DEFAULT 86400LL
#define LLMQ_JOB_CACHE_TTL_S_MAX (30 * 86400LL)

/* What a job does with the response cache (llmq_job_options.cache). */
enum llmq_job_cache {
    LLMQ_JOB_CACHE_DEFAULT = 0, /* asks nothing: its model's default for its tenant
                                   (`llmq cache set`, decided in Redis), when
                                   llmq_job_defaults.cache_defaults; else off */
    LLMQ_JOB_CACHE_OFF,         /* neither reads nor writes */
    LLMQ_JOB_CACHE_USE,         /* answered from the cache or an identical job in flight */
    LLMQ_JOB_CACHE_REFRESH,     /* calls (or waits for one in flight) and replaces */
};

/* What a line does not say. Strings borrowed; they must outlive the parse. */
struct llmq_job_defaults {
    enum llmq_priority priority;
    const char *tenant;    /* NULL: none */
    const char *user;      /* NULL: none */
    const char *endpoints; /* NULL: none (the pin of llmq_job_options) */
    long long deadline_ms;
    long long ttl_ms;
    long long completion_window_ms; /* 0: none; LLMQ_JOB_COMPLETION_WINDOW_MS: may wait it */
    enum llmq_job_cache cache;      /* what a job does with the response cache */
    long long cache_ttl_s;          /* 0: LLMQ_JOB_CACHE_TTL_S_DEFAULT */
    int cache_store_truncated;      /* 1: a cut-off answer may be stored and served */
    /* 1: the account may have cache defaults (`llmq cache set`): a job that
     * asks nothing (LLMQ_JOB_CACHE_DEFAULT) gets its key, and Redis decides;
     * 0: such a job uses no cache (its key is not computed) */
    int cache_defaults;
    int max_attempts;
    size_t max_body_bytes;                /* compact body size limit */
    const struct llmq_cost_options *cost; /* NULL: llmq_cost_options_default */
    long long now_ms;                     /* unix ms, to reject past deadlines; 0: skip */
    int generate_ids; /* a line without custom_id gets a generated id; 0: such a line is
                         rejected (the Batch format requires custom_id, and a generated id
                         makes a re-run of the file run that line again) */
};

/* One validated job. Every pointer member is owned by the job except url. */
struct llmq_job {
    char *id; /* custom_id, or generated (API without an id, or generate_ids) */
    char *model;
    const char *url; /* static: one of the known endpoints */
    char *body;      /* compact JSON text of the request body */
    size_t body_len;
    enum llmq_priority priority;
    char *tenant;    /* NULL: none */
    char *user;      /* NULL: none */
    char *endpoints; /* NULL: any endpoint; else the pin, comma-separated names */
    long long deadline_ms;
    long long ttl_ms;
    long long completion_window_ms; /* 0: live only; else it may be offloaded (offload) */
    int max_attempts;
    struct llmq_cost cost;
    /* NULL: none known; else the model's fallback model (lua/lib/endpoints.lua)
     * and the job's cost when it runs as that model (llmq_job_estimate_as):
     * dispatch charges it if the fallback serves the job */
    char *fallback_model;
    struct llmq_cost fallback_cost;
    /* 1: no model but its own and fallback_model (NULL: none) may serve the
     * job, whatever fallback the account sets later (a gateway key's model
     * list, gateway/key_policy.h); 0: its model's fallback at the time */
    int fallback_only;
    enum llmq_job_cache cache; /* never LLMQ_JOB_CACHE_DEFAULT without its key */
    long long cache_ttl_s; /* > 0 when cache is use or refresh; with default, 0: the default's */
    char cache_key[LLMQ_JOB_CACHE_KEY_HEX + 1]; /* jobs/cache_key.h, when cache is not off */
    int cache_store_truncated;                  /* 1: a cut-off answer may be stored and served */
};

/* Fills *d with: normal priority, no tenant/user/deadline, 5 attempts, 1 MiB
 * bodies, default cost options, now_ms = 0, custom_id required. */
void llmq_job_defaults_init(struct llmq_job_defaults *d);

/* Decodes and validates one Batch input line (line[0..len), borrowed; need not
 * be NUL-terminated) into *out (filled only on LLMQ_OK; free members with
 * llmq_job_clear). Errors: LLMQ_EINVAL (bad JSON, missing or wrong field,
 * unknown url, bad custom_id...) or LLMQ_ETOOBIG (body over the limit), with a
 * message naming the field; LLMQ_ENOMEM. */
enum llmq_rc llmq_job_from_line(const char *line, size_t len, const struct llmq_job_defaults *d,
                                struct llmq_job *out, struct llmq_error *err);

/* Same checks for a request given as url + body JSON text (both borrowed)
 * and API options (may be NULL), as llmq_producer_enqueue takes them: parses
 * body, then as llmq_job_from_request_json. */
enum llmq_rc llmq_job_from_request(const char *url, const char *body,
                                   const struct llmq_job_options *o,
                                   const struct llmq_job_defaults *d, struct llmq_job *out,
                                   struct llmq_error *err);

/* llmq_job_from_request for a body its caller has parsed already (body
 * borrowed; the gateway decodes a call once and builds its job from that
 * parse). The same checks and errors, but for the bound on the raw text's
 * size: the compact body's limit (d->max_body_bytes, LLMQ_ETOOBIG) holds. */
enum llmq_rc llmq_job_from_request_json(const char *url, const json_t *body,
                                        const struct llmq_job_options *o,
                                        const struct llmq_job_defaults *d, struct llmq_job *out,
                                        struct llmq_error *err);

/* Checks and normalises an endpoint pin (comma-separated names, each 1..64
 * of A-Z a-z 0-9 . _ -; at most LLMQ_JOB_ENDPOINTS_MAX bytes) into buf.
 * LLMQ_EINVAL naming what is wrong. */
enum llmq_rc llmq_job_endpoints_check(const char *list, char *buf, size_t n,
                                      struct llmq_error *err);

/* Estimates job j (borrowed) as if its body named model (borrowed): its
 * body's "model" set to model, counted by llmq_cost_estimate with opt (NULL:
 * defaults; the options j was estimated with), into j->fallback_cost, and
 * j->fallback_model set to a copy of model. A fallback model may count
 * tokens with another encoding and images by other rules (cost.h).
 * Returns LLMQ_OK, or as llmq_cost_estimate (j unchanged). */
enum llmq_rc llmq_job_estimate_as(struct llmq_job *j, const char *model,
                                  const struct llmq_cost_options *opt, struct llmq_error *err);

/* Parses a completion window ("24h", the provider's only one) into *ms.
 * LLMQ_EINVAL naming what is expected. */
enum llmq_rc llmq_job_completion_window_parse(const char *s, long long *ms, struct llmq_error *err);

/* Parses a cache mode ("use", "refresh", "off") into *mode. LLMQ_EINVAL
 * naming what is expected. */
enum llmq_rc llmq_job_cache_parse(const char *s, enum llmq_job_cache *mode, struct llmq_error *err);

/* Frees j's members and zeroes it; NULL is a no-op. */
void llmq_job_clear(struct llmq_job *j);

/* The prompt field a body for url cannot do without ("messages", "input",
 * "prompt"), or NULL when none is checked. Static. */
const char *llmq_job_prompt_field(const char *url);

/* The static spelling of a known Batch url, or NULL when url is not one. */
const char *llmq_job_url_known(const char *url);

/* Writes a new job id, "job-<unix ms hex>-<16 hex random>", into buf (n >= 40).
 * Thread-safe. */
void llmq_job_id_generate(char *buf, size_t n);

/* What a Batch output line says. */
struct llmq_job_output {
    const char *custom_id;  /* the job id (the line shows its custom_id) */
    int status_code;        /* HTTP status; 0: no response (then "response": null) */
    const char *request_id; /* x-request-id of the response; NULL: "" */
    const char *body;       /* response body text (JSON, else kept as a string); NULL */
    size_t body_len;
    const char *error_code;    /* NULL: "error": null */
    const char *error_message; /* NULL: "" */
};

/* Room for an output line's "id" (llmq_job_output_id), with its NUL. */
#define LLMQ_JOB_OUTPUT_ID_MAX (LLMQ_JOB_ID_MAX + 16)

/* Writes an output line's "id" into out (n bytes): "batch_req_" and the
 * response's request id without its own "req_" (OpenAI's are
 * "batch_req_<hex>"), or the job id when there was no request id (NULL or
 * ""). */
void llmq_job_output_id(const char *request_id, const char *job_id, char *out, size_t n);

/* Encodes o as one compact Batch output line ("custom_id": the job id's
 * custom_id, jobs/job_id.h). Returns a new string (free with
 * free) or NULL with err filled (LLMQ_ENOMEM, LLMQ_EINVAL). */
char *llmq_job_output_encode(const struct llmq_job_output *o, struct llmq_error *err);

#endif
