/* llmq-gateway: configuration, the vocabularies, the loop and signals; the
 * gateway itself is the library (service.h).
 * SIGTERM/SIGINT: waiting callers get a 503 (their jobs, if unsent, are
 * cancelled), the server stops, exit 0. */
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>

#include "base/log.h"
#include "gateway.h"
#include "llmq/tokens.h"
#include "service.h"

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)revents;
    LLMQ_LOG(LLMQ_LOG_INFO, "gateway: signal %d, stopping", w->signum);
    ev_break(loop, EVBREAK_ALL);
}

static int write_port(const char *path, int port)
{
    char tmp[1100];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct gw_config cfg;
    int prc = gw_config_parse(&cfg, argc, argv);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    llmq_log_configure(cfg.log_level, cfg.log_format);
    signal(SIGPIPE, SIG_IGN);
    /* every waiting caller holds a socket: allow as many as the hard limit */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct gw gw;
    struct llmq_error err = {0};
    if (gw_init(&gw, &cfg, NULL, &err) != LLMQ_OK) {
        fprintf(stderr, "llmq-gateway: %s\n", err.msg);
        return 2;
    }
    /* Cost estimates need the vocabularies; loading one takes about a second,
     * which would stall every request on the loop: load them before listening. */
    for (int e = 0; e < LLMQ_ENCODING_COUNT; e++)
        if (llmq_tokens_load((enum llmq_encoding)e, &err) != LLMQ_OK) {
            fprintf(stderr, "llmq-gateway: %s\n", err.msg);
            return 1;
        }
    gw.loop = ev_default_loop(EVFLAG_AUTO);
    int port = 0;
    int src = gw_service_start(&gw, &port, &err);
    if (src != 0) {
        fprintf(stderr, "llmq-gateway: %s\n", err.msg);
        return src;
    }
    if (cfg.port_file[0] != '\0' && write_port(cfg.port_file, port) != 0) {
        fprintf(stderr, "llmq-gateway: --port-file: cannot write %s\n", cfg.port_file);
        return 2;
    }
    LLMQ_LOG(LLMQ_LOG_INFO, "gateway: listening on %s:%d%s, account %s, lease %s", cfg.listen_host,
             port, cfg.tls_cert[0] ? " (TLS)" : "", cfg.account, gw.id);
    ev_signal sigterm, sigint;
    ev_signal_init(&sigterm, on_signal, SIGTERM);
    ev_signal_init(&sigint, on_signal, SIGINT);
    ev_signal_start(gw.loop, &sigterm);
    ev_signal_start(gw.loop, &sigint);
    ev_run(gw.loop, 0);
    gw_service_stop(&gw);
    ev_loop_destroy(gw.loop);
    gw_clear(&gw);
    return 0;
}
