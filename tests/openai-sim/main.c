/* openai-sim: an OpenAI-compatible HTTP/1.1 test server (see sim.h).
 *
 * main parses flags, raises RLIMIT_NOFILE to its hard maximum (thousands of
 * concurrent connections), listens, writes the port file once listening
 * (atomically, by rename, so a reader never sees half a number) and runs the
 * loop until SIGTERM/SIGINT, which flush the access log and exit 0. SIGUSR2
 * ends --accept-paused and --batch-hold. SIGUSR1
 * prints the totals to stderr. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "batch.h"
#include "sim.h"
#include "llmq/tokens.h"

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl); /* best effort: fewer connections otherwise */
    }
}

static int write_port_file(const char *path, int port)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return -1;
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    int ok = fprintf(f, "%d\n", port) > 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void on_stop(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static void on_usr1(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop;
    (void)revents;
    struct sim_server *srv = w->data;
    sim_stats_print(srv);
}

static void build_static(struct sim_server *srv)
{
    static const char body[] =
        "{\"id\":\"chatcmpl-static\",\"object\":\"chat.completion\",\"created\":0,\"model\":"
        "\"static\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
        "\"sim\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,"
        "\"completion_tokens\":1,\"total_tokens\":2}}\n";
    sim_buf_addf(&srv->static_resp,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "x-request-id: req_static\r\n\r\n%s",
                 sizeof(body) - 1, body);
}

static void on_usr2(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop;
    (void)revents;
    struct sim_server *srv = w->data;
    if (srv->cfg.accept_paused)
        sim_conn_accept_start(srv); /* the end of --accept-paused */
    if (srv->cfg.batch_hold && sim_batches_get(srv) != NULL && srv->batches->released_ms == 0)
        srv->batches->released_ms = llmq_wall_ms(); /* the end of --batch-hold */
}

static void start_signals(struct sim_server *srv)
{
    signal(SIGPIPE, SIG_IGN);
    ev_signal_init(&srv->sig_term, on_stop, SIGTERM);
    ev_signal_init(&srv->sig_int, on_stop, SIGINT);
    ev_signal_init(&srv->sig_usr1, on_usr1, SIGUSR1);
    srv->sig_usr1.data = srv;
    ev_signal_start(srv->loop, &srv->sig_term);
    ev_signal_start(srv->loop, &srv->sig_int);
    ev_signal_start(srv->loop, &srv->sig_usr1);
    ev_signal_init(&srv->sig_usr2, on_usr2, SIGUSR2);
    srv->sig_usr2.data = srv;
    ev_signal_start(srv->loop, &srv->sig_usr2);
}

static void free_buckets(struct sim_server *srv)
{
    for (int i = 0; i < SIM_BUCKET_SLOTS; i++) {
        while (srv->buckets[i] != NULL) {
            struct sim_bucket *b = srv->buckets[i];
            srv->buckets[i] = b->next;
            sim_window_free(&b->win);
            free(b);
        }
    }
}

int main(int argc, char **argv)
{
    static struct sim_server srv; /* large (bucket table): not on the stack */
    int rc = sim_options_parse(argc, argv, &srv.cfg);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (srv.cfg.prompt_count == SIM_COUNT_TIKTOKEN && !srv.cfg.static_mode) {
        /* Fail at startup, not on the first request, when no vocabulary is
         * found (other encodings load on first use). */
        struct llmq_error err = {LLMQ_OK, ""};
        if (llmq_tokens_load(LLMQ_ENCODING_DEFAULT, &err) != LLMQ_OK) {
            fprintf(stderr, "openai-sim: --prompt-count tiktoken: %s\n", err.msg);
            return 1;
        }
    }
    raise_nofile();
    srv.listen_fd = -1;
    srv.alog.fd = -1;
    srv.rng = srv.cfg.seed;
    srv.id_salt = (uint64_t)llmq_wall_ms() ^ ((uint64_t)getpid() << 40);
    srv.loop = ev_default_loop(EVFLAG_AUTO);
    if (srv.loop == NULL) {
        fprintf(stderr, "openai-sim: cannot create the event loop\n");
        return 1;
    }
    build_static(&srv);
    start_signals(&srv);
    int exit_code = 0;
    if (sim_alog_open(&srv) != 0 || sim_conn_listen(&srv) != 0) {
        exit_code = 1;
    } else if (srv.cfg.port_file != NULL && write_port_file(srv.cfg.port_file, srv.cfg.port) != 0) {
        fprintf(stderr, "openai-sim: cannot write --port-file %s\n", srv.cfg.port_file);
        exit_code = 1;
    } else {
        if (!srv.cfg.quiet)
            fprintf(stderr, "openai-sim: listening on http://%s:%d\n", srv.cfg.host, srv.cfg.port);
        ev_run(srv.loop, 0);
    }
    sim_conn_close_all(&srv);
    sim_alog_close(&srv);
    if (srv.cfg.stats)
        sim_stats_print(&srv);
    free_buckets(&srv);
    sim_buf_free(&srv.scratch);
    sim_batch_free(&srv);
    sim_buf_free(&srv.static_resp);
    sim_options_free(&srv.cfg);
    ev_loop_destroy(srv.loop);
    return exit_code;
}
