/* loadgen: a closed-loop HTTP/1.1 load generator for benchmarks.
 *
 * N keep-alive connections to one host:port, each sending the same POST
 * again as soon as the previous answer is complete, for a bounded duration.
 * Raw non-blocking sockets on one epoll loop, one thread: its own cost per
 * request is a memcmp-level parse, so on a 2-core machine it leaves one core
 * to the server under test. Prints one line of key=value results:
 *   requests, seconds, rps, status_2xx, status_429, status_other, errors,
 *   peak_outstanding (requests sent and not yet answered at the same time),
 *   p50_ms, p99_ms, max_ms (latency from a request's first byte sent to its
 *   answer; max_ms shows a stall that a closed loop's percentiles hide).
 * Answers are framed by Content-Length or a chunked body's final 0-chunk.
 *
 * usage: loadgen --port N [--host A] [--conns N] [--duration-s S]
 *                [--path P] [--body JSON] [--header "Name: v"] [--key K]
 * (--key: the bearer token sent, default sk-loadgen) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct lg_conn {
    int fd;
    int connected;
    int outstanding; /* a request is written (or being written) and unanswered */
    size_t wpos;     /* bytes of the request written */
    double sent_at;  /* when the outstanding request started */
    char *in;
    size_t in_len, in_cap;
};

struct lg_state {
    char *req;
    size_t req_len;
    long long requests, s2xx, s429, sother, errors;
    long long outstanding, peak_outstanding;
    int epfd;
    float *lat_ms; /* one per answer */
    size_t n_lat, cap_lat;
};

static void record_latency(struct lg_state *st, double ms)
{
    if (st->n_lat == st->cap_lat) {
        size_t cap = st->cap_lat ? st->cap_lat * 2 : 65536;
        float *l = realloc(st->lat_ms, cap * sizeof(*l));
        if (l == NULL)
            return;
        st->lat_ms = l;
        st->cap_lat = cap;
    }
    st->lat_ms[st->n_lat++] = (float)ms;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static double percentile(struct lg_state *st, double p)
{
    if (st->n_lat == 0)
        return 0;
    size_t i = (size_t)(p * (double)(st->n_lat - 1) + 0.5);
    return st->lat_ms[i];
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Length of the complete answer at the start of buf, or 0 when incomplete. */
static size_t answer_len(const char *buf, size_t len, int *status)
{
    const char *end = memmem(buf, len, "\r\n\r\n", 4);
    if (end == NULL || len < 12)
        return 0;
    size_t head = (size_t)(end - buf) + 4;
    *status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    const char *cl = memmem(buf, head, "Content-Length: ", 16);
    if (cl != NULL) {
        size_t body = (size_t)strtoul(cl + 16, NULL, 10);
        return len >= head + body ? head + body : 0;
    }
    const char *fin = memmem(buf + head - 2, len - head + 2, "\r\n0\r\n\r\n", 7);
    return fin != NULL ? (size_t)(fin - buf) + 7 : 0;
}

static int conn_send(struct lg_state *st, struct lg_conn *c)
{
    if (!c->outstanding) {
        c->outstanding = 1;
        c->wpos = 0;
        c->sent_at = now_s();
        if (++st->outstanding > st->peak_outstanding)
            st->peak_outstanding = st->outstanding;
    }
    while (c->wpos < st->req_len) {
        ssize_t n = send(c->fd, st->req + c->wpos, st->req_len - c->wpos, MSG_NOSIGNAL);
        if (n > 0) {
            c->wpos += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        return -1;
    }
    return 0;
}

/* Reads answers; sends the next request after each. Returns -1 on a dead connection. */
static int conn_read(struct lg_state *st, struct lg_conn *c, int keep_going)
{
    for (;;) {
        if (c->in_cap - c->in_len < 16384) {
            c->in_cap = c->in_cap ? c->in_cap * 2 : 65536;
            c->in = realloc(c->in, c->in_cap);
            if (c->in == NULL)
                return -1;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n == 0)
            return -1;
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->in_len += (size_t)n;
        int status = 0;
        size_t alen;
        while ((alen = answer_len(c->in, c->in_len, &status)) > 0) {
            st->requests++;
            record_latency(st, (now_s() - c->sent_at) * 1000.0);
            if (status >= 200 && status < 300)
                st->s2xx++;
            else if (status == 429)
                st->s429++;
            else
                st->sother++;
            memmove(c->in, c->in + alen, c->in_len - alen);
            c->in_len -= alen;
            c->outstanding = 0;
            st->outstanding--;
            if (keep_going && conn_send(st, c) != 0)
                return -1;
        }
    }
}

static int conn_open(struct lg_state *st, struct lg_conn *c, const struct sockaddr_in *a)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (const struct sockaddr *)a, sizeof(*a)) != 0 && errno != EINPROGRESS)
        return -1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
    return epoll_ctl(st->epfd, EPOLL_CTL_ADD, c->fd, &ev);
}

static void build_request(struct lg_state *st, const char *host, int port, const char *path,
                          const char *body, const char *header, const char *key)
{
    size_t cap = strlen(body) + strlen(path) + (header ? strlen(header) : 0) + strlen(key) + 512;
    st->req = malloc(cap);
    if (st->req == NULL)
        exit(1);
    int n = snprintf(st->req, cap,
                     "POST %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\n%s%sContent-Length: %zu\r\n\r\n%s",
                     path, host, port, key, header ? header : "", header ? "\r\n" : "",
                     strlen(body), body);
    st->req_len = (size_t)n;
}

static long parse_long(const char *flag, const char *v, long lo, long hi)
{
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "loadgen: %s: invalid value\n", flag);
        exit(2);
    }
    return x;
}

struct lg_args {
    const char *host, *path, *body, *header, *key;
    long port, conns;
    double duration_s;
};

static void parse_args(int argc, char **argv, struct lg_args *a)
{
    a->host = "127.0.0.1";
    a->path = "/v1/chat/completions";
    a->header = NULL;
    a->key = "sk-loadgen";
    a->body = "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":"
              "\"Say hello\"}],\"max_tokens\":32}";
    a->port = 0;
    a->conns = 64;
    a->duration_s = 3.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (strcmp(f, "--host") == 0)
            a->host = v;
        else if (strcmp(f, "--port") == 0)
            a->port = parse_long(f, v, 1, 65535);
        else if (strcmp(f, "--conns") == 0)
            a->conns = parse_long(f, v, 1, 100000);
        else if (strcmp(f, "--duration-s") == 0)
            a->duration_s = (double)parse_long(f, v, 1, 600);
        else if (strcmp(f, "--path") == 0)
            a->path = v;
        else if (strcmp(f, "--body") == 0)
            a->body = v;
        else if (strcmp(f, "--header") == 0)
            a->header = v;
        else if (strcmp(f, "--key") == 0)
            a->key = v;
        else {
            fprintf(stderr, "loadgen: unknown flag %s\n", f);
            exit(2);
        }
    }
    if (a->port == 0 || argc % 2 == 0) {
        fprintf(stderr, "usage: loadgen --port N [--host A] [--conns N] [--duration-s S] "
                        "[--path P] [--body JSON] [--header 'Name: v'] [--key K]\n");
        exit(2);
    }
}

static void conn_drop(struct lg_state *st, struct lg_conn *c)
{
    st->errors++;
    if (c->outstanding)
        st->outstanding--;
    epoll_ctl(st->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->outstanding = 0;
}

/* Drives every connection until the deadline or until all have died. */
static void run_loop(struct lg_state *st, long open_conns, double end)
{
    struct epoll_event evs[256];
    while (open_conns > 0) {
        double t = now_s();
        if (t >= end)
            break;
        int n = epoll_wait(st->epfd, evs, 256, (int)((end - t) * 1000) + 1);
        for (int i = 0; i < n; i++) {
            struct lg_conn *c = evs[i].data.ptr;
            int bad = (evs[i].events & (EPOLLERR | EPOLLHUP)) != 0;
            if (!bad && (evs[i].events & EPOLLOUT) && (!c->outstanding || c->wpos < st->req_len))
                bad = conn_send(st, c) != 0;
            if (!bad && (evs[i].events & EPOLLIN))
                bad = conn_read(st, c, 1) != 0;
            if (bad) {
                conn_drop(st, c);
                open_conns--;
            }
        }
    }
}

int main(int argc, char **argv)
{
    struct lg_args a;
    parse_args(argc, argv, &a);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct lg_state st = {0};
    build_request(&st, a.host, (int)a.port, a.path, a.body, a.header, a.key);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)a.port)};
    if (inet_pton(AF_INET, a.host, &sa.sin_addr) != 1 || (st.epfd = epoll_create1(0)) < 0) {
        fprintf(stderr, "loadgen: bad host or no epoll\n");
        return 2;
    }
    struct lg_conn *cs = calloc((size_t)a.conns, sizeof(*cs));
    if (cs == NULL)
        return 1;
    for (long i = 0; i < a.conns; i++) {
        if (conn_open(&st, &cs[i], &sa) != 0) {
            fprintf(stderr, "loadgen: connection %ld: %s\n", i, strerror(errno));
            return 1;
        }
    }
    double t0 = now_s();
    run_loop(&st, a.conns, t0 + a.duration_s);
    double secs = now_s() - t0;
    /* No answer at all (every connection refused or reset, or a server that
     * never answered) leaves lat_ms NULL: qsort must not be given it. */
    if (st.n_lat > 1)
        qsort(st.lat_ms, st.n_lat, sizeof(*st.lat_ms), cmp_float);
    printf("requests=%lld seconds=%.3f rps=%.0f status_2xx=%lld status_429=%lld "
           "status_other=%lld errors=%lld peak_outstanding=%lld p50_ms=%.2f p99_ms=%.2f "
           "max_ms=%.2f\n",
           st.requests, secs, (double)st.requests / secs, st.s2xx, st.s429, st.sother, st.errors,
           st.peak_outstanding, percentile(&st, 0.50), percentile(&st, 0.99),
           st.n_lat ? (double)st.lat_ms[st.n_lat - 1] : 0.0);
    free(st.lat_ms);
    for (long i = 0; i < a.conns; i++) {
        if (cs[i].fd >= 0)
            close(cs[i].fd);
        free(cs[i].in);
    }
    free(cs);
    free(st.req);
    return st.errors > 0 && st.requests == 0 ? 1 : 0;
}
