/* Command-line flags of openai-sim. Every flag has a default that makes the
 * server a well-behaved, unlimited, zero-latency OpenAI; each misbehaviour is
 * opt-in. Flags take their value as "--flag V" or "--flag=V". A bad flag
 * produces exactly one line on stderr and a -1 return (main exits 2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static const char usage_text[] =
    "usage: openai-sim [flags]\n"
    "OpenAI-compatible test server: /v1/chat/completions, /v1/completions,\n"
    "/v1/embeddings, /v1/responses (streamed with stream: true); per-(key, model)\n"
    "RPM/TPM over an exact sliding window; faults.\n"
    "\n"
    "listening:\n"
    "  --host ADDR              IPv4 address to bind (default 127.0.0.1)\n"
    "  --port N                 port, 0 = pick a free one (default 0)\n"
    "  --port-file FILE         write the bound port there once listening\n"
    "requests:\n"
    "  --api-key KEY            require 'Authorization: Bearer KEY' or 'api-key: KEY' (401)\n"
    "  --models A,B,...         known models; others get 404 (default: any model)\n"
    "  --max-body-bytes N       larger bodies get 413 (default 4194304)\n"
    "  --idle-timeout-ms N      close keep-alive connections idle N ms (default 0: never)\n"
    "  --accept-paused          listen with a backlog of 0 and accept nothing until\n"
    "                           SIGUSR2: one connection waits in the kernel's queue, the\n"
    "                           SYNs of later ones are dropped (a slow connect)\n"
    "  --azure                  also serve /openai/deployments/<dep>/{chat/completions,\n"
    "                           embeddings,responses}?api-version=V with Azure 429 bodies,\n"
    "                           and /openai/files, /openai/batches (api-key header only)\n"
    "limits (per API key and model; 0 = unlimited):\n"
    "  --rpm N                  requests per period for every model (default 0)\n"
    "  --tpm N                  tokens per period for every model (default 0)\n"
    "  --period-ms P            window length (default 60000)\n"
    "  --limit MODEL=RPM:TPM    per-model override, repeatable\n"
    "  --ratelimit-headers M    normal|none|negative|zero|usage_based (default normal)\n"
    "  --no-retry-after         omit retry-after and retry-after-ms on 429\n"
    "  --should-retry           send x-should-retry: true|false on errors\n"
    "latency:\n"
    "  --latency-ms N           delay before the response (streams spread over it)\n"
    "  --latency-jitter-ms N    plus a uniform 0..N ms\n"
    "  --no-processing-ms       omit openai-processing-ms (the time after admission)\n"
    "  --stream-gap-ms N        streams: one token per chunk, N ms apart after the\n"
    "                           latency (default 0: 8 pieces spread over the latency)\n"
    "batches (/v1/files, /v1/batches):\n"
    "  --batch-pace-ms N        a batch completes N ms after its creation (default 1000)\n"
    "  --batch-queue-tokens N   the enqueued-token limit: a new batch whose prompt tokens\n"
    "                           with those of its model's unfinished batches pass N fails\n"
    "                           with token_limit_exceeded, as OpenAI's (default 0: none)\n"
    "  --batch-fail-once S      lines whose custom_id contains S fail with 500 the first\n"
    "                           time the sim runs them (a line error to retry)\n"
    "  --batch-fail-always S    lines whose custom_id contains S fail every time\n"
    "  --batch-fail-status N    the status of those failed lines (default 500; 429 too)\n"
    "  --batch-invalid S        a file with a line whose custom_id contains S fails\n"
    "                           validation (the batch failed, the line named)\n"
    "  --batch-expire-after-ms N  the first --batch-expire-count (default 1) batches\n"
    "                           expire N ms after creation, the share N / pace of their\n"
    "                           lines done, the rest batch_expired in the error file\n"
    "  --batch-hold             batches make no progress until SIGUSR2 (then at their\n"
    "                           pace from it)\n"
    "  --batch-api-slow-ms N    the first --batch-api-slow-first K POSTs of /v1/files\n"
    "                           and /v1/batches take effect and answer N ms late\n"
    "usage:\n"
    "  --cached-pct P           report P percent of chat and responses prompt tokens cached\n"
    "                           (prompt_tokens_details.cached_tokens; default 0)\n"
    "faults (percent of requests, drawn from --seed):\n"
    "  --fail-500 P  --fail-503 P  --spurious-429 P  --insufficient-quota P\n"
    "  --bad-200-html P         200 with an HTML page instead of the answer\n"
    "  --bad-200-shape P        200 with JSON that lacks the endpoint's fields\n"
    "  --reset P                send an answer's first line, then reset the connection\n"
    "  --slow P                 add --slow-ms N (default 2000) to the latency\n"
    "  --fail-first N           the first N calls answer 500 (then as configured)\n"
    "  --slow-first N           the first N admitted answers get --slow-ms more latency\n"
    "  --stream-error P         a stream breaks off half-way with an error event\n"
    "  --late P                 count the arrival --late-ms N (default 300) late: the\n"
    "                           request waits that long before the window sees it\n"
    "  --spurious-retry-ms N    retry hint of a spurious 429 (default 1000)\n"
    "  --seed N                 fault and completion seed (default 1)\n"
    "tokens:\n"
    "  --completion-tokens A:B  completion tokens per choice when unbounded (default 16:64)\n"
    "  --embedding-dims N       embedding length unless the request says (default 8)\n"
    "  --prompt-count M         tiktoken (the model's encoding, as OpenAI) | bytes\n"
    "                           (ceil(string bytes / 4), the old rule) (default tiktoken)\n"
    "  --charge M               admission (prompt + max tokens x n stays charged for the\n"
    "                           whole window, as OpenAI) | usage (settled down to the real\n"
    "                           usage once answered) (default admission)\n"
    "output:\n"
    "  --access-log FILE        one JSON line per request\n"
    "  --stats                  print totals to stderr at exit (also on SIGUSR1)\n"
    "  --quiet                  no startup line\n"
    "  --static                 fixed 200 response, no parsing (benchmark baseline)\n"
    "  --help                   this text\n";

static int bad(const char *flag, const char *why)
{
    fprintf(stderr, "openai-sim: %s: %s (see --help)\n", flag, why);
    return -1;
}

/* Parses a whole decimal integer in [lo, hi]. */
static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_pct(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0.0 && v <= 100.0))
        return -1;
    *out = v;
    return 0;
}

/* "MODEL=RPM:TPM" */
static int parse_limit(const char *s, struct sim_model_limit *l)
{
    const char *eq = strrchr(s, '=');
    if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof(l->model))
        return -1;
    char rpm[32], tpm[32];
    const char *colon = strchr(eq + 1, ':');
    if (colon == NULL || (size_t)(colon - eq - 1) >= sizeof(rpm) ||
        strlen(colon + 1) >= sizeof(tpm))
        return -1;
    memcpy(rpm, eq + 1, (size_t)(colon - eq - 1));
    rpm[colon - eq - 1] = '\0';
    snprintf(tpm, sizeof(tpm), "%s", colon + 1);
    memcpy(l->model, s, (size_t)(eq - s));
    l->model[eq - s] = '\0';
    return parse_i64(rpm, 0, INT64_MAX / 4, &l->rpm) == 0 &&
                   parse_i64(tpm, 0, INT64_MAX / 4, &l->tpm) == 0
               ? 0
               : -1;
}

static int parse_models(const char *s, struct sim_config *cfg)
{
    const char *p = s;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= 128 || cfg->n_models == SIM_MAX_MODELS)
            return -1;
        char *m = strndup(p, n);
        if (m == NULL)
            return -1;
        cfg->models[cfg->n_models++] = m;
        p += n;
        if (*p == ',')
            p++;
    }
    return cfg->n_models > 0 ? 0 : -1;
}

static int parse_mode(const char *s, enum sim_rl_mode *m)
{
    static const char *names[] = {"normal", "none", "negative", "zero", "usage_based"};
    for (int i = 0; i < 5; i++) {
        if (strcmp(s, names[i]) == 0) {
            *m = (enum sim_rl_mode)i;
            return 0;
        }
    }
    return -1;
}

static int parse_range(const char *s, int *lo, int *hi)
{
    int64_t a, b;
    char left[24];
    const char *colon = strchr(s, ':');
    if (colon == NULL || (size_t)(colon - s) >= sizeof(left))
        return -1;
    memcpy(left, s, (size_t)(colon - s));
    left[colon - s] = '\0';
    if (parse_i64(left, 1, 1000000, &a) != 0 || parse_i64(colon + 1, 1, 1000000, &b) != 0 || a > b)
        return -1;
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

static void set_defaults(struct sim_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->host, sizeof(cfg->host), "127.0.0.1");
    cfg->period_ms = 60000;
    cfg->slow_ms = 2000;
    cfg->late_ms = 300;
    cfg->spurious_retry_ms = 1000;
    cfg->seed = 1;
    cfg->max_body_bytes = 4 << 20;
    cfg->completion_min = 16;
    cfg->completion_max = 64;
    cfg->embedding_dims = 8;
    cfg->batch_pace_ms = 1000;
    cfg->batch_fail_status = 500;
    cfg->batch_expire_count = 1;
}

/* Flags that take no value. Returns 1 when name was one, 0 otherwise. */
static int take_switch(const char *name, struct sim_config *cfg)
{
    struct {
        const char *name;
        int *field;
    } sw[] = {
        {"--stats", &cfg->stats},
        {"--static", &cfg->static_mode},
        {"--azure", &cfg->azure},
        {"--should-retry", &cfg->should_retry},
        {"--no-retry-after", &cfg->no_retry_after},
        {"--no-processing-ms", &cfg->no_processing_ms},
        {"--quiet", &cfg->quiet},
        {"--accept-paused", &cfg->accept_paused},
        {"--batch-hold", &cfg->batch_hold},
    };
    for (size_t i = 0; i < sizeof(sw) / sizeof(sw[0]); i++) {
        if (strcmp(name, sw[i].name) == 0) {
            *sw[i].field = 1;
            return 1;
        }
    }
    return 0;
}

/* Integer flags: name, bounds, destination. */
struct int_flag {
    const char *name;
    int64_t lo, hi;
    int64_t *field;
};

/* Applies one integer or percentage flag. Returns 1 when f was one (and
 * *rc is 0 or -1), 0 when f is none of them. */
static int take_number(const char *f, const char *v, struct sim_config *cfg, int *rc)
{
    const int64_t big = INT64_MAX / 4, day_ms = 86400000;
    const struct int_flag ints[] = {
        {"--rpm", 0, big, &cfg->rpm},
        {"--tpm", 0, big, &cfg->tpm},
        {"--period-ms", 1, day_ms, &cfg->period_ms},
        {"--latency-ms", 0, day_ms, &cfg->latency_ms},
        {"--latency-jitter-ms", 0, day_ms, &cfg->latency_jitter_ms},
        {"--slow-ms", 0, day_ms, &cfg->slow_ms},
        {"--late-ms", 0, day_ms, &cfg->late_ms},
        {"--spurious-retry-ms", 0, day_ms, &cfg->spurious_retry_ms},
        {"--max-body-bytes", 1, 1 << 30, &cfg->max_body_bytes},
        {"--idle-timeout-ms", 0, day_ms, &cfg->idle_timeout_ms},
        {"--stream-gap-ms", 0, day_ms, &cfg->stream_gap_ms},
        {"--cached-pct", 0, 100, &cfg->cached_pct},
        {"--fail-first", 0, big, &cfg->fail_first},
        {"--slow-first", 0, big, &cfg->slow_first},
        {"--batch-pace-ms", 0, day_ms, &cfg->batch_pace_ms},
        {"--batch-queue-tokens", 0, big, &cfg->batch_queue_tokens},
        {"--batch-fail-status", 400, 599, &cfg->batch_fail_status},
        {"--batch-expire-after-ms", 0, day_ms, &cfg->batch_expire_after_ms},
        {"--batch-expire-count", 0, big, &cfg->batch_expire_count},
        {"--batch-api-slow-ms", 0, day_ms, &cfg->batch_api_slow_ms},
        {"--batch-api-slow-first", 0, big, &cfg->batch_api_slow_first},
    };
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        if (strcmp(f, ints[i].name) == 0) {
            *rc = parse_i64(v, ints[i].lo, ints[i].hi, ints[i].field) == 0
                      ? 0
                      : bad(f, "invalid value");
            return 1;
        }
    }
    const struct {
        const char *name;
        double *field;
    } pct[] = {
        {"--fail-500", &cfg->fail_500_pct},
        {"--fail-503", &cfg->fail_503_pct},
        {"--reset", &cfg->reset_pct},
        {"--slow", &cfg->slow_pct},
        {"--late", &cfg->late_pct},
        {"--spurious-429", &cfg->spurious_429_pct},
        {"--insufficient-quota", &cfg->insufficient_quota_pct},
        {"--bad-200-html", &cfg->bad_200_html_pct},
        {"--bad-200-shape", &cfg->bad_200_shape_pct},
        {"--stream-error", &cfg->stream_error_pct},
    };
    for (size_t i = 0; i < sizeof(pct) / sizeof(pct[0]); i++) {
        if (strcmp(f, pct[i].name) == 0) {
            *rc = parse_pct(v, pct[i].field) == 0 ? 0 : bad(f, "expects a percentage 0..100");
            return 1;
        }
    }
    return 0;
}

/* Applies one valued flag. Returns 0, or -1 after printing why. */
static int take_value(const char *f, const char *v, struct sim_config *cfg)
{
    int64_t n = 0;
    int rc = 0;
    if (take_number(f, v, cfg, &rc))
        return rc;
    if (strcmp(f, "--host") == 0) {
        if (strlen(v) >= sizeof(cfg->host))
            return bad(f, "too long");
        snprintf(cfg->host, sizeof(cfg->host), "%s", v);
    } else if (strcmp(f, "--port") == 0) {
        rc = parse_i64(v, 0, 65535, &n);
        cfg->port = (int)n;
    } else if (strcmp(f, "--port-file") == 0) {
        cfg->port_file = v;
    } else if (strcmp(f, "--api-key") == 0) {
        cfg->api_key = v;
    } else if (strcmp(f, "--batch-fail-once") == 0) {
        cfg->batch_fail_once = v;
    } else if (strcmp(f, "--batch-fail-always") == 0) {
        cfg->batch_fail_always = v;
    } else if (strcmp(f, "--batch-invalid") == 0) {
        cfg->batch_invalid = v;
    } else if (strcmp(f, "--access-log") == 0) {
        cfg->access_log = v;
    } else if (strcmp(f, "--models") == 0) {
        rc = parse_models(v, cfg);
    } else if (strcmp(f, "--limit") == 0) {
        if (cfg->n_limits == SIM_MAX_MODELS)
            return bad(f, "too many");
        rc = parse_limit(v, &cfg->limits[cfg->n_limits++]);
    } else if (strcmp(f, "--ratelimit-headers") == 0) {
        rc = parse_mode(v, &cfg->rl_mode);
    } else if (strcmp(f, "--seed") == 0) {
        rc = parse_i64(v, 0, INT64_MAX, &n);
        cfg->seed = (uint64_t)n;
    } else if (strcmp(f, "--embedding-dims") == 0) {
        rc = parse_i64(v, 1, 4096, &n);
        cfg->embedding_dims = (int)n;
    } else if (strcmp(f, "--prompt-count") == 0) {
        if (strcmp(v, "tiktoken") == 0)
            cfg->prompt_count = SIM_COUNT_TIKTOKEN;
        else if (strcmp(v, "bytes") == 0)
            cfg->prompt_count = SIM_COUNT_BYTES;
        else
            return bad(f, "expects tiktoken or bytes");
    } else if (strcmp(f, "--charge") == 0) {
        if (strcmp(v, "admission") == 0)
            cfg->charge = SIM_CHARGE_ADMISSION;
        else if (strcmp(v, "usage") == 0)
            cfg->charge = SIM_CHARGE_USAGE;
        else
            return bad(f, "expects admission or usage");
    } else if (strcmp(f, "--completion-tokens") == 0) {
        rc = parse_range(v, &cfg->completion_min, &cfg->completion_max);
    } else {
        return bad(f, "unknown flag");
    }
    return rc == 0 ? 0 : bad(f, "invalid value");
}

int sim_options_parse(int argc, char **argv, struct sim_config *cfg)
{
    set_defaults(cfg);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0)
            return bad(a, "unexpected argument");
        if (take_switch(a, cfg))
            continue;
        char name[64];
        const char *eq = strchr(a, '=');
        const char *val;
        if (eq != NULL) {
            if ((size_t)(eq - a) >= sizeof(name))
                return bad(a, "unknown flag");
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            val = eq + 1;
        } else {
            if (strlen(a) >= sizeof(name))
                return bad(a, "unknown flag");
            snprintf(name, sizeof(name), "%s", a);
            if (i + 1 >= argc)
                return bad(a, "missing value (or unknown flag)");
            val = argv[++i];
        }
        if (take_value(name, val, cfg) != 0)
            return -1;
    }
    return 0;
}

void sim_options_free(struct sim_config *cfg)
{
    for (int i = 0; i < cfg->n_models; i++)
        free(cfg->models[i]);
    cfg->n_models = 0;
}
