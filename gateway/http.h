/* The HTTP server of llmq-gateway on libmicrohttpd, driven by the gateway's
 * libev loop (no MHD thread), and one request's life. The transport only:
 * what runs for a request is the caller's (struct gw_http_hooks; the
 * gateway passes the router's, router.h).
 *
 * A request's headers arrive -> hooks->admit decides, before a byte of the
 * body is read, whether the body is wanted (the router checks the key
 * there): it answers (a refusal: the body is never read) or calls
 * gw_request_admit, at once or later -> the body is read whole (JSON bodies
 * up to --max-body-bytes; multipart uploads through MHD's post processor up
 * to --max-file-bytes) -> hooks->handle runs. Either hook may answer later:
 * the connection is suspended meanwhile (MHD_suspend_connection) and resumed
 * by gw_request_admit or gw_respond*. While suspended, the client socket is
 * watched so a caller that hangs up is noticed (on_gone).
 *
 * Lifetime, the one rule for every struct gw_request: the server owns it.
 * It makes it when a request's head arrives and frees it (with r->state,
 * through r->state_free) once MHD has reported the request complete and no
 * step of it is in flight. A step is whatever will touch r from a later
 * callback (a Redis command, an offload task, a call's wait): it is begun
 * only through request_step.h, whose functions keep r
 * until its callback has returned. Handlers and callbacks borrow r; none of
 * them counts references (request_ref.h is for http.c and request_step.c
 * alone). After the client is gone, gw_respond* are no-ops, so callbacks
 * need no special case. */
#ifndef LLMQ_GW_HTTP_H
#define LLMQ_GW_HTTP_H

#include <ev.h>
#include <hiredis/async.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "decode.h"
#include "errors.h"
#include "gateway.h"
#include "key_policy.h"

/* An uploaded file part (POST /v1/files). */
struct gw_upload {
    int is_multipart;
    int pp_failed;     /* MHD's post processor refused a chunk */
    char boundary[80]; /* of the multipart body */
    char tail[128];    /* the last raw bytes of the body */
    size_t tail_len;
    int has_file;
    char filename[256];
    int filename_too_long; /* the part's filename did not fit filename */
    char purpose[64];
};

struct gw_request {
    struct gw *gw;
    struct MHD_Connection *conn; /* NULL once MHD is done with it */
    struct gw_http *http;        /* the server it came through */
    char path[256];
    struct gw_route_match m;
    char method[8];
    char after[GW_ID_MAX + 1], limit[16], purpose[64]; /* query values ("" none) */
    int has_after, has_limit, has_purpose;
    char *body; /* the request body, or the file part of an upload */
    size_t body_len, body_cap, body_max;
    int body_too_big;
    struct MHD_PostProcessor *pp;
    struct gw_upload upload;
    char auth_hash[65]; /* SHA-256 of the presented key; "" when none was given */
    int auth_malformed;
    struct gw_key key;                      /* filled by auth.c */
    void (*key_then)(struct gw_request *r); /* auth.c: what runs once the key is valid */
    int refs;
    int admitting, admitted, started, suspended, answered, gone;
    int admit_repeat;       /* admitted while suspended: MHD repeats the headers' call */
    ev_io watch;            /* the client socket, while suspended */
    ev_timer body_deadline; /* --body-timeout-ms: from the head to the body whole */
    /* the answer, once chosen */
    unsigned int status;
    char *resp;
    size_t resp_len;
    const char *content_type;
    char request_id[128];
    char retry_after[24];
    char *headers; /* more response headers, "Name: value\n" lines (new; freed with r) */
    /* set by a handler: runs once when the client hangs up while waiting */
    void (*on_gone)(struct gw_request *r);
    /* a streamed answer (stream.h): when set before gw_respond, the body
     * comes from this MHD content reader instead of resp */
    ssize_t (*stream_read)(void *cls, uint64_t pos, char *buf, size_t max);
    void *stream_cls;
    void *state; /* the handler's, freed by state_free with r ("Lifetime") */
    void (*state_free)(void *state);
};

/* What runs for a request (borrowed by the server until it stops). */
struct gw_http_hooks {
    /* headers read, no body yet: answer r, or call gw_request_admit(r) */
    void (*admit)(struct gw_request *r);
    /* admitted and the body whole and well-formed: answer r */
    void (*handle)(struct gw_request *r);
};

/* Starts serving on host:port (port 0: any; the bound port is written to
 * *bound when not NULL). metrics_only: only /metrics, /healthz and /readyz
 * (other routes are not found). Returns NULL with err on failure. */
struct gw_http *gw_http_start(struct gw *gw, const char *host, int port, int metrics_only,
                              const struct gw_http_hooks *hooks, int *bound,
                              struct llmq_error *err);

/* Connections of h (NULL-safe: 0) closed for a request head that did not
 * arrive within --header-timeout-ms, and for too many heads pending. */
void gw_http_slow_counts(const struct gw_http *h, unsigned long long *head_timeouts,
                         unsigned long long *pending_evicted);

/* Stops the server (suspended requests must have been answered). */
void gw_http_free(struct gw_http *h);

/* A streamed answer has nothing to send now: suspends r's connection (call
 * from its content reader only) and watches the client socket meanwhile, so
 * a client that leaves is noticed (on_gone). */
void gw_request_pause(struct gw_request *r);
/* Resumes a paused request: MHD calls its content reader again. */
void gw_request_wake(struct gw_request *r);
/* r's body may be read (from hooks->admit, or later from a callback). */
void gw_request_admit(struct gw_request *r);

/* Answers r with status and body (taken: freed by the server). Later answers
 * and answers after the client left are dropped (body freed). */
void gw_respond(struct gw_request *r, unsigned int status, char *body, size_t len);

/* Answers with a JSON value (taken; jansson object) encoded compactly. */
struct json_t;
void gw_respond_json(struct gw_request *r, unsigned int status, struct json_t *v);

/* Answers with e in OpenAI's error shape. */
void gw_respond_error(struct gw_request *r, const struct gw_error *e);

/* Shorthand: builds the error and answers it. */
void gw_respond_errorf(struct gw_request *r, unsigned int status, const char *type,
                       const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* 503: Redis is not reachable. */
void gw_respond_no_redis(struct gw_request *r);

#endif
