/* llmq-gateway's configuration: flags, then environment, then defaults.
 * Invalid configuration is one line naming the setting (exit 2 in main). */
#ifndef LLMQ_GW_CONFIG_H
#define LLMQ_GW_CONFIG_H

#include "base/log.h"

struct gw_config {
    char listen_host[64];
    int listen_port;
    char redis_url[1024];
    int redis_timeout_ms; /* command timeout of its Redis connections (redis_async.h) */
    char account[201];
    char tls_cert[1024]; /* "" plain HTTP */
    char tls_key[1024];
    char metrics_host[64]; /* "" metrics and health on the API port only */
    int metrics_port;
    char port_file[1024];      /* "" none: write the bound API port there (tests) */
    long long max_wait_ms;     /* sync calls: longest wait for the queue */
    long long call_timeout_ms; /* sync calls: after the job was sent, then 504 */
    long long lease_ms;        /* the gateway's lease in Redis (lease.h) */
    long long max_file_bytes;
    long long max_file_lines;
    long long max_window_ms;  /* longest completion_window */
    long long max_body_bytes; /* raw body of a JSON request */
    int max_connections;
    int max_connections_per_ip;  /* 0: no bound */
    long long header_timeout_ms; /* a request head, whole (http.h) */
    long long body_timeout_ms;   /* a request body, whole, once its head was admitted */
    enum llmq_log_level log_level;
    enum llmq_log_format log_format;
};

/* Fills cfg from argv and the environment. Returns 0; 1 when --help or
 * --version was printed; -1 after printing one line about what is wrong. */
int gw_config_parse(struct gw_config *cfg, int argc, char **argv);

#endif
