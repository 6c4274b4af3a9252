/* openai-sim: shared types of the OpenAI-compatible test server.
 *
 * One process, one libev loop, one thread. The server (struct sim_server)
 * owns the listening socket, the connections, the rate-limit buckets, the
 * access log and the counters. A connection (struct sim_conn) handles one
 * request at a time: its head is parsed incrementally, the whole response is
 * built at admission into the connection's exchange (struct sim_exchange),
 * and released to the socket in one or more steps on timers, which is how
 * latency and streaming are simulated without ever blocking the loop. */
#ifndef SIM_H
#define SIM_H

#include <ev.h>
#include <stdint.h>

#include "base/clock.h"
#include "base/rng.h"
#include "buf.h"
#include "http.h"
#include "window.h"

/* Which x-ratelimit-* headers to send (--ratelimit-headers). */
enum sim_rl_mode {
    SIM_RL_NORMAL = 0, /* the real values */
    SIM_RL_NONE,       /* no x-ratelimit-* headers at all */
    SIM_RL_NEGATIVE,   /* every value -1 */
    SIM_RL_ZERO,       /* every value 0 */
    SIM_RL_USAGE_BASED /* token headers only as x-ratelimit-*-tokens_usage_based */
};

/* How prompt tokens are counted (--prompt-count). */
enum sim_prompt_count {
    SIM_COUNT_TIKTOKEN = 0, /* the model's encoding, chat framing: as OpenAI counts */
    SIM_COUNT_BYTES         /* ceil(bytes of the prompt's strings / 4): the old rule */
};

/* What a request keeps charged in the window (--charge). */
enum sim_charge {
    SIM_CHARGE_ADMISSION = 0, /* prompt + max tokens x n, never given back (OpenAI) */
    SIM_CHARGE_USAGE          /* settled down to prompt + completion once answered */
};

struct sim_model_limit {
    char model[128];
    int64_t rpm; /* 0 = unlimited */
    int64_t tpm;
};

#define SIM_MAX_MODELS 64

struct sim_config {
    char host[64];
    int port;
    const char *port_file;        /* borrowed from argv */
    const char *api_key;          /* borrowed from argv; NULL = any key accepted */
    const char *access_log;       /* borrowed from argv */
    char *models[SIM_MAX_MODELS]; /* --models: owned copies; none = any model */
    int n_models;
    int64_t rpm, tpm, period_ms;
    struct sim_model_limit limits[SIM_MAX_MODELS];
    int n_limits;
    int64_t latency_ms, latency_jitter_ms;
    int64_t cached_pct;      /* --cached-pct: share of prompt tokens reported cached */
    int64_t stream_gap_ms;   /* --stream-gap-ms: between the chunks of a stream; 0: spread
                                over the latency */
    double stream_error_pct; /* --stream-error: streams that break off with an error event */
    double fail_500_pct, fail_503_pct, reset_pct, slow_pct, spurious_429_pct;
    double insufficient_quota_pct;
    double bad_200_html_pct;  /* 200 with an HTML page (a captive portal, a proxy) */
    double bad_200_shape_pct; /* 200 with JSON lacking the endpoint's fields */
    int64_t slow_ms;
    int64_t fail_first; /* --fail-first: the first N calls answer 500 */
    int64_t slow_first; /* --slow-first: the first N admitted answers are --slow-ms slower */
    double late_pct;    /* --late: requests counted --late-ms after they arrive */
    int64_t late_ms;
    int64_t spurious_retry_ms;
    int64_t idle_timeout_ms; /* close keep-alive connections idle this long; 0 = never */
    uint64_t seed;
    int stats;            /* print totals at exit */
    int static_mode;      /* fixed response, no parsing: the benchmark baseline */
    int azure;            /* accept Azure OpenAI deployment paths */
    int should_retry;     /* send x-should-retry */
    int no_retry_after;   /* omit retry-after and retry-after-ms on 429 */
    int no_processing_ms; /* omit openai-processing-ms */
    enum sim_rl_mode rl_mode;
    int64_t max_body_bytes;
    int completion_min, completion_max; /* default completion tokens per choice */
    enum sim_prompt_count prompt_count;
    enum sim_charge charge;
    int embedding_dims;
    int quiet;
    int accept_paused;             /* --accept-paused: backlog 0, no accept until SIGUSR2 */
    int64_t batch_pace_ms;         /* --batch-pace-ms: a Batch completes this long after its
                                      creation (batch.c) */
    const char *batch_fail_once;   /* --batch-fail-once: Batch lines whose custom_id holds it
                                      fail with 500 the first time (borrowed from argv) */
    const char *batch_fail_always; /* --batch-fail-always: ... every time */
    int64_t batch_fail_status;     /* --batch-fail-status: those lines' status (500) */
    const char *batch_invalid;     /* --batch-invalid: a line whose custom_id holds it fails
                                      its file's validation */
    int64_t batch_expire_after_ms; /* --batch-expire-after-ms: 0 none */
    int64_t batch_expire_count;    /* --batch-expire-count: how many batches expire (1) */
    /* --batch-api-slow-ms N / --batch-api-slow-first K: the first K POSTs of
     * files and batches answer N ms late, and what they make is seen only then */
    int64_t batch_api_slow_ms;
    int64_t batch_api_slow_first;
    int batch_hold;             /* --batch-hold: no batch progresses before SIGUSR2 */
    int64_t batch_queue_tokens; /* --batch-queue-tokens: prompt tokens a model's unfinished
                                   batches may hold (0: no limit; batch_run.c) */
};

/* Outcome of one request, as the access log names it. */
enum sim_outcome {
    SIM_OUT_OK = 0,
    SIM_OUT_LIMIT_REQUESTS,
    SIM_OUT_LIMIT_TOKENS,
    SIM_OUT_TOO_LARGE, /* prompt + reserved completion exceed the TPM limit on their own */
    SIM_OUT_SPURIOUS_429,
    SIM_OUT_INSUFFICIENT_QUOTA,
    SIM_OUT_FAIL_500,
    SIM_OUT_FAIL_503,
    SIM_OUT_RESET,
    SIM_OUT_BAD_REQUEST, /* 400, 405, 411, 417, 431, 505 */
    SIM_OUT_UNAUTHORIZED,
    SIM_OUT_NOT_FOUND,
    SIM_OUT_TOO_BIG,
    SIM_OUT_CLIENT_CLOSED,
    SIM_OUT_SHUTDOWN, /* still in progress when the server stopped */
    SIM_OUT_BAD_200_HTML,
    SIM_OUT_BAD_200_SHAPE,
    SIM_OUT_STREAM_ERROR, /* a stream that broke off half-way with an error event */
    SIM_OUT_COUNT
};

/* One rate-limit domain: (SHA-256 of the API key, model). Lives until exit. */
struct sim_bucket {
    struct sim_bucket *next;
    unsigned char key_sha[32];
    char model[128];
    int64_t rpm, tpm;
    struct sim_window win;
};

#define SIM_BUCKET_SLOTS 1024

/* The response being produced for the connection's current request. */
struct sim_exchange {
    struct sim_buf out;        /* every byte of the response, built at admission */
    size_t *marks;             /* end offset in out of each release step */
    int64_t *mark_tokens;      /* completion tokens sent once that step is out (streams) */
    int64_t stream_tokens;     /* completion tokens appended to out so far (streams) */
    int stream, include_usage; /* the request's, for the access log */
    size_t n_marks, cap_marks;
    size_t released; /* steps released so far */
    size_t sent;     /* bytes of out written */
    double step_s;   /* time between release steps */
    double first_s;  /* time before the first step (--stream-gap-ms: the latency) */
    int close_after; /* close once written (Connection: close or an HTTP error) */
    int reset;       /* reset the connection instead of answering */
    /* what the access log and the settlement need */
    int status;
    enum sim_outcome outcome;
    int64_t t_unix_ms, t_mono_ms;
    int64_t processing_ms; /* openai-processing-ms: admission to the first byte of the
                              answer as built (0: answered at once, and a stream not paced
                              by --stream-gap-ms, whose first piece comes sooner) */
    char key8[9];
    unsigned char key_sha[32];
    char model[128];
    char path[64];
    char client_id[128];
    char request_id[40];
    int64_t prompt_tokens, completion_tokens, charged_tokens;
    struct sim_bucket *bucket; /* borrowed; NULL when nothing was charged */
    uint64_t seq;
    uint64_t conn_id;  /* the connection's number (sim_conn.id); 0: none */
    uint64_t inflight; /* exchanges in progress once this one started, itself included */
};

struct sim_conn {
    struct sim_server *srv;
    struct sim_conn *prev, *next;
    uint64_t id; /* accepted as the id-th connection (from 1) */
    int fd;
    ev_io io;
    ev_timer timer;
    struct sim_buf in;
    int head_done; /* req holds the parsed head of the request at in[0] */
    int sent_continue;
    int busy; /* ex is in progress */
    int peer_eof;
    int in_process; /* conn_process is on the stack: do not re-enter it */
    int held;       /* --late: the buffered request waits on timer to be admitted */
    int late_done;  /* its hold is over: admit it now */
    struct sim_http_req req;
    struct sim_exchange ex;
};

struct sim_stats {
    uint64_t requests;
    uint64_t by_outcome[SIM_OUT_COUNT];
    uint64_t conns_accepted;
    uint64_t conns_now, conns_max;
    uint64_t inflight_now, inflight_max;
    uint64_t prompt_tokens, completion_tokens;
};

struct sim_alog {
    int fd; /* -1 when there is no access log */
    struct sim_buf buf;
    ev_timer flush_timer;
};

struct sim_server {
    struct sim_config cfg;
    struct ev_loop *loop;
    int listen_fd;
    ev_io accept_w;
    ev_timer accept_pause;
    ev_signal sig_term, sig_int, sig_usr1, sig_usr2;
    struct sim_conn *conns; /* every open connection */
    struct sim_bucket *buckets[SIM_BUCKET_SLOTS];
    struct sim_alog alog;
    struct sim_stats stats;
    uint64_t rng; /* fault-injection stream, seeded by --seed */
    uint64_t req_counter;
    int64_t failed_first;   /* calls answered 500 by --fail-first so far */
    int64_t slowed_first;   /* answers slowed by --slow-first so far */
    int stopping;           /* closing every connection at exit */
    uint64_t id_salt;       /* start time and pid: request ids differ between runs */
    struct sim_buf scratch; /* response bodies are built here first */
    struct sim_buf static_resp;
    struct sim_batches *batches; /* batch.c: the Files and Batches; NULL until the first */
};

/* admit.c: a uniform draw in [0, 100) from the fault stream. */
double sim_draw_pct(struct sim_server *srv);

/* options.c: parses argv into cfg (defaults first). Returns 0, 1 when --help
 * was printed (exit 0), or -1 after printing one line to stderr (exit 2). */
int sim_options_parse(int argc, char **argv, struct sim_config *cfg);
void sim_options_free(struct sim_config *cfg);

/* conn.c */
int sim_conn_listen(struct sim_server *srv);
/* Starts accepting (after --accept-paused). */
void sim_conn_accept_start(struct sim_server *srv);
void sim_conn_close_all(struct sim_server *srv);
/* Starts releasing c->ex: the first step after delay_ms (0 = now) and the
 * rest spread evenly over it. Returns 0, or -1 when c was closed and freed. */
int sim_conn_start_exchange(struct sim_conn *c, int64_t delay_ms);

/* api.c: handles the complete request at c->in (head c->req): decides the
 * outcome, charges the window and builds the whole response into c->ex
 * (copying what it needs: the caller consumes the request bytes next).
 * Returns the delay in ms before the response starts. */
int64_t sim_api_handle(struct sim_conn *c);
/* Builds an HTTP-level error answer (malformed head and the like) into c->ex,
 * closing the connection after it. */
void sim_api_http_error(struct sim_conn *c, int status, const char *why);
/* Settles the exchange's charge to its real usage (at the end of a response). */
void sim_api_settle(struct sim_server *srv, struct sim_exchange *ex);

/* batch.c: the Files and Batches APIs. sim_batch_route returns 1 when c's
 * path is one of theirs (/v1/files..., /v1/batches...; with --azure also
 * /openai/files..., /openai/batches..., *azure then 1); sim_batch_handle
 * then builds the answer into c->ex and returns how late it is sent
 * (--batch-api-slow-ms). sim_batch_free frees what they hold. */
int sim_batch_route(const struct sim_conn *c, int *azure);
int64_t sim_batch_handle(struct sim_conn *c); /* returns the answer's delay, ms */
void sim_batch_free(struct sim_server *srv);

/* alog.c */
int sim_alog_open(struct sim_server *srv);
void sim_alog_write(struct sim_server *srv, const struct sim_exchange *ex, int64_t latency_ms);
void sim_alog_flush(struct sim_server *srv);
void sim_alog_close(struct sim_server *srv);
void sim_stats_print(const struct sim_server *srv);
const char *sim_outcome_name(enum sim_outcome o);

/* Clocks and the RNG are libllmq's (base/clock.h llmq_monotonic_ms and
 * llmq_wall_ms, base/rng.h llmq_rng_next): one of each in the project. */

#endif
