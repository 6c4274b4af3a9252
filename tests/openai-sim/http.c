/* Incremental HTTP/1.1 request-head parser (see http.h).
 *
 * Strictness is deliberate: this server is a test double, and a request that
 * a real OpenAI front end would reject should be rejected here too rather
 * than guessed at. Invariant: every span recorded lies inside buf[0..head_len). */
#include "http.h"

#include <string.h>
#include <strings.h>

static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

int sim_span_ieq(const char *buf, struct sim_span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && strncasecmp(buf + s.off, lit, n) == 0;
}

int sim_span_eq(const char *buf, struct sim_span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(buf + s.off, lit, n) == 0;
}

static struct sim_span span(size_t off, size_t len)
{
    struct sim_span s = {(uint32_t)off, (uint32_t)len};
    return s;
}

/* Finds CRLF CRLF in buf[0..len); returns the head length including it, or 0. */
static size_t find_head_end(const char *buf, size_t len)
{
    const char *p = buf;
    const char *end = buf + len;
    while (p + 3 < end) {
        const char *cr = memchr(p, '\r', (size_t)(end - p - 3));
        if (cr == NULL)
            return 0;
        if (cr[1] == '\n' && cr[2] == '\r' && cr[3] == '\n')
            return (size_t)(cr + 4 - buf);
        p = cr + 1;
    }
    return 0;
}

/* Parses "METHOD SP target SP HTTP/1.x" in buf[0..n). Returns 0 or -1. */
static int parse_request_line(const char *buf, size_t n, struct sim_http_req *req, int *minor)
{
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)buf[i]))
        i++;
    if (i == 0 || i >= n || buf[i] != ' ')
        return -1;
    req->method = span(0, i);
    size_t t0 = ++i;
    while (i < n && buf[i] > ' ' && buf[i] != 0x7f)
        i++;
    if (i == t0 || i >= n || buf[i] != ' ' || buf[t0] != '/')
        return -1;
    req->target = span(t0, i - t0);
    const char *q = memchr(buf + t0, '?', i - t0);
    size_t path_len = q ? (size_t)(q - (buf + t0)) : i - t0;
    req->path = span(t0, path_len);
    req->query = q ? span(t0 + path_len + 1, i - t0 - path_len - 1) : span(0, 0);
    i++;
    if (n - i != 8 || memcmp(buf + i, "HTTP/1.", 7) != 0)
        return -1;
    if (buf[i + 7] != '0' && buf[i + 7] != '1')
        return -2; /* HTTP/1.x with an unknown minor, or another major */
    *minor = buf[i + 7] - '0';
    return 0;
}

/* Parses a Content-Length value; returns -1 when it is not plain digits. */
static int64_t parse_length(const char *v, size_t n)
{
    if (n == 0 || n > 18)
        return -1;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

/* Records one header (name buf[ns..ns+nl), value buf[vs..vs+vl)). Returns 0,
 * or an HTTP status for a header that makes the request unacceptable. */
static int take_header(const char *buf, struct sim_span name, struct sim_span value,
                       struct sim_http_req *req, int *te_seen, int *close_seen, int *ka_seen)
{
    const char *v = buf + value.off;
    if (sim_span_ieq(buf, name, "content-length")) {
        int64_t cl = parse_length(v, value.len);
        if (cl < 0 || (req->content_length >= 0 && req->content_length != cl))
            return 400;
        req->content_length = cl;
    } else if (sim_span_ieq(buf, name, "transfer-encoding")) {
        *te_seen = 1;
    } else if (sim_span_ieq(buf, name, "authorization")) {
        req->auth = value;
    } else if (sim_span_ieq(buf, name, "api-key")) {
        req->api_key = value;
    } else if (sim_span_ieq(buf, name, "x-client-request-id")) {
        req->client_request_id = value;
    } else if (sim_span_ieq(buf, name, "connection")) {
        if (sim_span_ieq(buf, value, "close"))
            *close_seen = 1;
        else if (sim_span_ieq(buf, value, "keep-alive"))
            *ka_seen = 1;
    } else if (sim_span_ieq(buf, name, "expect")) {
        if (!sim_span_ieq(buf, value, "100-continue"))
            return 417;
        req->expect_continue = 1;
    }
    return 0;
}

/* Parses the header lines in buf[start..end) (each ending in CRLF). */
static int parse_headers(const char *buf, size_t start, size_t end, struct sim_http_req *req,
                         int minor)
{
    int te_seen = 0, close_seen = 0, ka_seen = 0;
    size_t i = start;
    while (i < end) {
        const char *eol = memchr(buf + i, '\r', end - i);
        if (eol == NULL || (size_t)(eol - buf) + 1 >= end || eol[1] != '\n')
            return 400;
        size_t le = (size_t)(eol - buf);
        size_t c = i;
        while (c < le && is_tchar((unsigned char)buf[c]))
            c++;
        if (c == i || c >= le || buf[c] != ':')
            return 400; /* also rejects obsolete line folding (line starts with SP) */
        struct sim_span name = span(i, c - i);
        size_t vs = c + 1, ve = le;
        while (vs < ve && (buf[vs] == ' ' || buf[vs] == '\t'))
            vs++;
        while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
            ve--;
        for (size_t k = vs; k < ve; k++)
            if ((unsigned char)buf[k] < 0x20 && buf[k] != '\t')
                return 400;
        int st = take_header(buf, name, span(vs, ve - vs), req, &te_seen, &close_seen, &ka_seen);
        if (st != 0)
            return st;
        i = le + 2;
    }
    if (te_seen)
        return 411; /* chunked (or any other coding) request bodies are not supported */
    req->keep_alive = minor == 1 ? !close_seen : (ka_seen && !close_seen);
    return 0;
}

enum sim_http_rc sim_http_parse_head(const char *buf, size_t len, size_t max_head_bytes,
                                     int64_t max_body_bytes, struct sim_http_req *req, int *status,
                                     const char **why)
{
    size_t scan = len < max_head_bytes ? len : max_head_bytes;
    size_t head = find_head_end(buf, scan);
    if (head == 0) {
        if (len >= max_head_bytes) {
            *status = 431;
            *why = "request head too large";
            return SIM_HTTP_ERROR;
        }
        return SIM_HTTP_NEED_MORE;
    }
    memset(req, 0, sizeof(*req));
    req->content_length = -1;
    req->head_len = head;
    const char *eol = memchr(buf, '\r', head);
    int minor = 1;
    int rl = parse_request_line(buf, (size_t)(eol - buf), req, &minor);
    if (rl != 0) {
        *status = rl == -2 ? 505 : 400;
        *why = rl == -2 ? "unsupported HTTP version" : "malformed request line";
        return SIM_HTTP_ERROR;
    }
    int st = parse_headers(buf, (size_t)(eol - buf) + 2, head - 2, req, minor);
    if (st != 0) {
        *status = st;
        *why = st == 411   ? "chunked request bodies are not supported; send Content-Length"
               : st == 417 ? "unsupported Expect"
                           : "malformed header";
        return SIM_HTTP_ERROR;
    }
    if (req->content_length > max_body_bytes) {
        *status = 413;
        *why = "request body too large";
        return SIM_HTTP_ERROR;
    }
    return SIM_HTTP_HEAD_OK;
}
