/* The job codec: Batch input lines to validated jobs, and Batch output lines.
 *
 * Validation happens entirely here, before anything reaches Redis, so a batch
 * can be checked whole and rejected whole. Every message names the field at
 * fault; the caller adds the line number. A job owns its strings (see job.h). */
#include "jobs/job.h"
#include "jobs/cache_key.h"
#include "jobs/job_id.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/rng.h"
#include "base/clock.h"
#include "redis/redis.h"

static const char *const known_urls[] = {
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/responses",
    "/v1/completions",
};

/* Generous bound on a line's size before parsing: whitespace may pad a body,
 * but a line this far over the limit is rejected without the cost of parsing. */
#define LINE_SLACK_BYTES 65536

void llmq_job_defaults_init(struct llmq_job_defaults *d)
{
    memset(d, 0, sizeof(*d));
    d->priority = LLMQ_PRIORITY_NORMAL;
    d->max_attempts = LLMQ_JOB_MAX_ATTEMPTS_DEFAULT;
    d->max_body_bytes = LLMQ_JOB_MAX_BODY_BYTES_DEFAULT;
}

const char *llmq_job_url_known(const char *url)
{
    for (size_t i = 0; i < sizeof(known_urls) / sizeof(known_urls[0]); i++)
        if (url != NULL && strcmp(url, known_urls[i]) == 0)
            return known_urls[i];
    return NULL;
}

/* The one RNG (base/rng.h) over a per-thread state seeded once from the
 * kernel: ids need to be unique, not secret, and a syscall per id would cost
 * more than the rest of the enqueue path. */
static unsigned long long next_random(void)
{
    static _Thread_local uint64_t state;
    static _Thread_local int seeded;
    if (!seeded) {
        uint64_t seed;
        if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
            seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&state;
        llmq_rng_seed(&state, seed);
        seeded = 1;
    }
    return (unsigned long long)llmq_rng_next(&state);
}

void llmq_job_id_generate(char *buf, size_t n)
{
    snprintf(buf, n, "job-%llx-%016llx", (long long)llmq_wall_ms(), next_random());
}

void llmq_job_clear(struct llmq_job *j)
{
    if (j == NULL)
        return;
    free(j->id);
    free(j->model);
    free(j->body);
    free(j->tenant);
    free(j->endpoints);
    free(j->user);
    free(j->fallback_model);
    memset(j, 0, sizeof(*j));
}

enum llmq_rc llmq_job_estimate_as(struct llmq_job *j, const char *model,
                                  const struct llmq_cost_options *opt, struct llmq_error *err)
{
    json_error_t jerr;
    json_t *body = json_loadb(j->body, j->body_len, 0, &jerr);
    if (body == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "body: bad JSON at column %d: %s", jerr.column,
                              jerr.text);
    struct llmq_cost cost;
    char *name = strdup(model);
    enum llmq_rc rc = LLMQ_OK;
    if (name == NULL || json_object_set_new(body, "model", json_string(model)) != 0)
        rc = llmq_error_set(err, LLMQ_ENOMEM, "cost: out of memory");
    if (rc == LLMQ_OK)
        rc = llmq_cost_estimate(j->url, body, opt, &cost, err);
    json_decref(body);
    if (rc != LLMQ_OK) {
        free(name);
        return rc;
    }
    free(j->fallback_model);
    j->fallback_model = name;
    j->fallback_cost = cost;
    return LLMQ_OK;
}

/* strdup that reports failure through err. */
static enum llmq_rc dup_str(const char *s, char **out, struct llmq_error *err)
{
    *out = NULL;
    if (s == NULL)
        return LLMQ_OK;
    *out = strdup(s);
    return *out ? LLMQ_OK : llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
}

/* Checks a name option (tenant, user) taken from JSON. */
static enum llmq_rc name_field(const json_t *v, const char *what, const char **out,
                               struct llmq_error *err)
{
    if (!json_is_string(v))
        return llmq_error_set(err, LLMQ_EINVAL, "%s must be a string", what);
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v) || !llmq_name_valid(s))
        return llmq_error_set(err, LLMQ_EINVAL,
                              "%s \"%.60s\" is not a valid name (1..%d bytes, no whitespace, "
                              "'/', '|', '{' or '}')",
                              what, s, LLMQ_JOB_ID_MAX);
    *out = s;
    return LLMQ_OK;
}

/* Reads an integer option in [min, max]. */
static enum llmq_rc int_field(const json_t *v, const char *what, long long min, long long max,
                              long long *out, struct llmq_error *err)
{
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return llmq_error_set(err, LLMQ_EINVAL, "llmq.%s must be an integer in %lld..%lld", what,
                              min, max);
    *out = json_integer_value(v);
    return LLMQ_OK;
}

/* Options a job resolves from the defaults, then the API or the line. */
struct job_opts {
    const char *id;                   /* NULL: generate */
    char id_buf[LLMQ_JOB_ID_MAX + 1]; /* the job id of a line's custom_id (job_id.h) */
    enum llmq_priority priority;
    const char *tenant;
    const char *user;
    long long deadline_ms;
    long long ttl_ms;
    long long completion_window_ms;
    enum llmq_job_cache cache;
    long long cache_ttl_s; /* 0: the default */
    int cache_store_truncated;
    long long max_attempts;
    const char *endpoints; /* checked, normalised: ep_buf or NULL */
    char ep_buf[LLMQ_JOB_ENDPOINTS_MAX + 1];
};

enum llmq_rc llmq_job_endpoints_check(const char *list, char *buf, size_t n, struct llmq_error *err)
{
    size_t len = 0, name = 0;
    if (list == NULL || list[0] == '\0')
        return llmq_error_set(err, LLMQ_EINVAL, "endpoints: expected endpoint names");
    for (const char *p = list;; p++) {
        char c = *p;
        if (c == ',' || c == '\0') {
            if (name == 0 || name > 64)
                return llmq_error_set(err, LLMQ_EINVAL,
                                      "endpoints \"%.60s\": each name is 1..64 bytes", list);
            name = 0;
        } else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '.' || c == '_' || c == '-')) {
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "endpoints \"%.60s\": names hold only A-Z a-z 0-9 . _ -", list);
        } else {
            name++;
        }
        if (len + 1 >= n || len >= LLMQ_JOB_ENDPOINTS_MAX)
            return llmq_error_set(err, LLMQ_EINVAL, "endpoints: more than %d bytes",
                                  LLMQ_JOB_ENDPOINTS_MAX);
        buf[len++] = c;
        if (c == '\0')
            return LLMQ_OK;
    }
}

/* A line's "endpoints": a comma-separated string or an array of names. */
static enum llmq_rc endpoints_field(const json_t *v, struct job_opts *o, struct llmq_error *err)
{
    char joined[LLMQ_JOB_ENDPOINTS_MAX + 2] = "";
    if (json_is_string(v)) {
        snprintf(joined, sizeof(joined), "%s", json_string_value(v));
    } else if (json_is_array(v) && json_array_size(v) > 0) {
        size_t i, len = 0;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (!json_is_string(e))
                return llmq_error_set(err, LLMQ_EINVAL, "llmq.endpoints: names are strings");
            int k = snprintf(joined + len, sizeof(joined) - len, "%s%s", i ? "," : "",
                             json_string_value(e));
            if (k < 0 || (size_t)k >= sizeof(joined) - len)
                return llmq_error_set(err, LLMQ_EINVAL, "llmq.endpoints: more than %d bytes",
                                      LLMQ_JOB_ENDPOINTS_MAX);
            len += (size_t)k;
        }
    } else {
        return llmq_error_set(err, LLMQ_EINVAL,
                              "llmq.endpoints must be a string \"a,b\" or an array of names");
    }
    enum llmq_rc rc = llmq_job_endpoints_check(joined, o->ep_buf, sizeof(o->ep_buf), err);
    o->endpoints = rc == LLMQ_OK ? o->ep_buf : NULL;
    return rc;
}

static void opts_from_defaults(const struct llmq_job_defaults *d, struct job_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->priority = d->priority;
    o->tenant = d->tenant;
    o->user = d->user;
    if (d->endpoints != NULL &&
        llmq_job_endpoints_check(d->endpoints, o->ep_buf, sizeof(o->ep_buf), NULL) == LLMQ_OK)
        o->endpoints = o->ep_buf;
    o->deadline_ms = d->deadline_ms;
    o->ttl_ms = d->ttl_ms;
    o->completion_window_ms = d->completion_window_ms;
    o->cache = d->cache;
    o->cache_ttl_s = d->cache_ttl_s;
    o->cache_store_truncated = d->cache_store_truncated;
    o->max_attempts = d->max_attempts > 0 ? d->max_attempts : LLMQ_JOB_MAX_ATTEMPTS_DEFAULT;
}

/* Applies one member of a line's "llmq" object to o. */
static enum llmq_rc line_option(const char *key, const json_t *v, struct job_opts *o,
                                struct llmq_error *err)
{
    if (strcmp(key, "priority") == 0) {
        if (!json_is_string(v) || llmq_priority_parse(json_string_value(v), &o->priority))
            return llmq_error_set(err, LLMQ_EINVAL, "llmq.priority must be high, normal or low");
        return LLMQ_OK;
    }
    if (strcmp(key, "tenant") == 0)
        return name_field(v, "llmq.tenant", &o->tenant, err);
    if (strcmp(key, "user") == 0)
        return name_field(v, "llmq.user", &o->user, err);
    if (strcmp(key, "deadline_ms") == 0)
        return int_field(v, key, 0, 1LL << 50, &o->deadline_ms, err);
    if (strcmp(key, "ttl_ms") == 0)
        return int_field(v, key, 1, 1LL << 50, &o->ttl_ms, err);
    if (strcmp(key, "max_attempts") == 0)
        return int_field(v, key, 1, LLMQ_JOB_MAX_ATTEMPTS_LIMIT, &o->max_attempts, err);
    if (strcmp(key, "endpoints") == 0)
        return endpoints_field(v, o, err);
    if (strcmp(key, "completion_window") == 0) {
        if (!json_is_string(v))
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "llmq.completion_window must be the string \"24h\"");
        return llmq_job_completion_window_parse(json_string_value(v), &o->completion_window_ms,
                                                err);
    }
    if (strcmp(key, "cache") == 0) {
        if (!json_is_string(v))
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "llmq.cache must be \"use\", \"refresh\" or \"off\"");
        return llmq_job_cache_parse(json_string_value(v), &o->cache, err);
    }
    if (strcmp(key, "cache_ttl_s") == 0)
        return int_field(v, key, 1, LLMQ_JOB_CACHE_TTL_S_MAX, &o->cache_ttl_s, err);
    if (strcmp(key, "cache_store_truncated") == 0) {
        if (!json_is_boolean(v))
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "llmq.cache_store_truncated must be true or false");
        o->cache_store_truncated = json_is_true(v);
        return LLMQ_OK;
    }
    return llmq_error_set(err, LLMQ_EINVAL,
                          "unknown llmq option \"%.40s\" (expected priority, tenant, user, "
                          "deadline_ms, ttl_ms, max_attempts, endpoints, completion_window, "
                          "cache, cache_ttl_s, cache_store_truncated)",
                          key);
}

static enum llmq_rc line_options(const json_t *llmq, struct job_opts *o, struct llmq_error *err)
{
    const char *key;
    json_t *v;
    if (!json_is_object(llmq))
        return llmq_error_set(err, LLMQ_EINVAL, "\"llmq\" must be an object");
    json_object_foreach((json_t *)llmq, key, v)
    {
        enum llmq_rc rc = line_option(key, v, o, err);
        if (rc != LLMQ_OK)
            return rc;
    }
    return LLMQ_OK;
}

const char *llmq_job_prompt_field(const char *url)
{
    if (strcmp(url, "/v1/chat/completions") == 0)
        return "messages";
    if (strcmp(url, "/v1/embeddings") == 0)
        return "input";
    if (strcmp(url, "/v1/completions") == 0)
        return "prompt";
    return NULL;
}

/* Checks the body against its url: a JSON object with a valid model, the
 * endpoint's prompt field, within the size limit. Sets *model (borrowed from
 * body) and *text (new compact JSON) on success. */
static enum llmq_rc check_body(const char *url, const json_t *body,
                               const struct llmq_job_defaults *d, const char **model, char **text,
                               size_t *text_len, struct llmq_error *err)
{
    if (!json_is_object(body))
        return llmq_error_set(err, LLMQ_EINVAL, "\"body\" must be a JSON object");
    const json_t *m = json_object_get(body, "model");
    if (m == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "body has no \"model\"");
    if (!json_is_string(m) || !llmq_name_valid(json_string_value(m)))
        return llmq_error_set(err, LLMQ_EINVAL,
                              "body.model must be a model name (1..200 bytes, no whitespace, "
                              "'/', '|', '{' or '}')");
    const char *need = llmq_job_prompt_field(url);
    if (need != NULL && json_object_get(body, need) == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "body has no \"%s\" (required by %s)", need, url);
    *text = json_dumps(body, JSON_COMPACT);
    if (*text == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "body: out of memory");
    *text_len = strlen(*text);
    if (*text_len > d->max_body_bytes) {
        free(*text);
        *text = NULL;
        return llmq_error_set(err, LLMQ_ETOOBIG, "body is over the size limit (%zu > %zu bytes)",
                              *text_len, d->max_body_bytes);
    }
    *model = json_string_value(m);
    return LLMQ_OK;
}

enum llmq_rc llmq_job_cache_parse(const char *s, enum llmq_job_cache *mode, struct llmq_error *err)
{
    if (s != NULL && strcmp(s, "use") == 0)
        *mode = LLMQ_JOB_CACHE_USE;
    else if (s != NULL && strcmp(s, "refresh") == 0)
        *mode = LLMQ_JOB_CACHE_REFRESH;
    else if (s != NULL && strcmp(s, "off") == 0)
        *mode = LLMQ_JOB_CACHE_OFF;
    else
        return llmq_error_set(err, LLMQ_EINVAL,
                              "cache mode \"%.20s\": expected use, refresh or off",
                              s ? s : "(null)");
    return LLMQ_OK;
}

enum llmq_rc llmq_job_completion_window_parse(const char *s, long long *ms, struct llmq_error *err)
{
    if (s == NULL || strcmp(s, "24h") != 0)
        return llmq_error_set(err, LLMQ_EINVAL,
                              "completion_window \"%.20s\": expected \"24h\" (the provider's "
                              "Batch window)",
                              s ? s : "(null)");
    *ms = LLMQ_JOB_COMPLETION_WINDOW_MS;
    return LLMQ_OK;
}

/* A job that may wait the provider's window (o->completion_window_ms) must
 * be able to: its deadline (deadline_ms, or ttl_ms from now) at least the
 * window away, and no stream (the Batch API answers whole). */
static enum llmq_rc window_check(const json_t *body, const struct job_opts *o,
                                 const struct llmq_job_defaults *d, struct llmq_error *err)
{
    long long w = o->completion_window_ms;
    if (w <= 0)
        return LLMQ_OK;
    if (json_is_true(json_object_get(body, "stream")))
        return llmq_error_set(err, LLMQ_EINVAL,
                              "completion_window: a streamed request (body.stream: true) "
                              "cannot wait for the provider's Batch API");
    if (o->ttl_ms > 0 && o->ttl_ms < w)
        return llmq_error_set(err, LLMQ_EINVAL,
                              "ttl_ms %lld is shorter than the completion window 24h (%lld ms): "
                              "a job marked completion_window must be able to wait it",
                              o->ttl_ms, w);
    if (o->deadline_ms > 0 && d->now_ms > 0 && o->deadline_ms < d->now_ms + w)
        return llmq_error_set(err, LLMQ_EINVAL,
                              "deadline_ms %lld comes before the completion window 24h ends: a "
                              "job marked completion_window must be able to wait it",
                              o->deadline_ms);
    return LLMQ_OK;
}

/* Builds *out from a checked url + body and resolved options. */
static enum llmq_rc job_build(const char *url, const json_t *body, const struct job_opts *o,
                              const struct llmq_job_defaults *d, struct llmq_job *out,
                              struct llmq_error *err)
{
    struct llmq_job j = {0};
    const char *model = NULL;
    enum llmq_rc rc;
    if (o->deadline_ms > 0 && d->now_ms > 0 && o->deadline_ms <= d->now_ms)
        return llmq_error_set(err, LLMQ_EINVAL, "deadline_ms %lld is in the past", o->deadline_ms);
    rc = window_check(body, o, d, err);
    if (rc == LLMQ_OK)
        rc = check_body(url, body, d, &model, &j.body, &j.body_len, err);
    if (rc == LLMQ_OK)
        rc = llmq_cost_estimate(url, body, d->cost, &j.cost, err);
    j.url = url;
    j.priority = o->priority;
    j.deadline_ms = o->deadline_ms;
    j.ttl_ms = o->ttl_ms;
    j.completion_window_ms = o->completion_window_ms;
    j.max_attempts = (int)o->max_attempts;
    j.cache = o->cache;
    if (j.cache == LLMQ_JOB_CACHE_DEFAULT && !d->cache_defaults)
        j.cache = LLMQ_JOB_CACHE_OFF; /* no default can apply: no key to compute */
    if (rc == LLMQ_OK && j.cache != LLMQ_JOB_CACHE_OFF) {
        /* a default's TTL is its own unless the job names one (Redis decides) */
        j.cache_ttl_s = o->cache_ttl_s > 0                  ? o->cache_ttl_s
                        : j.cache == LLMQ_JOB_CACHE_DEFAULT ? 0
                                                            : LLMQ_JOB_CACHE_TTL_S_DEFAULT;
        j.cache_store_truncated = o->cache_store_truncated;
        rc = llmq_cache_key(url, body, j.cache_key, err);
    }
    if (rc == LLMQ_OK)
        rc = dup_str(model, &j.model, err);
    if (rc == LLMQ_OK && o->tenant != NULL && o->tenant[0] != '\0')
        rc = dup_str(o->tenant, &j.tenant, err);
    if (rc == LLMQ_OK && o->user != NULL && o->user[0] != '\0')
        rc = dup_str(o->user, &j.user, err);
    if (rc == LLMQ_OK && o->endpoints != NULL)
        rc = dup_str(o->endpoints, &j.endpoints, err);
    if (rc == LLMQ_OK) {
        char gen[64];
        if (o->id == NULL)
            llmq_job_id_generate(gen, sizeof(gen));
        rc = dup_str(o->id ? o->id : gen, &j.id, err);
    }
    if (rc != LLMQ_OK) {
        llmq_job_clear(&j);
        return rc;
    }
    *out = j;
    return LLMQ_OK;
}

/* Takes a line's custom_id (any string OpenAI takes) as its job id, escaped
 * where a name cannot hold it (job_id.h). */
static enum llmq_rc custom_id_field(const json_t *v, struct job_opts *o, struct llmq_error *err)
{
    if (!json_is_string(v))
        return llmq_error_set(err, LLMQ_EINVAL, "custom_id must be a string");
    enum llmq_rc rc = llmq_job_id_from_custom(json_string_value(v), json_string_length(v),
                                              o->id_buf, sizeof(o->id_buf), err);
    o->id = rc == LLMQ_OK ? o->id_buf : NULL;
    return rc;
}

/* Reads the Batch envelope of a parsed line: custom_id, method, url, body,
 * llmq. Sets *url and *body (borrowed from root). */
static enum llmq_rc line_envelope(const json_t *root, const struct llmq_job_defaults *d,
                                  struct job_opts *o, const char **url, const json_t **body,
                                  struct llmq_error *err)
{
    const char *key;
    json_t *v;
    enum llmq_rc rc = LLMQ_OK;
    if (!json_is_object(root))
        return llmq_error_set(err, LLMQ_EINVAL, "a line must be a JSON object");
    json_object_foreach((json_t *)root, key, v)
    {
        if (strcmp(key, "custom_id") == 0)
            rc = custom_id_field(v, o, err);
        else if (strcmp(key, "method") == 0) {
            if (!json_is_string(v) || strcmp(json_string_value(v), "POST") != 0)
                rc = llmq_error_set(err, LLMQ_EINVAL, "method must be \"POST\"");
        } else if (strcmp(key, "url") == 0) {
            *url = json_is_string(v) ? llmq_job_url_known(json_string_value(v)) : NULL;
            if (*url == NULL)
                rc = llmq_error_set(err, LLMQ_EINVAL,
                                    "unknown url %.60s%s%s (expected /v1/chat/completions, "
                                    "/v1/embeddings, /v1/responses or /v1/completions)",
                                    json_is_string(v) ? "\"" : "",
                                    json_is_string(v) ? json_string_value(v) : "(not a string)",
                                    json_is_string(v) ? "\"" : "");
        } else if (strcmp(key, "body") == 0)
            *body = v;
        else if (strcmp(key, "llmq") != 0)
            rc = llmq_error_set(err, LLMQ_EINVAL,
                                "unknown field \"%.40s\" (expected custom_id, method, url, body, "
                                "llmq)",
                                key);
        if (rc != LLMQ_OK)
            return rc;
    }
    if (*url == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "missing \"url\"");
    if (*body == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "missing \"body\"");
    if (o->id == NULL && !d->generate_ids)
        return llmq_error_set(err, LLMQ_EINVAL,
                              "missing \"custom_id\" (the Batch format requires one; "
                              "--generate-ids makes ids for lines without)");
    const json_t *llmq = json_object_get(root, "llmq");
    return llmq ? line_options(llmq, o, err) : LLMQ_OK;
}

enum llmq_rc llmq_job_from_line(const char *line, size_t len, const struct llmq_job_defaults *d,
                                struct llmq_job *out, struct llmq_error *err)
{
    if (len > d->max_body_bytes * 2 + LINE_SLACK_BYTES)
        return llmq_error_set(err, LLMQ_ETOOBIG,
                              "line of %zu bytes: body is over the size limit "
                              "(%zu bytes)",
                              len, d->max_body_bytes);
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "bad JSON at column %d: %s", jerr.column,
                              jerr.text);
    struct job_opts o;
    const char *url = NULL;
    const json_t *body = NULL;
    opts_from_defaults(d, &o);
    enum llmq_rc rc = line_envelope(root, d, &o, &url, &body, err);
    if (rc == LLMQ_OK)
        rc = job_build(url, body, &o, d, out, err);
    json_decref(root);
    return rc;
}

/* Applies API options over the defaults, checked as a line's options are. */
static enum llmq_rc api_options(const struct llmq_job_options *a, struct job_opts *o,
                                struct llmq_error *err)
{
    if (a == NULL)
        return LLMQ_OK;
    if (a->job_id != NULL && !llmq_name_valid(a->job_id))
        return llmq_error_set(err, LLMQ_EINVAL, "job id \"%.60s\" is not a valid name", a->job_id);
    if ((a->tenant && a->tenant[0] && !llmq_name_valid(a->tenant)) ||
        (a->user && a->user[0] && !llmq_name_valid(a->user)))
        return llmq_error_set(err, LLMQ_EINVAL, "tenant and user must be valid names");
    if (a->priority != LLMQ_PRIORITY_HIGH && a->priority != LLMQ_PRIORITY_NORMAL &&
        a->priority != LLMQ_PRIORITY_LOW)
        return llmq_error_set(err, LLMQ_EINVAL, "unknown priority %d", (int)a->priority);
    if (a->deadline_ms < 0 || a->ttl_ms < 0 || a->max_attempts < 0 ||
        a->max_attempts > LLMQ_JOB_MAX_ATTEMPTS_LIMIT)
        return llmq_error_set(err, LLMQ_EINVAL,
                              "deadline_ms, ttl_ms >= 0 and max_attempts in "
                              "0..%d",
                              LLMQ_JOB_MAX_ATTEMPTS_LIMIT);
    if (a->endpoints != NULL) {
        enum llmq_rc rc = llmq_job_endpoints_check(a->endpoints, o->ep_buf, sizeof(o->ep_buf), err);
        if (rc != LLMQ_OK)
            return rc;
        o->endpoints = o->ep_buf;
    }
    if (a->completion_window != NULL) {
        enum llmq_rc rc =
            llmq_job_completion_window_parse(a->completion_window, &o->completion_window_ms, err);
        if (rc != LLMQ_OK)
            return rc;
    }
    if (a->cache != NULL) {
        enum llmq_rc rc = llmq_job_cache_parse(a->cache, &o->cache, err);
        if (rc != LLMQ_OK)
            return rc;
    }
    if (a->cache_ttl_s < 0 || a->cache_ttl_s > LLMQ_JOB_CACHE_TTL_S_MAX)
        return llmq_error_set(err, LLMQ_EINVAL, "cache_ttl_s must be in 0..%lld",
                              LLMQ_JOB_CACHE_TTL_S_MAX);
    if (a->cache_ttl_s > 0)
        o->cache_ttl_s = a->cache_ttl_s;
    if (a->cache_store_truncated)
        o->cache_store_truncated = 1;
    o->id = a->job_id;
    o->priority = a->priority;
    if (a->tenant != NULL)
        o->tenant = a->tenant;
    if (a->user != NULL)
        o->user = a->user;
    if (a->deadline_ms > 0)
        o->deadline_ms = a->deadline_ms;
    if (a->ttl_ms > 0)
        o->ttl_ms = a->ttl_ms;
    if (a->max_attempts > 0)
        o->max_attempts = a->max_attempts;
    return LLMQ_OK;
}

enum llmq_rc llmq_job_from_request(const char *url, const char *body,
                                   const struct llmq_job_options *a,
                                   const struct llmq_job_defaults *d, struct llmq_job *out,
                                   struct llmq_error *err)
{
    if (llmq_job_url_known(url) == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "unknown url \"%.60s\"", url ? url : "(null)");
    if (body == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "missing body");
    size_t len = strlen(body);
    if (len > d->max_body_bytes * 2 + LINE_SLACK_BYTES)
        return llmq_error_set(err, LLMQ_ETOOBIG, "body is over the size limit (%zu bytes)",
                              d->max_body_bytes);
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "body: bad JSON at column %d: %s", jerr.column,
                              jerr.text);
    enum llmq_rc rc = llmq_job_from_request_json(url, root, a, d, out, err);
    json_decref(root);
    return rc;
}

enum llmq_rc llmq_job_from_request_json(const char *url, const json_t *body,
                                        const struct llmq_job_options *a,
                                        const struct llmq_job_defaults *d, struct llmq_job *out,
                                        struct llmq_error *err)
{
    const char *known = llmq_job_url_known(url);
    if (known == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "unknown url \"%.60s\"", url ? url : "(null)");
    if (body == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "missing body");
    struct job_opts o;
    opts_from_defaults(d, &o);
    enum llmq_rc rc = api_options(a, &o, err);
    if (rc != LLMQ_OK)
        return rc;
    return job_build(known, body, &o, d, out, err);
}

void llmq_job_output_id(const char *request_id, const char *job_id, char *out, size_t n)
{
    const char *rid = request_id != NULL && request_id[0] ? request_id : NULL;
    if (rid != NULL && strncmp(rid, "req_", 4) == 0 && rid[4] != '\0')
        rid += 4; /* "batch_req_" + "req_..." said req twice */
    snprintf(out, n, "batch_req_%s", rid != NULL ? rid : job_id);
}

/* The response object of an output line, or json_null() when there was none. */
static json_t *output_response(const struct llmq_job_output *o)
{
    if (o->status_code <= 0)
        return json_null();
    json_t *body = NULL;
    if (o->body != NULL) {
        body = json_loadb(o->body, o->body_len, 0, NULL);
        if (body == NULL) /* not JSON: keep the text (when UTF-8) so little is lost */
            body = json_stringn(o->body, o->body_len);
    }
    return json_pack("{s:i, s:s, s:o}", "status_code", o->status_code, "request_id",
                     o->request_id ? o->request_id : "", "body", body ? body : json_null());
}

char *llmq_job_output_encode(const struct llmq_job_output *o, struct llmq_error *err)
{
    if (o == NULL || o->custom_id == NULL) {
        llmq_error_set(err, LLMQ_EINVAL, "output line: no custom_id");
        return NULL;
    }
    char id[LLMQ_JOB_OUTPUT_ID_MAX], custom_id[LLMQ_JOB_ID_MAX + 1];
    llmq_job_output_id(o->request_id, o->custom_id, id, sizeof(id));
    llmq_job_id_to_custom(o->custom_id, custom_id, sizeof(custom_id));
    json_t *error = o->error_code == NULL
                        ? json_null()
                        : json_pack("{s:s, s:s}", "code", o->error_code, "message",
                                    o->error_message ? o->error_message : "");
    json_t *root = json_pack("{s:s, s:s, s:o, s:o}", "id", id, "custom_id", custom_id, "response",
                             output_response(o), "error", error);
    char *line = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (line == NULL)
        llmq_error_set(err, LLMQ_ENOMEM, "output line: cannot encode");
    return line;
}
