/* llmq-worker configuration parsing; see config.h. */
#include "config.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/parse_int.h"
#include "redis/redis.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: llmq-worker [options]\n\n"
            "Takes jobs from Redis when the shared limiter grants their RPM/TPM budget and\n"
            "calls OpenAI (or any OpenAI-compatible API) with them.\n\n"
            "  --redis URL             redis://[user:password@]host:port/db (env LLMQ_REDIS_URL)\n"
            "  --redis-timeout-ms MS   a Redis command unanswered this long (a blocking read:\n"
            "                          its block plus this) drops the connection (default 5000)\n"
            "  --account NAME          account to serve; repeatable (env LLMQ_ACCOUNT; default\n"
            "                          'default')\n"
            "  --api-key-file PATH     key of the preceding --account (else OPENAI_API_KEY)\n"
            "  --base-url URL          API base (env OPENAI_BASE_URL; default\n"
            "                          https://api.openai.com/v1; '/v1' is optional)\n"
            "  --azure-api-version V   Azure OpenAI: base URL is the deployment URL, api-key auth\n"
            "  --endpoint-key NAME=ENV the key of endpoint NAME (`llmq endpoints`) is in the\n"
            "                          environment variable ENV; repeatable. The worker takes\n"
            "                          jobs only for endpoints it holds a key for (and for\n"
            "                          models without endpoints when it has OPENAI_API_KEY)\n"
            "  --endpoint-key-file NAME=PATH  the same, the key read from file PATH\n"
            "  --config PATH           more options from PATH: one per line, `option value`\n"
            "                          or `option = value` (names as the flags, no '--');\n"
            "                          '#' starts a comment; flags after --config win\n"
            "  --concurrency N         requests in flight (default 256)\n"
            "  --timeout-ms MS         whole request timeout (default 600000)\n"
            "  --connect-timeout-ms MS (default 10000)\n"
            "  --max-attempts N        for jobs that set none (default 5)\n"
            "  --backoff-base-ms MS    first retry's backoff ceiling (default 1000)\n"
            "  --backoff-cap-ms MS     largest backoff ceiling (default 60000)\n"
            "  --visibility-ms MS      reclaim jobs of workers silent this long (default 60000)\n"
            "  --grace-ms MS           on SIGTERM, time to finish requests (default 30000)\n"
            "  --consumer NAME         consumer name (default host-pid)\n"
            "  --ca-file PATH          CA bundle for TLS verification (always on)\n"
            "  --http1                 do not negotiate HTTP/2\n"
            "  --log-level L           debug|info|warn|error (env LLMQ_LOG_LEVEL; default info)\n"
            "  --log-format F          text|json (env LLMQ_LOG_FORMAT; default text)\n"
            "  --exit-when-idle-ms MS  exit 0 after MS with no job to do (batch runs, tests);\n"
            "                          exit 1 if Redis was never reached\n"
            "  --max-response-bytes N  longest response body accepted (default 16777216)\n"
            "  --stream-coalesce-ms MS a streamed answer's events are relayed together at most\n"
            "                          this often (default 20; 0: each event at once)\n"
            "  --spool-dir DIR         results Redis could not take are kept here at exit and\n"
            "                          replayed at the next start (env LLMQ_SPOOL_DIR; default\n"
            "                          /var/tmp/llmq-spool)\n"
            "  --spool-max-jobs N      results kept in memory while Redis is away; at N no new\n"
            "                          jobs are taken (default 10000)\n"
            "  --offload-lease-ms MS   a step of a provider batch (llmq offload) is this worker's\n"
            "                          for MS; a worker that dies is taken over after it\n"
            "                          (default 60000; renewed while a provider call runs)\n"
            "  --offload-max-file-bytes N  a provider batch's output or error file larger\n"
            "                          than N bytes is not downloaded: the batch ends, its\n"
            "                          jobs staged again with an attempt (default 1073741824)\n"
            "  --metrics-port N        serve /metrics, /healthz, /readyz on port N (env\n"
            "                          LLMQ_METRICS_PORT; default 0: off)\n"
            "  --metrics-host ADDR     numeric address to listen on (env LLMQ_METRICS_HOST;\n"
            "                          default 0.0.0.0, so a pod's scraper and probes reach it)\n"
            "  --version               print the version and exit\n"
            "  --help                  this text\n"
            "SIGTERM or SIGINT: stop taking jobs, finish calls within --grace-ms, hand back\n"
            "the rest; a second signal hands back at once.\n"
            "Exit codes: 0 clean stop, 1 runtime failure, 2 invalid configuration (bad\n"
            "option, malformed Redis URL).\n");
}

static int bad(const char *setting, const char *why, const char *value)
{
    fprintf(stderr, "llmq-worker: invalid %s: %s%s%s%s\n", setting, why, value ? " (got '" : "",
            value ? value : "", value ? "')" : "");
    return 2;
}

/* An integer option (a count, a port, a duration in ms) in min..max into
 * *out; 0, or 2 after saying what is wrong. */
static int parse_int_option(const char *setting, const char *s, int64_t min, int64_t max,
                            int64_t *out)
{
    int64_t v = 0;
    if (llmq_parse_int64(s, min, max, &v) != 0) {
        char why[96];
        snprintf(why, sizeof(why), "expected an integer in %lld..%lld", (long long)min,
                 (long long)max);
        return bad(setting, why, s);
    }
    *out = v;
    return 0;
}

/* Reads a key file: its first line, trimmed. */
static int read_key_file(const char *path, char **out)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return bad("--api-key-file", "cannot read the file", path);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    char *p = buf;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t len = strlen(p);
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
        p[--len] = '\0';
    if (len == 0)
        return bad("--api-key-file", "the file holds no key", path);
    *out = strdup(p);
    explicit_bzero(buf, sizeof(buf));
    return *out ? 0 : 1;
}

static void key_id(const char *key, char out[17])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)key, strlen(key), md);
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int set_base_url(struct llmq_worker_config *cfg, const char *url)
{
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return bad("--base-url", "must start with http:// or https://", url);
    size_t len = strlen(url);
    if (len >= sizeof(cfg->base_url))
        return bad("--base-url", "too long", NULL);
    memcpy(cfg->base_url, url, len + 1);
    /* "https://api.openai.com/v1" and ".../v1/" and "..." all mean the same. */
    while (len > 0 && cfg->base_url[len - 1] == '/')
        cfg->base_url[--len] = '\0';
    if (len >= 3 && strcmp(cfg->base_url + len - 3, "/v1") == 0)
        cfg->base_url[len - 3] = '\0';
    return 0;
}

/* A numeric address only: the worker never resolves names on its loop. */
static int set_metrics_host(struct llmq_worker_config *cfg, const char *host)
{
    unsigned char addr[sizeof(struct in6_addr)];
    if (strlen(host) >= sizeof(cfg->metrics_host) ||
        (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1))
        return bad("--metrics-host", "expected a numeric IPv4 or IPv6 address", host);
    snprintf(cfg->metrics_host, sizeof(cfg->metrics_host), "%s", host);
    return 0;
}

/* An endpoint's name as `llmq endpoints` allows it: 1..64 letters, digits,
 * '.', '_', '-'. */
static int endpoint_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > LLMQ_WORKER_ENDPOINT_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* --endpoint-key NAME=ENV (from_file 0) or --endpoint-key-file NAME=PATH. */
static int add_endpoint_key(struct llmq_worker_config *cfg, const char *arg, int from_file)
{
    const char *opt = from_file ? "--endpoint-key-file" : "--endpoint-key";
    const char *eq = strchr(arg, '=');
    if (eq == NULL || !endpoint_name_ok(arg, (size_t)(eq - arg)) || eq[1] == '\0')
        return bad(opt,
                   from_file ? "expected NAME=PATH (NAME: 1..64 of A-Z a-z 0-9 . _ -)"
                             : "expected NAME=ENV_VAR (NAME: 1..64 of A-Z a-z 0-9 . _ -)",
                   arg);
    if (cfg->n_endpoint_keys == LLMQ_WORKER_MAX_ENDPOINTS)
        return bad(opt, "too many endpoints (at most 64)", NULL);
    struct llmq_worker_endpoint_key *k = &cfg->endpoint_keys[cfg->n_endpoint_keys];
    memcpy(k->name, arg, (size_t)(eq - arg));
    k->name[eq - arg] = '\0';
    if (llmq_worker_endpoint_key(cfg, k->name) != NULL)
        return bad(opt, "a key for this endpoint was given already", k->name);
    if (from_file) {
        int rc = read_key_file(eq + 1, &k->key);
        if (rc != 0)
            return rc;
    } else {
        const char *v = getenv(eq + 1);
        if (v == NULL || v[0] == '\0')
            return bad(opt, "the environment variable is unset or empty", eq + 1);
        k->key = strdup(v);
        if (k->key == NULL)
            return 1;
    }
    key_id(k->key, k->key_id);
    cfg->n_endpoint_keys++;
    return 0;
}

const struct llmq_worker_endpoint_key *
llmq_worker_endpoint_key(const struct llmq_worker_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->n_endpoint_keys; i++)
        if (strcmp(cfg->endpoint_keys[i].name, name) == 0)
            return &cfg->endpoint_keys[i];
    return NULL;
}

static int add_account(struct llmq_worker_config *cfg, const char *name)
{
    if (!llmq_name_valid(name))
        return bad("--account", "1..200 bytes without spaces, '/', '|', '{' or '}'", name);
    if (cfg->n_accounts == LLMQ_WORKER_MAX_ACCOUNTS)
        return bad("--account", "too many accounts (at most 16)", name);
    struct llmq_worker_account *a = &cfg->accounts[cfg->n_accounts++];
    snprintf(a->name, sizeof(a->name), "%s", name);
    return 0;
}

enum {
    O_REDIS = 1,
    O_ACCOUNT,
    O_KEYFILE,
    O_BASE,
    O_AZURE,
    O_CONC,
    O_TIMEOUT,
    O_CTIMEOUT,
    O_ATTEMPTS,
    O_BBASE,
    O_BCAP,
    O_VIS,
    O_GRACE,
    O_CONSUMER,
    O_CA,
    O_HTTP1,
    O_LLEVEL,
    O_LFORMAT,
    O_IDLE,
    O_MAXRESP,
    O_SPOOLDIR,
    O_SPOOLMAX,
    O_OFFLEASE,
    O_OFFMAXFILE,
    O_MPORT,
    O_MHOST,
    O_RTIMEOUT,
    O_EPKEY,
    O_EPKEYFILE,
    O_CONFIG,
    O_COALESCE
};

static const struct option options[] = {
    {"redis", required_argument, NULL, O_REDIS},
    {"redis-timeout-ms", required_argument, NULL, O_RTIMEOUT},
    {"account", required_argument, NULL, O_ACCOUNT},
    {"api-key-file", required_argument, NULL, O_KEYFILE},
    {"base-url", required_argument, NULL, O_BASE},
    {"azure-api-version", required_argument, NULL, O_AZURE},
    {"concurrency", required_argument, NULL, O_CONC},
    {"timeout-ms", required_argument, NULL, O_TIMEOUT},
    {"connect-timeout-ms", required_argument, NULL, O_CTIMEOUT},
    {"max-attempts", required_argument, NULL, O_ATTEMPTS},
    {"backoff-base-ms", required_argument, NULL, O_BBASE},
    {"backoff-cap-ms", required_argument, NULL, O_BCAP},
    {"visibility-ms", required_argument, NULL, O_VIS},
    {"grace-ms", required_argument, NULL, O_GRACE},
    {"consumer", required_argument, NULL, O_CONSUMER},
    {"ca-file", required_argument, NULL, O_CA},
    {"http1", no_argument, NULL, O_HTTP1},
    {"log-level", required_argument, NULL, O_LLEVEL},
    {"log-format", required_argument, NULL, O_LFORMAT},
    {"exit-when-idle-ms", required_argument, NULL, O_IDLE},
    {"max-response-bytes", required_argument, NULL, O_MAXRESP},
    {"stream-coalesce-ms", required_argument, NULL, O_COALESCE},
    {"spool-dir", required_argument, NULL, O_SPOOLDIR},
    {"spool-max-jobs", required_argument, NULL, O_SPOOLMAX},
    {"offload-lease-ms", required_argument, NULL, O_OFFLEASE},
    {"offload-max-file-bytes", required_argument, NULL, O_OFFMAXFILE},
    {"metrics-port", required_argument, NULL, O_MPORT},
    {"metrics-host", required_argument, NULL, O_MHOST},
    {"endpoint-key", required_argument, NULL, O_EPKEY},
    {"endpoint-key-file", required_argument, NULL, O_EPKEYFILE},
    {"config", required_argument, NULL, O_CONFIG},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void set_defaults(struct llmq_worker_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->concurrency = 256;
    cfg->request_timeout_ms = 600000;
    cfg->connect_timeout_ms = 10000;
    cfg->redis_timeout_ms = LLMQ_REDIS_COMMAND_TIMEOUT_MS_DEFAULT;
    cfg->max_attempts = 5;
    cfg->backoff_base_ms = 1000;
    cfg->backoff_cap_ms = 60000;
    cfg->visibility_ms = 60000;
    cfg->stream_coalesce_ms = LLMQ_WORKER_STREAM_COALESCE_MS_DEFAULT;
    cfg->max_response_bytes = 16 << 20;
    snprintf(cfg->spool_dir, sizeof(cfg->spool_dir), "%s", "/var/tmp/llmq-spool");
    cfg->spool_max_jobs = 10000;
    cfg->offload_lease_ms = 60000;
    cfg->offload_max_file_bytes = (int64_t)1 << 30;
    cfg->grace_ms = 30000;
    cfg->log_level = LLMQ_LOG_INFO;
    snprintf(cfg->metrics_host, sizeof(cfg->metrics_host), "0.0.0.0");
    char host[200] = "worker";
    gethostname(host, sizeof(host) - 1);
    snprintf(cfg->consumer, sizeof(cfg->consumer), "%s-%d", host, (int)getpid());
}

static int read_config_file(struct llmq_worker_config *cfg, const char *path,
                            const char **redis_url, const char **base_url);

/* Applies one option; returns 0 or an exit code. */
static int apply(struct llmq_worker_config *cfg, int opt, const char *arg, const char **redis_url,
                 const char **base_url)
{
    int64_t v = 0;
    int rc = 0;
    switch (opt) {
    case O_REDIS:
        *redis_url = arg;
        break;
    case O_ACCOUNT:
        rc = add_account(cfg, arg);
        break;
    case O_KEYFILE:
        if (cfg->n_accounts == 0 && (rc = add_account(cfg, "default")) != 0)
            return rc;
        if (cfg->accounts[cfg->n_accounts - 1].api_key != NULL)
            return bad("--api-key-file", "given twice for one account", arg);
        rc = read_key_file(arg, &cfg->accounts[cfg->n_accounts - 1].api_key);
        break;
    case O_BASE:
        *base_url = arg;
        break;
    case O_AZURE:
        snprintf(cfg->azure_api_version, sizeof(cfg->azure_api_version), "%s", arg);
        break;
    case O_CONC:
        rc = parse_int_option("--concurrency", arg, 1, 100000, &v);
        cfg->concurrency = (int)v;
        break;
    case O_TIMEOUT:
        rc = parse_int_option("--timeout-ms", arg, 100, 86400000, &cfg->request_timeout_ms);
        break;
    case O_CTIMEOUT:
        rc = parse_int_option("--connect-timeout-ms", arg, 10, 600000, &cfg->connect_timeout_ms);
        break;
    case O_RTIMEOUT:
        rc = parse_int_option("--redis-timeout-ms", arg, 100, 600000, &v);
        cfg->redis_timeout_ms = (int)v;
        break;
    case O_ATTEMPTS:
        rc = parse_int_option("--max-attempts", arg, 1, 1000, &v);
        cfg->max_attempts = (int)v;
        break;
    case O_BBASE:
        rc = parse_int_option("--backoff-base-ms", arg, 1, 3600000, &cfg->backoff_base_ms);
        break;
    case O_BCAP:
        rc = parse_int_option("--backoff-cap-ms", arg, 1, 86400000, &cfg->backoff_cap_ms);
        break;
    case O_VIS:
        rc = parse_int_option("--visibility-ms", arg, 100, 86400000, &cfg->visibility_ms);
        break;
    case O_GRACE:
        rc = parse_int_option("--grace-ms", arg, 0, 3600000, &cfg->grace_ms);
        break;
    case O_IDLE:
        rc = parse_int_option("--exit-when-idle-ms", arg, 1, 86400000, &v);
        cfg->exit_when_idle_ms = (int)v;
        break;
    case O_MAXRESP:
        rc = parse_int_option("--max-response-bytes", arg, 1024, (int64_t)1 << 32,
                              &cfg->max_response_bytes);
        break;
    case O_COALESCE:
        rc = parse_int_option("--stream-coalesce-ms", arg, 0, 1000, &cfg->stream_coalesce_ms);
        break;
    case O_SPOOLDIR:
        if (arg[0] == '\0' || strlen(arg) >= sizeof(cfg->spool_dir) - 300)
            return bad("--spool-dir", "expected a directory path (at most 700 bytes)", arg);
        snprintf(cfg->spool_dir, sizeof(cfg->spool_dir), "%s", arg);
        break;
    case O_OFFLEASE:
        rc = parse_int_option("--offload-lease-ms", arg, 100, 3600000, &cfg->offload_lease_ms);
        break;
    case O_OFFMAXFILE:
        rc = parse_int_option("--offload-max-file-bytes", arg, 1024, (int64_t)1 << 40,
                              &cfg->offload_max_file_bytes);
        break;
    case O_SPOOLMAX:
        rc = parse_int_option("--spool-max-jobs", arg, 1, 10000000, &v);
        cfg->spool_max_jobs = (int)v;
        break;
    case O_MPORT:
        rc = parse_int_option("--metrics-port", arg, 0, 65535, &v);
        cfg->metrics_port = (int)v;
        break;
    case O_MHOST:
        rc = set_metrics_host(cfg, arg);
        break;
    case O_EPKEY:
    case O_EPKEYFILE:
        rc = add_endpoint_key(cfg, arg, opt == O_EPKEYFILE);
        break;
    case O_CONFIG:
        rc = read_config_file(cfg, arg, redis_url, base_url);
        break;
    case O_CONSUMER:
        if (!llmq_name_valid(arg))
            return bad("--consumer", "1..200 bytes without spaces, '/', '|', '{' or '}'", arg);
        snprintf(cfg->consumer, sizeof(cfg->consumer), "%s", arg);
        break;
    case O_CA:
        snprintf(cfg->ca_file, sizeof(cfg->ca_file), "%s", arg);
        break;
    case O_HTTP1:
        cfg->http1_only = 1;
        break;
    case O_LLEVEL:
        if (llmq_log_level_parse(arg, &cfg->log_level) != 0)
            return bad("--log-level", "expected debug, info, warn or error", arg);
        break;
    case O_LFORMAT:
        if (strcmp(arg, "text") != 0 && strcmp(arg, "json") != 0)
            return bad("--log-format", "expected text or json", arg);
        cfg->log_format = strcmp(arg, "json") == 0 ? LLMQ_LOG_JSON : LLMQ_LOG_TEXT;
        break;
    default:
        return bad("option", "unknown (see --help)", NULL);
    }
    return rc;
}

/* Values of a config file's options: they must outlive the parse (the
 * Redis and base URL are read after every option), so they are kept here
 * until the process ends. */
static char *config_values[256];
static int n_config_values;

/* Reads options from the config file at path: one per line, "name value"
 * or "name = value" (the flag without its "--"; a flag without a value
 * alone), '#' to the end of a line a comment. Returns 0 or an exit code
 * after naming the line. */
static int read_config_file(struct llmq_worker_config *cfg, const char *path,
                            const char **redis_url, const char **base_url)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return bad("--config", "cannot read the file", path);
    char line[4096];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char *p = line + strspn(line, " \t\r\n");
        if (*p == '\0')
            continue;
        char *name = p;
        p += strcspn(p, " \t\r\n=");
        char *value = p + strspn(p, " \t");
        *p = '\0';
        if (*value == '=')
            value++;
        value += strspn(value, " \t");
        size_t vlen = strcspn(value, "\r\n");
        while (vlen > 0 && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t'))
            vlen--;
        value[vlen] = '\0';
        const struct option *o = options;
        while (o->name != NULL && strcmp(o->name, name) != 0)
            o++;
        char where[64];
        snprintf(where, sizeof(where), "line %d", lineno);
        if (o->name == NULL || o->val == O_CONFIG || o->val == 'h' || o->val == 'V') {
            rc = bad("--config", "unknown option", name);
            fprintf(stderr, "llmq-worker: (%s, %s)\n", path, where);
            break;
        }
        if ((o->has_arg == required_argument) != (vlen > 0)) {
            rc = bad("--config", o->has_arg ? "the option needs a value" : "the option takes none",
                     name);
            fprintf(stderr, "llmq-worker: (%s, %s)\n", path, where);
            break;
        }
        if (n_config_values == (int)(sizeof(config_values) / sizeof(config_values[0]))) {
            rc = bad("--config", "more than 256 options", path);
            break;
        }
        char *kept = strdup(value);
        if (kept == NULL) {
            rc = 1;
            break;
        }
        config_values[n_config_values++] = kept;
        rc = apply(cfg, o->val, kept, redis_url, base_url);
        if (rc != 0)
            fprintf(stderr, "llmq-worker: (%s, %s)\n", path, where);
    }
    explicit_bzero(line, sizeof(line));
    fclose(f);
    return rc;
}

/* The serves list of cfg (config.h). */
static void build_serves(struct llmq_worker_config *cfg)
{
    size_t len = 0;
    cfg->serves[0] = '\0';
    int implicit = cfg->n_accounts > 0;
    for (int i = 0; i < cfg->n_accounts; i++)
        implicit = implicit && cfg->accounts[i].api_key != NULL;
    for (int i = 0; i < cfg->n_endpoint_keys; i++) {
        int n = snprintf(cfg->serves + len, sizeof(cfg->serves) - len, "%s%s",
                         i > 0 || implicit ? "," : "", cfg->endpoint_keys[i].name);
        if (n > 0)
            len += (size_t)n;
    }
}

int llmq_worker_config_parse(struct llmq_worker_config *cfg, int argc, char **argv)
{
    set_defaults(cfg);
    const char *redis_url = getenv("LLMQ_REDIS_URL");
    const char *base_url = getenv("OPENAI_BASE_URL");
    const char *env;
    int rc, opt;
    if ((env = getenv("LLMQ_LOG_LEVEL")) != NULL && env[0] &&
        (rc = apply(cfg, O_LLEVEL, env, &redis_url, &base_url)))
        return rc;
    if ((env = getenv("LLMQ_LOG_FORMAT")) != NULL && env[0] &&
        (rc = apply(cfg, O_LFORMAT, env, &redis_url, &base_url)))
        return rc;
    if ((env = getenv("LLMQ_SPOOL_DIR")) != NULL && env[0] &&
        (rc = apply(cfg, O_SPOOLDIR, env, &redis_url, &base_url)))
        return rc;
    if ((env = getenv("LLMQ_METRICS_PORT")) != NULL && env[0] &&
        (rc = apply(cfg, O_MPORT, env, &redis_url, &base_url)))
        return rc;
    if ((env = getenv("LLMQ_METRICS_HOST")) != NULL && env[0] &&
        (rc = apply(cfg, O_MHOST, env, &redis_url, &base_url)))
        return rc;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return 1;
        }
        if (opt == 'V') {
            printf("llmq-worker %s\n", LLMQ_VERSION);
            return 1;
        }
        if (opt == '?') {
            fprintf(stderr, "llmq-worker: invalid option (see --help)\n");
            return 2;
        }
        if ((rc = apply(cfg, opt, optarg, &redis_url, &base_url)) != 0)
            return rc;
    }
    if (optind < argc)
        return bad("argument", "llmq-worker takes no positional arguments", argv[optind]);
    if (cfg->n_accounts == 0) {
        env = getenv("LLMQ_ACCOUNT");
        if ((rc = add_account(cfg, env && env[0] ? env : "default")) != 0)
            return rc;
    }
    struct llmq_error err = {0};
    if (llmq_redis_url_parse(redis_url && redis_url[0] ? redis_url : LLMQ_REDIS_URL_DEFAULT,
                             &cfg->redis, &err) != LLMQ_OK)
        return bad("--redis", err.msg, NULL);
    if ((rc = set_base_url(cfg, base_url && base_url[0] ? base_url : "https://api.openai.com/v1")))
        return rc;
    const char *env_key = getenv("OPENAI_API_KEY");
    for (int i = 0; i < cfg->n_accounts; i++) {
        struct llmq_worker_account *a = &cfg->accounts[i];
        if (a->api_key == NULL && env_key != NULL && env_key[0] != '\0')
            a->api_key = strdup(env_key);
        if (a->api_key == NULL && cfg->n_endpoint_keys == 0)
            return bad("API key",
                       "set OPENAI_API_KEY, --api-key-file or --endpoint-key for account", a->name);
        if (a->api_key != NULL)
            key_id(a->api_key, a->key_id);
    }
    build_serves(cfg);
    if (cfg->backoff_cap_ms < cfg->backoff_base_ms)
        return bad("--backoff-cap-ms", "must not be below --backoff-base-ms", NULL);
    return 0;
}

void llmq_worker_config_free(struct llmq_worker_config *cfg)
{
    for (int i = 0; i < cfg->n_endpoint_keys; i++) {
        struct llmq_worker_endpoint_key *k = &cfg->endpoint_keys[i];
        if (k->key != NULL) {
            explicit_bzero(k->key, strlen(k->key));
            free(k->key);
            k->key = NULL;
        }
    }
    cfg->n_endpoint_keys = 0;
    for (int i = 0; i < cfg->n_accounts; i++) {
        if (cfg->accounts[i].api_key != NULL) {
            explicit_bzero(cfg->accounts[i].api_key, strlen(cfg->accounts[i].api_key));
            free(cfg->accounts[i].api_key);
            cfg->accounts[i].api_key = NULL;
        }
    }
}

int llmq_worker_request_url(const struct llmq_worker_config *cfg, const char *path, char *buf,
                            size_t n)
{
    int len;
    if (cfg->azure_api_version[0] != '\0') {
        /* Azure: <deployment URL>/chat/completions?api-version=V */
        const char *rest = strncmp(path, "/v1/", 4) == 0 ? path + 3 : path;
        len = snprintf(buf, n, "%s%s?api-version=%s", cfg->base_url, rest, cfg->azure_api_version);
    } else {
        len = snprintf(buf, n, "%s%s", cfg->base_url, path);
    }
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

int llmq_worker_endpoint_url(const char *base_url, const char *api_version, const char *deployment,
                             const char *path, char *buf, size_t n)
{
    int len;
    if (api_version != NULL && api_version[0] != '\0') {
        /* Azure: <resource>/openai/deployments/<dep>/chat/completions?api-version=V */
        const char *rest = strncmp(path, "/v1/", 4) == 0 ? path + 3 : path;
        int has_dep = strstr(base_url, "/openai/deployments/") != NULL;
        len = snprintf(buf, n, "%s%s%s%s?api-version=%s", base_url,
                       has_dep ? "" : "/openai/deployments/", has_dep ? "" : deployment, rest,
                       api_version);
    } else {
        len = snprintf(buf, n, "%s%s", base_url, path);
    }
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

int llmq_worker_endpoint_api_url(const char *base_url, const char *api_version, const char *path,
                                 char *buf, size_t n)
{
    int len;
    if (api_version != NULL && api_version[0] != '\0') {
        const char *dep = strstr(base_url, "/openai/");
        int root = dep != NULL ? (int)(dep - base_url) : (int)strlen(base_url);
        const char *rest = strncmp(path, "/v1/", 4) == 0 ? path + 3 : path;
        len = snprintf(buf, n, "%.*s/openai%s%sapi-version=%s", root, base_url, rest,
                       strchr(rest, '?') != NULL ? "&" : "?", api_version);
    } else {
        len = snprintf(buf, n, "%s%s", base_url, path);
    }
    return len < 0 || (size_t)len >= n ? -1 : 0;
}
