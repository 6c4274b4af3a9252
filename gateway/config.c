/* llmq-gateway's flags (see config.h; every flag is on docs/man/llmq-gateway.md). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis.h"
#include "redis/redis_async.h"
#include "redis/redis_url.h"

static int bad(const char *flag, const char *why, const char *value)
{
    fprintf(stderr, "llmq-gateway: %s: %s%s%s\n", flag, why, value ? ": " : "", value ? value : "");
    return -1;
}

static int copy(char *dst, size_t n, const char *flag, const char *v)
{
    if (strlen(v) >= n)
        return bad(flag, "too long", NULL);
    snprintf(dst, n, "%s", v);
    return 0;
}

static int num(const char *flag, const char *v, long long min, long long max, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < min || x > max) {
        char why[96];
        snprintf(why, sizeof(why), "expected an integer in %lld..%lld", min, max);
        return bad(flag, why, v);
    }
    *out = x;
    return 0;
}

/* "HOST:PORT", "[V6]:PORT" or ":PORT" / "PORT" (all interfaces). */
static int listen_parse(const char *flag, const char *v, char *host, size_t n, int *port)
{
    const char *colon = strrchr(v, ':');
    const char *p = colon ? colon + 1 : v;
    long long x;
    if (num(flag, p, 0, 65535, &x) != 0)
        return -1;
    *port = (int)x;
    if (colon == NULL || colon == v) {
        snprintf(host, n, "0.0.0.0");
        return 0;
    }
    size_t hl = (size_t)(colon - v);
    if (v[0] == '[' && hl >= 2 && v[hl - 1] == ']') {
        v++;
        hl -= 2;
    }
    if (hl >= n)
        return bad(flag, "host too long", NULL);
    memcpy(host, v, hl);
    host[hl] = '\0';
    return 0;
}

static void usage(FILE *out)
{
    fputs("usage: llmq-gateway [options]\n\n"
          "An OpenAI-compatible front door to llmq: Files and Batch APIs and synchronous\n"
          "calls, authenticated with gateway keys (llmq keys create).\n\n"
          "  --listen HOST:PORT        API address (default 0.0.0.0:8080; port 0: any)\n"
          "  --redis URL               (env LLMQ_REDIS_URL)\n"
          "  --redis-timeout-ms MS     a Redis command unanswered this long drops the\n"
          "                            connection: 503s until it is back (5000)\n"
          "  --account NAME            (env LLMQ_ACCOUNT, default 'default')\n"
          "  --tls-cert PATH --tls-key PATH   serve HTTPS\n"
          "  --metrics-listen HOST:PORT   /metrics, /healthz, /readyz there too (also on the API "
          "port)\n"
          "  --max-wait-ms MS          sync calls: longest wait in the queue (60000), then 429\n"
          "  --call-timeout-ms MS      sync calls: longest wait once sent (600000), then 504\n"
          "  --lease-ms MS             this gateway's lease in Redis (15000): once it lapses\n"
          "                            (a killed gateway) its unsent calls are cancelled and its\n"
          "                            half-created batches finished or rolled back\n"
          "  --max-file-bytes N        upload size limit (209715200: OpenAI's 200 MB)\n"
          "  --max-file-lines N        requests per batch file (50000, as OpenAI)\n"
          "  --max-window-hours N      longest completion_window (168)\n"
          "  --max-body-bytes N        JSON request body limit (4194304)\n"
          "  --max-connections N       open connections (10000); at most half of them wait\n"
          "                            for a request head (beyond, the oldest is closed)\n"
          "  --max-connections-per-ip N  open connections per client address (0: no bound)\n"
          "  --header-timeout-ms MS    a request head must arrive whole within this (10000),\n"
          "                            else the connection is closed\n"
          "  --body-timeout-ms MS      a request body must arrive whole within this of its\n"
          "                            head (300000), else the connection is closed\n"
          "  --port-file PATH          write the bound API port there\n"
          "  --log-level L, --log-format text|json\n"
          "  --version                 print the version and exit\n"
          "  --help                    this text\n"
          "SIGTERM or SIGINT: stop taking requests, cancel the jobs of waiting calls not yet\n"
          "sent, stop.\n"
          "Exit codes: 0 clean stop (or --help, --version); 1 runtime failure (the\n"
          "vocabularies cannot be loaded, out of memory); 2 invalid configuration (bad\n"
          "option, malformed Redis URL, an address that cannot be bound, --port-file not\n"
          "writable).\n",
          out);
}

static void defaults(struct gw_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->listen_host, sizeof(cfg->listen_host), "0.0.0.0");
    cfg->listen_port = 8080;
    const char *r = getenv("LLMQ_REDIS_URL");
    snprintf(cfg->redis_url, sizeof(cfg->redis_url), "%s", r && r[0] ? r : LLMQ_REDIS_URL_DEFAULT);
    const char *a = getenv("LLMQ_ACCOUNT");
    snprintf(cfg->account, sizeof(cfg->account), "%s", a && a[0] ? a : "default");
    cfg->max_wait_ms = 60000;
    cfg->call_timeout_ms = 600000;
    cfg->lease_ms = 15000;
    cfg->redis_timeout_ms = LLMQ_REDIS_COMMAND_TIMEOUT_MS_DEFAULT;
    cfg->max_file_bytes = 200LL * 1024 * 1024;
    cfg->max_file_lines = 50000;
    cfg->max_window_ms = 168LL * 3600 * 1000;
    cfg->max_body_bytes = 4 * 1024 * 1024;
    cfg->max_connections = 10000;
    cfg->header_timeout_ms = 10000;
    cfg->body_timeout_ms = 300000;
    cfg->log_level = LLMQ_LOG_INFO;
    cfg->log_format = LLMQ_LOG_TEXT;
}

static int check(const struct gw_config *cfg)
{
    struct llmq_redis_url u;
    struct llmq_error err = {0};
    char prefix[256];
    if (llmq_redis_url_parse(cfg->redis_url, &u, &err) != LLMQ_OK)
        return bad("--redis", err.msg, NULL);
    memset(&u, 0, sizeof(u));
    if (llmq_account_prefix(cfg->account, prefix, sizeof(prefix), &err) != LLMQ_OK)
        return bad("--account", err.msg, NULL);
    if ((cfg->tls_cert[0] == '\0') != (cfg->tls_key[0] == '\0'))
        return bad("--tls-cert/--tls-key", "give both or neither", NULL);
    return 0;
}

int gw_config_parse(struct gw_config *cfg, int argc, char **argv)
{
    static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                         {"redis", required_argument, NULL, 'r'},
                                         {"redis-timeout-ms", required_argument, NULL, 'R'},
                                         {"account", required_argument, NULL, 'a'},
                                         {"tls-cert", required_argument, NULL, 'C'},
                                         {"tls-key", required_argument, NULL, 'K'},
                                         {"metrics-listen", required_argument, NULL, 'M'},
                                         {"max-wait-ms", required_argument, NULL, 'w'},
                                         {"call-timeout-ms", required_argument, NULL, 'T'},
                                         {"lease-ms", required_argument, NULL, 'E'},
                                         {"max-file-bytes", required_argument, NULL, 'b'},
                                         {"max-file-lines", required_argument, NULL, 'n'},
                                         {"max-window-hours", required_argument, NULL, 'W'},
                                         {"max-body-bytes", required_argument, NULL, 'B'},
                                         {"max-connections", required_argument, NULL, 'c'},
                                         {"max-connections-per-ip", required_argument, NULL, 'I'},
                                         {"header-timeout-ms", required_argument, NULL, 'H'},
                                         {"body-timeout-ms", required_argument, NULL, 'D'},
                                         {"port-file", required_argument, NULL, 'p'},
                                         {"log-level", required_argument, NULL, 'L'},
                                         {"log-format", required_argument, NULL, 'F'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    defaults(cfg);
    const char *lvl = getenv("LLMQ_LOG_LEVEL"), *fmt = getenv("LLMQ_LOG_FORMAT");
    int opt;
    long long v;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int rc = 0;
        switch (opt) {
        case 'l':
            rc = listen_parse("--listen", optarg, cfg->listen_host, sizeof(cfg->listen_host),
                              &cfg->listen_port);
            break;
        case 'M':
            rc = listen_parse("--metrics-listen", optarg, cfg->metrics_host,
                              sizeof(cfg->metrics_host), &cfg->metrics_port);
            break;
        case 'r':
            rc = copy(cfg->redis_url, sizeof(cfg->redis_url), "--redis", optarg);
            break;
        case 'a':
            rc = copy(cfg->account, sizeof(cfg->account), "--account", optarg);
            break;
        case 'C':
            rc = copy(cfg->tls_cert, sizeof(cfg->tls_cert), "--tls-cert", optarg);
            break;
        case 'K':
            rc = copy(cfg->tls_key, sizeof(cfg->tls_key), "--tls-key", optarg);
            break;
        case 'p':
            rc = copy(cfg->port_file, sizeof(cfg->port_file), "--port-file", optarg);
            break;
        case 'w':
            rc = num("--max-wait-ms", optarg, 1, 24LL * 3600 * 1000, &cfg->max_wait_ms);
            break;
        case 'T':
            rc = num("--call-timeout-ms", optarg, 1, 24LL * 3600 * 1000, &cfg->call_timeout_ms);
            break;
        case 'E':
            rc = num("--lease-ms", optarg, 300, 3600LL * 1000, &cfg->lease_ms);
            break;
        case 'R':
            rc = num("--redis-timeout-ms", optarg, 100, 600000, &v);
            cfg->redis_timeout_ms = (int)v;
            break;
        case 'b':
            rc = num("--max-file-bytes", optarg, 1, 1LL << 34, &cfg->max_file_bytes);
            break;
        case 'n':
            rc = num("--max-file-lines", optarg, 1, 10000000, &cfg->max_file_lines);
            break;
        case 'W':
            rc = num("--max-window-hours", optarg, 1, 24 * 366, &v);
            cfg->max_window_ms = v * 3600 * 1000;
            break;
        case 'B':
            rc = num("--max-body-bytes", optarg, 1024, 1LL << 30, &cfg->max_body_bytes);
            break;
        case 'c':
            rc = num("--max-connections", optarg, 1, 1000000, &v);
            cfg->max_connections = (int)v;
            break;
        case 'I':
            rc = num("--max-connections-per-ip", optarg, 0, 1000000, &v);
            cfg->max_connections_per_ip = (int)v;
            break;
        case 'H':
            rc = num("--header-timeout-ms", optarg, 100, 3600LL * 1000, &cfg->header_timeout_ms);
            break;
        case 'D':
            rc = num("--body-timeout-ms", optarg, 100, 24LL * 3600 * 1000, &cfg->body_timeout_ms);
            break;
        case 'L':
            lvl = optarg;
            break;
        case 'F':
            fmt = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        case 'V':
            printf("llmq-gateway %s\n", LLMQ_VERSION);
            return 1;
        default:
            return bad(argv[optind - 1] ? argv[optind - 1] : "option",
                       "unknown option or missing value (see --help)", NULL);
        }
        if (rc != 0)
            return -1;
    }
    if (optind < argc)
        return bad(argv[optind], "unexpected argument (see --help)", NULL);
    if (lvl && lvl[0] && llmq_log_level_parse(lvl, &cfg->log_level) != 0)
        return bad("--log-level", "expected debug, info, warn, error or off", lvl);
    if (fmt && fmt[0] && strcmp(fmt, "json") == 0)
        cfg->log_format = LLMQ_LOG_JSON;
    else if (fmt && fmt[0] && strcmp(fmt, "text") != 0)
        return bad("--log-format", "expected text or json", fmt);
    return check(cfg);
}
