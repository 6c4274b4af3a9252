/* Incremental HTTP/1.1 request-head parser for openai-sim.
 *
 * The parser sees the bytes a connection has buffered so far, starting at the
 * first byte of a request. It finds the end of the head (CRLF CRLF), checks
 * the request line and headers and records the pieces the simulator needs as
 * offsets into the buffer (offsets, not pointers: the buffer may move when it
 * grows while the body is still arriving). Bodies are Content-Length only; a
 * chunked request body is refused with 411. Nothing here allocates. */
#ifndef SIM_HTTP_H
#define SIM_HTTP_H

#include <stddef.h>
#include <stdint.h>

/* A slice of the connection's read buffer. len 0 means absent. */
struct sim_span {
    uint32_t off;
    uint32_t len;
};

struct sim_http_req {
    struct sim_span method;
    struct sim_span target;            /* path and query as sent */
    struct sim_span path;              /* target up to '?' */
    struct sim_span query;             /* after '?', may be empty */
    struct sim_span auth;              /* Authorization value */
    struct sim_span api_key;           /* api-key value (Azure style) */
    struct sim_span client_request_id; /* X-Client-Request-Id value */
    size_t head_len;                   /* bytes of request line + headers + blank line */
    int64_t content_length;            /* -1 when absent */
    int keep_alive;                    /* 1 unless HTTP/1.0 or Connection: close */
    int expect_continue;               /* Expect: 100-continue */
};

enum sim_http_rc {
    SIM_HTTP_NEED_MORE = 0, /* head incomplete: read more */
    SIM_HTTP_HEAD_OK,       /* head parsed; body is content_length bytes after head_len */
    SIM_HTTP_ERROR          /* malformed: answer *status and close */
};

/* Parses the head of the request at buf[0..len). max_head_bytes bounds the
 * head (431 past it); max_body_bytes bounds Content-Length (413 past it).
 * Fills *req on SIM_HTTP_HEAD_OK; on SIM_HTTP_ERROR sets *status to the HTTP
 * status to answer (400, 411, 413, 431, 505) and *why to a static reason. */
enum sim_http_rc sim_http_parse_head(const char *buf, size_t len, size_t max_head_bytes,
                                     int64_t max_body_bytes, struct sim_http_req *req, int *status,
                                     const char **why);

/* 1 when span s of buf equals the NUL-terminated string lit, case-insensitively. */
int sim_span_ieq(const char *buf, struct sim_span s, const char *lit);

/* 1 when span s of buf equals lit exactly. */
int sim_span_eq(const char *buf, struct sim_span s, const char *lit);

#endif
