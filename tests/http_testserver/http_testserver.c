/* http_testserver: a small HTTP/1.1 keep-alive server on libev for the HTTP
 * client's integration test and benchmark. Not an OpenAI simulator: it plays
 * transport faults on demand, chosen by the request path.
 *
 *   http_testserver [--port N] [--port-file FILE] [--latency-ms N]
 *
 * Routes (query parameters after '?'):
 *   /any               200, JSON body with usage, x-ratelimit-* headers; echoes
 *                      X-Client-Request-Id and the auth header in the body
 *   ?delay=N           answer after N ms (default: --latency-ms)
 *   /reset             read the request, then close with RST (SO_LINGER 0)
 *   /hang              never answer
 *   /big?bytes=N[&chunked=1]  N body bytes, with Content-Length or chunked
 *   /status?code=N     status N with an OpenAI error body (429: retry-after-ms)
 *   /sse               a streamed chat completion with usage in the last chunk
 *   /close             answer with Connection: close, then close
 * One process, one loop; stops on SIGTERM/SIGINT. */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_REQUEST (1 << 20)

struct conn {
    int fd;
    ev_io rd, wr;
    ev_timer delay;
    char *in;
    size_t in_len, in_cap;
    char *out;
    size_t out_len, out_off, out_cap;
    int close_after;
    int busy; /* a request is being answered */
    struct conn *prev, *next;
};

static struct conn *conns; /* every open connection, freed at exit */

static struct ev_loop *loop;
static long latency_ms;

static void conn_close(struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    ev_io_stop(loop, &c->rd);
    ev_io_stop(loop, &c->wr);
    ev_timer_stop(loop, &c->delay);
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Grows the buffer by doubling: /big builds a 1 MB answer from 8 KB pieces,
 * and growing it to the exact size each time copied it ~366 times (O(n^2):
 * 0.75 s under ASan on a quiet machine, over 10 s on a saturated one, which
 * held back every other answer of this one-loop server). */
static void out_append(struct conn *c, const char *data, size_t n)
{
    if (c->out_len + n + 1 > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + n + 1)
            cap *= 2;
        char *nb = realloc(c->out, cap);
        if (nb == NULL)
            abort();
        c->out = nb;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, data, n);
    c->out_len += n;
}

static void out_printf(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(struct conn *c, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0)
        out_append(c, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static void try_write(struct conn *c);

static void wr_cb(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    try_write((struct conn *)w->data);
}

static void process(struct conn *c);

static void try_write(struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            ev_io_start(loop, &c->wr);
            return;
        }
        if (n <= 0) {
            conn_close(c);
            return;
        }
        c->out_off += (size_t)n;
    }
    ev_io_stop(loop, &c->wr);
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = c->out_cap = 0;
    c->busy = 0;
    if (c->close_after) {
        conn_close(c);
        return;
    }
    ev_io_start(loop, &c->rd);
    process(c); /* a pipelined request may already be buffered */
}

/* Value of query parameter key in the request line, or def. */
static long query_long(const char *target, const char *key, long def)
{
    const char *q = strchr(target, '?');
    size_t kl = strlen(key);
    while (q != NULL) {
        q++;
        if (strncmp(q, key, kl) == 0 && q[kl] == '=')
            return strtol(q + kl + 1, NULL, 10);
        q = strchr(q, '&');
    }
    return def;
}

/* Copies the value of header name (case-insensitive) into buf, or "". */
static void header_value(const char *head, const char *name, char *buf, size_t n)
{
    size_t nl = strlen(name);
    buf[0] = '\0';
    for (const char *p = strstr(head, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = strcspn(v, "\r\n");
            if (vl >= n)
                vl = n - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return;
        }
    }
}

static void respond_ok(struct conn *c, const char *head)
{
    char id[256], auth[256], key[256];
    header_value(head, "X-Client-Request-Id", id, sizeof(id));
    header_value(head, "Authorization", auth, sizeof(auth));
    header_value(head, "api-key", key, sizeof(key));
    char body[1024];
    int bl =
        snprintf(body, sizeof(body),
                 "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"echo_id\":\"%s\","
                 "\"echo_auth\":\"%s\",\"echo_api_key\":\"%s\",\"usage\":{\"prompt_tokens\":10,"
                 "\"completion_tokens\":5,\"total_tokens\":15}}",
                 id, auth, key);
    out_printf(c,
               "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
               "x-request-id: req_test123\r\nx-ratelimit-limit-requests: 500\r\n"
               "x-ratelimit-limit-tokens: 30000\r\nx-ratelimit-remaining-requests: 499\r\n"
               "x-ratelimit-remaining-tokens: 29985\r\nx-ratelimit-reset-requests: 120ms\r\n"
               "x-ratelimit-reset-tokens: 6m0s\r\n%s\r\n%s",
               bl, c->close_after ? "Connection: close\r\n" : "", body);
}

static void respond_big(struct conn *c, const char *target)
{
    long n = query_long(target, "bytes", 1024);
    int chunked = query_long(target, "chunked", 0) != 0;
    if (chunked)
        out_printf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    else
        out_printf(c, "HTTP/1.1 200 OK\r\nContent-Length: %ld\r\n\r\n", n);
    char chunk[8192];
    memset(chunk, 'x', sizeof(chunk));
    for (long left = n; left > 0;) {
        size_t k = left > (long)sizeof(chunk) ? sizeof(chunk) : (size_t)left;
        if (chunked)
            out_printf(c, "%zx\r\n", k);
        out_append(c, chunk, k);
        if (chunked)
            out_append(c, "\r\n", 2);
        left -= (long)k;
    }
    if (chunked)
        out_append(c, "0\r\n\r\n", 5);
}

static void respond_status(struct conn *c, const char *target)
{
    long code = query_long(target, "code", 500);
    const char *body = code == 429
                           ? "{\"error\":{\"message\":\"Rate limit reached\",\"type\":"
                             "\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}"
                           : "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\","
                             "\"param\":null,\"code\":null}}";
    out_printf(c,
               "HTTP/1.1 %ld Status\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
               "%s\r\n%s",
               code, strlen(body),
               code == 429 ? "retry-after: 2\r\nretry-after-ms: 1500\r\nx-should-retry: true\r\n"
                           : "",
               body);
}

static void respond_sse(struct conn *c)
{
    const char *body =
        "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n"
        "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,"
        "\"completion_tokens\":3,\"total_tokens\":10}}\n\n"
        "data: [DONE]\n\n";
    out_printf(
        c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %zu\r\n\r\n%s",
        strlen(body), body);
}

/* Builds the answer to the request whose head is head (NUL-terminated). */
static void answer(struct conn *c, const char *head)
{
    char target[512] = "/";
    sscanf(head, "%*s %511s", target);
    if (strncmp(target, "/reset", 6) == 0) {
        struct linger lg = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        conn_close(c);
        return;
    }
    if (strncmp(target, "/hang", 5) == 0)
        return; /* stays busy: never answered */
    if (strncmp(target, "/close", 6) == 0)
        c->close_after = 1;
    if (strncmp(target, "/big", 4) == 0)
        respond_big(c, target);
    else if (strncmp(target, "/status", 7) == 0)
        respond_status(c, target);
    else if (strncmp(target, "/sse", 4) == 0)
        respond_sse(c);
    else
        respond_ok(c, head);
    long d = query_long(target, "delay", latency_ms);
    if (d > 0) {
        ev_timer_set(&c->delay, d / 1000.0, 0.);
        ev_timer_start(loop, &c->delay);
        return;
    }
    try_write(c);
}

static void delay_cb(struct ev_loop *l, ev_timer *w, int revents)
{
    (void)l;
    (void)revents;
    try_write((struct conn *)w->data);
}

/* Handles one complete buffered request, if there is one. */
static void process(struct conn *c)
{
    if (c->busy || c->in_len == 0)
        return;
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (end == NULL)
        return;
    size_t head_len = (size_t)(end - c->in) + 4;
    char save = c->in[head_len - 2];
    c->in[head_len - 2] = '\0';
    char cl[32];
    header_value(c->in, "Content-Length", cl, sizeof(cl));
    size_t body_len = cl[0] ? strtoul(cl, NULL, 10) : 0;
    if (head_len + body_len > c->in_len) {
        c->in[head_len - 2] = save;
        return; /* body not complete yet */
    }
    c->busy = 1;
    char *head = strndup(c->in, head_len);
    memmove(c->in, c->in + head_len + body_len, c->in_len - head_len - body_len);
    c->in_len -= head_len + body_len;
    ev_io_stop(loop, &c->rd); /* no pipelining: one request at a time */
    answer(c, head);
    free(head);
}

static void rd_cb(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    struct conn *c = w->data;
    if (c->in_cap - c->in_len < 4096) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
        if (cap > MAX_REQUEST) {
            conn_close(c);
            return;
        }
        c->in = realloc(c->in, cap + 1);
        if (c->in == NULL)
            abort();
        c->in_cap = cap;
    }
    ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_close(c);
        return;
    }
    c->in_len += (size_t)n;
    c->in[c->in_len] = '\0';
    process(c);
}

static void accept_cb(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    for (;;) {
        int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct conn *c = calloc(1, sizeof(*c));
        if (c == NULL)
            abort();
        c->fd = fd;
        ev_io_init(&c->rd, rd_cb, fd, EV_READ);
        ev_io_init(&c->wr, wr_cb, fd, EV_WRITE);
        ev_init(&c->delay, delay_cb);
        c->rd.data = c->wr.data = c->delay.data = c;
        c->next = conns;
        if (conns)
            conns->prev = c;
        conns = c;
        ev_io_start(loop, &c->rd);
    }
}

static void stop_cb(struct ev_loop *l, ev_signal *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(l, EVBREAK_ALL);
}

int main(int argc, char **argv)
{
    int port = 0;
    const char *port_file = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--port-file") == 0)
            port_file = argv[i + 1];
        else if (strcmp(argv[i], "--latency-ms") == 0)
            latency_ms = strtol(argv[i + 1], NULL, 10);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 8192) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        perror("http_testserver: bind/listen");
        return 1;
    }
    if (port_file != NULL) {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (f == NULL || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) != 0 ||
            rename(tmp, port_file) != 0) {
            perror("http_testserver: port file");
            return 1;
        }
    }
    loop = EV_DEFAULT;
    ev_io lw;
    ev_io_init(&lw, accept_cb, lfd, EV_READ);
    ev_io_start(loop, &lw);
    ev_signal s1, s2;
    ev_signal_init(&s1, stop_cb, SIGTERM);
    ev_signal_init(&s2, stop_cb, SIGINT);
    ev_signal_start(loop, &s1);
    ev_signal_start(loop, &s2);
    ev_run(loop, 0);
    while (conns != NULL)
        conn_close(conns);
    close(lfd);
    return 0;
}
