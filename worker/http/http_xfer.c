/* One HTTP transfer of the worker's client: builds a curl easy handle for a
 * request, collects the response body (bounded) and the rate-limit headers,
 * and turns curl's result into an llmq_http_outcome.
 *
 * Ownership: the transfer owns its easy handle, its header list (the only
 * place the API key is kept; wiped with explicit_bzero before it is freed),
 * its copy of the request body (curl's COPYPOSTFIELDS) and the response body.
 * The body never grows past max_body_bytes: the write callback stops the
 * transfer instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "http/http_xfer.h"

#define MIN_BODY_CAP 1024

static int has_crlf(const char *s)
{
    return s != NULL && strpbrk(s, "\r\n") != NULL;
}

/* Appends "name: value" (value may be NULL for "name:", which removes a
 * default header) to *list. The temporary line is wiped, as it may hold a
 * key. Returns 0, or -1 when out of memory. */
static int add_header(struct curl_slist **list, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = value ? strlen(value) : 0;
    char *line = malloc(nl + vl + 3);
    if (line == NULL)
        return -1;
    memcpy(line, name, nl);
    line[nl] = ':';
    if (value != NULL) {
        line[nl + 1] = ' ';
        memcpy(line + nl + 2, value, vl);
        line[nl + 2 + vl] = '\0';
    } else {
        line[nl + 1] = '\0';
    }
    struct curl_slist *n = curl_slist_append(*list, line);
    explicit_bzero(line, nl + vl + 2);
    free(line);
    if (n == NULL)
        return -1;
    *list = n;
    return 0;
}

static void wipe_headers(struct curl_slist *list)
{
    for (struct curl_slist *p = list; p != NULL; p = p->next)
        explicit_bzero(p->data, strlen(p->data));
    curl_slist_free_all(list);
}

static enum llmq_rc check_request(const struct llmq_http_request *req, struct llmq_error *err)
{
    if (req == NULL || req->url == NULL || req->url[0] == '\0')
        return llmq_error_set(err, LLMQ_EINVAL, "http: request without a URL");
    if (req->body == NULL && req->body_len > 0)
        return llmq_error_set(err, LLMQ_EINVAL, "http: body_len without body");
    if (req->auth != LLMQ_HTTP_AUTH_NONE && (req->api_key == NULL || req->api_key[0] == '\0'))
        return llmq_error_set(err, LLMQ_EINVAL, "http: request without an API key");
    if (has_crlf(req->api_key) || has_crlf(req->client_request_id) || has_crlf(req->content_type) ||
        has_crlf(req->url))
        return llmq_error_set(err, LLMQ_EINVAL, "http: CR or LF in a header value or URL");
    for (const char *const *h = req->extra_headers; h != NULL && *h != NULL; h++)
        if (has_crlf(*h) || strchr(*h, ':') == NULL)
            return llmq_error_set(err, LLMQ_EINVAL, "http: bad extra header (needs 'Name: value')");
    return LLMQ_OK;
}

static int build_headers(struct llmq_http_xfer *x, const struct llmq_http_request *req)
{
    struct curl_slist **l = &x->headers;
    if (add_header(l, "Content-Type", req->content_type ? req->content_type : "application/json"))
        return -1;
    if (add_header(l, "Expect", NULL)) /* no 100-continue round trip for large bodies */
        return -1;
    if (req->auth == LLMQ_HTTP_AUTH_BEARER) {
        size_t kl = strlen(req->api_key);
        char *v = malloc(kl + 8);
        if (v == NULL)
            return -1;
        memcpy(v, "Bearer ", 7);
        memcpy(v + 7, req->api_key, kl + 1);
        int rc = add_header(l, "Authorization", v);
        explicit_bzero(v, kl + 7);
        free(v);
        if (rc)
            return -1;
    } else if (req->auth == LLMQ_HTTP_AUTH_API_KEY && add_header(l, "api-key", req->api_key)) {
        return -1;
    }
    if (req->client_request_id && add_header(l, "X-Client-Request-Id", req->client_request_id))
        return -1;
    for (const char *const *h = req->extra_headers; h != NULL && *h != NULL; h++) {
        struct curl_slist *n = curl_slist_append(*l, *h);
        if (n == NULL)
            return -1;
        *l = n;
    }
    return 0;
}

/* CURLOPT_WRITEFUNCTION: appends to the body, or stops the transfer (returns
 * a short count → CURLE_WRITE_ERROR) when it would exceed max_body. */
static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct llmq_http_xfer *x = userdata;
    size_t len = size * nmemb;
    if (len > x->max_body - x->body_len) {
        x->too_big = 1;
        return 0;
    }
    if (x->body_discard) { /* on_data takes it; only its length is counted */
        x->body_len += len;
        long status = 0;
        (void)curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        if (x->on_data(data, len, status, x->data_privdata) != 0) {
            x->aborted = 1;
            return 0;
        }
        return len;
    }
    size_t need = x->body_len + len + 1;
    if (need > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : MIN_BODY_CAP;
        curl_off_t hint = -1;
        if (x->body_cap == 0 &&
            curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &hint) == CURLE_OK &&
            hint > 0 && (uint64_t)hint <= x->max_body)
            cap = (size_t)hint + 1; /* one allocation when Content-Length is known */
        while (cap < need)
            cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        if (cap > x->max_body + 1)
            cap = x->max_body + 1;
        char *nb = realloc(x->body, cap);
        if (nb == NULL)
            return 0;
        x->body = nb;
        x->body_cap = cap;
    }
    memcpy(x->body + x->body_len, data, len);
    x->body_len += len;
    x->body[x->body_len] = '\0';
    if (x->on_data != NULL) {
        long status = 0;
        (void)curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        if (x->on_data(data, len, status, x->data_privdata) != 0) {
            x->aborted = 1;
            return 0; /* CURLE_WRITE_ERROR: the transfer ends */
        }
    }
    return len;
}

#define PROCESSING_HEADER "openai-processing-ms:"

/* The value of an "openai-processing-ms: N" line data[0..len) (the API's
 * time spent on the request after it counted it), or -1 for another line
 * or a value that is not a small decimal integer. */
static int64_t processing_ms_of(const char *data, size_t len)
{
    size_t n = sizeof(PROCESSING_HEADER) - 1, i;
    if (len <= n || strncasecmp(data, PROCESSING_HEADER, n) != 0)
        return -1;
    for (i = n; i < len && (data[i] == ' ' || data[i] == '\t'); i++)
        ;
    int64_t v = 0;
    size_t digits = 0;
    for (; i < len && data[i] >= '0' && data[i] <= '9' && digits < 12; i++, digits++)
        v = v * 10 + (data[i] - '0');
    return digits > 0 ? v : -1;
}

/* CURLOPT_HEADERFUNCTION: one header line (or a status line, which resets). */
static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct llmq_http_xfer *x = userdata;
    size_t len = size * nmemb;
    llmq_ratelimit_headers_feed_line(&x->rl, data, len, llmq_wall_ms());
    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0)
        x->processing_ms = -1;
    else if (len > 0 && (data[0] == 'o' || data[0] == 'O')) {
        int64_t v = processing_ms_of(data, len);
        if (v >= 0)
            x->processing_ms = v;
    }
    return len;
}

/* CURLOPT_PREREQFUNCTION: the connection is ready and the request is about
 * to be sent; past its send-by time it is not (curl ends the transfer with
 * CURLE_ABORTED_BY_CALLBACK before writing a byte). */
static int on_prereq(void *userdata, char *conn_primary_ip, char *conn_local_ip,
                     int conn_primary_port, int conn_local_port)
{
    (void)conn_primary_ip;
    (void)conn_local_ip;
    (void)conn_primary_port;
    (void)conn_local_port;
    struct llmq_http_xfer *x = userdata;
    x->prereq_seen = 1;
    x->prereq_ms = llmq_monotonic_ms();
    if (x->send_by_ms == 0 || x->prereq_ms <= x->send_by_ms)
        return CURL_PREREQFUNC_OK;
    x->stale = 1;
    return CURL_PREREQFUNC_ABORT;
}

#define SETOPT(opt, val)                                                                           \
    do {                                                                                           \
        if (curl_easy_setopt(e, (opt), (val)) != CURLE_OK)                                         \
            goto fail;                                                                             \
    } while (0)

static int set_options(struct llmq_http_xfer *x, const struct llmq_http_settings *s,
                       const struct llmq_http_request *req)
{
    CURL *e = x->easy;
    SETOPT(CURLOPT_URL, req->url);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    SETOPT(CURLOPT_PRIVATE, x);
    SETOPT(CURLOPT_ERRORBUFFER, x->errbuf);
    if (req->get) {
        SETOPT(CURLOPT_HTTPGET, 1L);
    } else {
        SETOPT(CURLOPT_POST, 1L);
        SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        if (req->body_borrowed || req->body_len == 0)
            SETOPT(CURLOPT_POSTFIELDS, req->body_len ? req->body : "");
        else
            SETOPT(CURLOPT_COPYPOSTFIELDS, req->body);
    }
    SETOPT(CURLOPT_HTTPHEADER, x->headers);
    SETOPT(CURLOPT_WRITEFUNCTION, on_body);
    SETOPT(CURLOPT_WRITEDATA, x);
    SETOPT(CURLOPT_HEADERFUNCTION, on_header);
    SETOPT(CURLOPT_HEADERDATA, x);
    /* Always: the client moves a transfer that has not reached it to another
     * pool (http.c); a send-by time is checked there too. */
    x->send_by_ms = req->send_by_ms > 0 ? req->send_by_ms : 0;
    SETOPT(CURLOPT_PREREQFUNCTION, on_prereq);
    SETOPT(CURLOPT_PREREQDATA, x);
    SETOPT(CURLOPT_TIMEOUT_MS, req->timeout_ms > 0 ? req->timeout_ms : s->timeout_ms);
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS, s->connect_timeout_ms);
    SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
    SETOPT(CURLOPT_BUFFERSIZE, s->buffer_bytes);
    SETOPT(CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
    SETOPT(CURLOPT_MAXFILESIZE_LARGE,
           (curl_off_t)(req->max_body_bytes > 0 ? req->max_body_bytes : s->max_body_bytes));
    SETOPT(CURLOPT_SSL_VERIFYPEER, 1L);
    SETOPT(CURLOPT_SSL_VERIFYHOST, 2L);
    if (s->ca_file != NULL)
        SETOPT(CURLOPT_CAINFO, s->ca_file);
    SETOPT(CURLOPT_USERAGENT, s->user_agent);
    return 0;
fail:
    return -1;
}

int llmq_http_xfer_use_pool(struct llmq_http_xfer *x, const struct llmq_http_settings *s,
                            int per_request)
{
    CURL *e = x->easy;
    int mux = !per_request && s->version == LLMQ_HTTP_PREFER_H2;
    SETOPT(CURLOPT_HTTP_VERSION, mux ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_1_1);
    /* PIPEWAIT (wait for a connection that may multiplex instead of opening
     * another) only where ALPN answers quickly: over TLS with h2 preferred,
     * the multiplexed pool. Over HTTP/1.1 a connection carries one request
     * at a time: waiting would hold every other transfer back. */
    SETOPT(CURLOPT_PIPEWAIT, mux ? 1L : 0L);
    return 0;
fail:
    return -1;
}

enum llmq_rc llmq_http_xfer_new(const struct llmq_http_settings *s,
                                const struct llmq_http_request *req, struct llmq_http_xfer **out,
                                struct llmq_error *err)
{
    *out = NULL;
    enum llmq_rc rc = check_request(req, err);
    if (rc != LLMQ_OK)
        return rc;
    struct llmq_http_xfer *x = calloc(1, sizeof(*x));
    if (x == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "http: out of memory for a transfer");
    x->max_body = req->max_body_bytes > 0 ? req->max_body_bytes : s->max_body_bytes;
    x->processing_ms = -1;
    x->easy = curl_easy_init();
    if (x->easy == NULL || build_headers(x, req) != 0) {
        llmq_http_xfer_free(x);
        return llmq_error_set(err, LLMQ_ENOMEM, "http: out of memory setting up a transfer");
    }
    if (set_options(x, s, req) != 0) {
        llmq_http_xfer_free(x);
        return llmq_error_set(err, LLMQ_EHTTP, "http: curl rejected an option (URL or body)");
    }
    x->asked_ms = req->asked_ms;
    x->on_data = req->on_data;
    x->data_privdata = req->data_privdata;
    x->body_discard = req->body_discard && req->on_data != NULL;
    x->start_ms = llmq_monotonic_ms();
    *out = x;
    return LLMQ_OK;
}

static enum llmq_http_outcome outcome_of(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return LLMQ_HTTP_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return LLMQ_HTTP_TIMEOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return LLMQ_HTTP_CONNECT_ERROR;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
        return LLMQ_HTTP_TLS_ERROR;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return LLMQ_HTTP_RESET;
    case CURLE_FILESIZE_EXCEEDED:
        return LLMQ_HTTP_TOO_BIG;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return LLMQ_HTTP_PROTOCOL_ERROR;
    default:
        return LLMQ_HTTP_OTHER;
    }
}

/* The transfer's lateness after its admission (http_request.h,
 * llmq_http_response.late_ms), or -1: an upper bound. Before the send, the
 * pre-request callback's own clock reading: curl's pretransfer time counts
 * from the transfer's last connect attempt, so it leaves out the time a
 * transfer waited for a free connection of its pool. After it, curl's
 * pretransfer to first-byte time (both from that attempt), rounded up, less
 * the API's processing time. */
static int64_t late_ms_of(struct llmq_http_xfer *x)
{
    curl_off_t pre_us = 0, first_us = 0;
    if (x->asked_ms <= 0 || x->prereq_ms <= 0 || x->processing_ms < 0 || x->result != CURLE_OK ||
        curl_easy_getinfo(x->easy, CURLINFO_PRETRANSFER_TIME_T, &pre_us) != CURLE_OK ||
        curl_easy_getinfo(x->easy, CURLINFO_STARTTRANSFER_TIME_T, &first_us) != CURLE_OK ||
        first_us <= 0 || first_us < pre_us)
        return -1;
    int64_t after = (int64_t)(first_us - pre_us + 999) / 1000 - x->processing_ms;
    int64_t before = x->prereq_ms - x->asked_ms;
    return (before > 0 ? before : 0) + (after > 0 ? after : 0);
}

void llmq_http_xfer_response(struct llmq_http_xfer *x, struct llmq_http_response *resp,
                             int64_t now_ms)
{
    static char empty[1];
    memset(resp, 0, sizeof(*resp));
    resp->curl_code = (int)x->result;
    resp->aborted = x->aborted;
    resp->pool_full = x->pool_full;
    resp->pool_connections = x->pool_connections;
    resp->pool_ahead = x->pool_ahead;
    if (x->cancelled || x->aborted)
        resp->outcome = LLMQ_HTTP_CANCELLED;
    else if (x->too_big)
        resp->outcome = LLMQ_HTTP_TOO_BIG;
    else if (x->stale)
        resp->outcome = LLMQ_HTTP_STALE;
    else
        resp->outcome = outcome_of(x->result);
    if (x->aborted)
        resp->error = "aborted";
    else if (resp->outcome == LLMQ_HTTP_CANCELLED)
        resp->error = "cancelled: the HTTP client was freed";
    else if (resp->outcome == LLMQ_HTTP_TOO_BIG)
        resp->error = "response body over the size limit";
    else if (resp->outcome == LLMQ_HTTP_STALE)
        resp->error = "not sent: its send-by time passed before the connection was ready";
    else if (x->result == CURLE_OK)
        resp->error = "";
    else
        resp->error = x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->result);
    long v = 0, sent = 0;
    if (curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &v) == CURLE_OK)
        resp->status = v;
    v = 0;
    if (curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &v) == CURLE_OK)
        resp->http_version = v;
    if (curl_easy_getinfo(x->easy, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK)
        resp->request_sent = sent > 0;
    resp->body = x->body ? x->body : empty;
    resp->body_len = x->body ? x->body_len : 0;
    empty[0] = '\0';
    resp->headers = x->rl;
    resp->elapsed_ms = now_ms - x->start_ms;
    resp->late_ms = late_ms_of(x);
}

void llmq_http_xfer_free(struct llmq_http_xfer *x)
{
    if (x == NULL)
        return;
    if (x->easy != NULL)
        curl_easy_cleanup(x->easy);
    wipe_headers(x->headers);
    free(x->body);
    free(x);
}
