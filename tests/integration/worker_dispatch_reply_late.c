/* The grant lifetime starts before the dispatch call is sent (docs/limiter.md "What
 * a bucket is charged"): the worker cannot know when in the round trip
 * Redis admitted a grant, so a grant whose dispatch reply came back later
 * than its lifetime is stale however fast the request could go out.
 *
 * The worker reaches Redis through a proxy in this test that holds every
 * reply 1 s (far past the grant lifetime of a 2 s window: 50 ms, grown by
 * stale hand-backs to at most 250 ms) and passes requests at once. One job:
 * while replies are late it is granted and handed back untried, again and
 * again, and never reaches the API; once the proxy stops delaying, it is
 * sent once, its attempt uncounted by the hand-backs. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "job_fields.h"
#include "worker_support.h"

#define MODEL "gpt-4o-mini"
#define PROXY_PAIRS 32
#define DELAY_MS 1000

/* A chunk read from Redis, held until due_ms. */
struct chunk {
    struct chunk *next;
    long long due_ms;
    size_t len;
    char data[];
};

/* One proxied connection: the worker's end, Redis' end, the held replies. */
struct pair {
    int cfd, sfd;
    struct chunk *head, *tail;
};

struct proxy {
    int lfd, port, redis_port;
    int delay_ms; /* atomic: how long replies are held */
    int stop;     /* atomic */
    pthread_t thread;
    struct pair pairs[PROXY_PAIRS];
};

static void pair_close(struct pair *p)
{
    if (p->cfd >= 0)
        close(p->cfd);
    if (p->sfd >= 0)
        close(p->sfd);
    while (p->head != NULL) {
        struct chunk *c = p->head;
        p->head = c->next;
        free(c);
    }
    p->cfd = p->sfd = -1;
    p->tail = NULL;
}

static int write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static void proxy_accept(struct proxy *px)
{
    int cfd = accept(px->lfd, NULL, NULL);
    if (cfd < 0)
        return;
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px->redis_port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(cfd);
        if (sfd >= 0)
            close(sfd);
        return;
    }
    for (int i = 0; i < PROXY_PAIRS; i++) {
        if (px->pairs[i].cfd < 0) {
            px->pairs[i].cfd = cfd;
            px->pairs[i].sfd = sfd;
            return;
        }
    }
    close(cfd);
    close(sfd);
}

/* Passes requests at once and replies delay_ms after they came. */
static void *proxy_main(void *arg)
{
    struct proxy *px = arg;
    char buf[65536];
    while (!__atomic_load_n(&px->stop, __ATOMIC_RELAXED)) {
        struct pollfd fds[1 + 2 * PROXY_PAIRS];
        int who[1 + 2 * PROXY_PAIRS];
        int n = 0;
        fds[n] = (struct pollfd){.fd = px->lfd, .events = POLLIN};
        who[n++] = -1;
        long long now = llmq_test_now_ms(), wait = 20;
        for (int i = 0; i < PROXY_PAIRS; i++) {
            struct pair *p = &px->pairs[i];
            if (p->cfd < 0)
                continue;
            fds[n] = (struct pollfd){.fd = p->cfd, .events = POLLIN};
            who[n++] = i;
            fds[n] = (struct pollfd){.fd = p->sfd, .events = POLLIN};
            who[n++] = i;
            if (p->head != NULL && p->head->due_ms - now < wait)
                wait = p->head->due_ms - now < 0 ? 0 : p->head->due_ms - now;
        }
        if (poll(fds, (nfds_t)n, (int)wait) < 0)
            continue;
        if (fds[0].revents & POLLIN)
            proxy_accept(px);
        for (int k = 1; k < n; k++) {
            struct pair *p = &px->pairs[who[k]];
            if (p->cfd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t got = read(fds[k].fd, buf, sizeof(buf));
            if (got <= 0) {
                pair_close(p);
                continue;
            }
            if (fds[k].fd == p->cfd) {
                if (write_all(p->sfd, buf, (size_t)got) != 0)
                    pair_close(p);
                continue;
            }
            struct chunk *c = malloc(sizeof(*c) + (size_t)got);
            assert_non_null(c);
            c->next = NULL;
            c->len = (size_t)got;
            c->due_ms = llmq_test_now_ms() + __atomic_load_n(&px->delay_ms, __ATOMIC_RELAXED);
            memcpy(c->data, buf, (size_t)got);
            if (p->tail != NULL)
                p->tail->next = c;
            else
                p->head = c;
            p->tail = c;
        }
        now = llmq_test_now_ms();
        for (int i = 0; i < PROXY_PAIRS; i++) {
            struct pair *p = &px->pairs[i];
            while (p->cfd >= 0 && p->head != NULL && p->head->due_ms <= now) {
                struct chunk *c = p->head;
                p->head = c->next;
                if (p->head == NULL)
                    p->tail = NULL;
                int bad = write_all(p->cfd, c->data, c->len);
                free(c);
                if (bad)
                    pair_close(p);
            }
        }
    }
    for (int i = 0; i < PROXY_PAIRS; i++)
        pair_close(&px->pairs[i]);
    return NULL;
}

static void proxy_start(struct proxy *px, int redis_port, int delay_ms)
{
    memset(px, 0, sizeof(*px));
    for (int i = 0; i < PROXY_PAIRS; i++)
        px->pairs[i].cfd = px->pairs[i].sfd = -1;
    px->redis_port = redis_port;
    px->delay_ms = delay_ms;
    px->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(px->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(px->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(px->lfd, 64), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(px->lfd, (struct sockaddr *)&a, &len), 0);
    px->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&px->thread, NULL, proxy_main, px), 0);
}

static void proxy_stop(struct proxy *px)
{
    __atomic_store_n(&px->stop, 1, __ATOMIC_RELAXED);
    pthread_join(px->thread, NULL);
    close(px->lfd);
}

/* llmq-worker for account against sim, reaching Redis at redis_url; its log
 * at log_path. Returns the pid. */
static pid_t worker_start_via(const char *account, const struct sim_proc *sim,
                              const char *redis_url, const char *log_path)
{
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d/v1", sim->port);
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        FILE *f = fopen(log_path, "w");
        if (f != NULL) {
            dup2(fileno(f), 2);
            dup2(fileno(f), 1);
        }
        setenv("LLMQ_REDIS_URL", redis_url, 1);
        setenv("LLMQ_ACCOUNT", account, 1);
        setenv("OPENAI_API_KEY", WORKER_TEST_KEY, 1);
        const char *argv[] = {"llmq-worker", "--base-url",          base,   "--log-level",
                              "info",        "--exit-when-idle-ms", "1500", NULL};
        execv(llmq_test_bin("llmq-worker", 0), (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static void test_late_dispatch_reply_grant_is_stale(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], url[128];
    llmq_test_unique_name(account, sizeof(account), "latereply");
    struct sim_proc sim;
    assert_int_equal(sim_proc_start(&sim, NULL), 0);
    /* A 2 s window: grants live 50 ms, and never more than 250 ms. */
    worker_limits_set(account, MODEL, "--rpm", 100, 2000);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-latereply-%d.jsonl", (int)getpid());
    snprintf(log, sizeof(log), "/tmp/llmq-latereply-%d.log", (int)getpid());
    worker_write_jobs(jobs, "l", 1, MODEL, 20, NULL);
    worker_enqueue(account, jobs);

    int redis_port = 0;
    assert_int_equal(sscanf(llmq_test_redis_url(), "redis://%*[^:]:%d", &redis_port), 1);
    struct proxy px;
    proxy_start(&px, redis_port, DELAY_MS);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", px.port);
    pid_t w = worker_start_via(account, &sim, url, log);

    /* Replies late: granted and handed back, again, never sent. */
    long long deadline = llmq_test_now_ms() + 60000;
    size_t sent_late = 0;
    while (worker_log_count(log, "grant stale") < 3 && sent_late == 0 &&
           llmq_test_now_ms() < deadline) {
        usleep(50000);
        free(sim_log_read(sim.log_file, &sent_late));
    }
    int stale_late = worker_log_count(log, "grant stale");
    printf("# replies 1 s late: %d stale grants handed back, %zu requests sent\n", stale_late,
           sent_late);
    assert_true(stale_late >= 3);
    assert_int_equal(sent_late, 0);

    /* Replies on time: it is sent, once. */
    __atomic_store_n(&px.delay_ms, 0, __ATOMIC_RELAXED);
    assert_int_equal(worker_wait(w, 60000), 0);
    proxy_stop(&px);
    assert_int_equal(sim_proc_stop(&sim), 0);
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    assert_int_equal(n, 1);
    assert_int_equal(e[0].status, 200);
    free(e);
    redisContext *c = llmq_test_redis_connect();
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "llmq:{%s}:", account);
    char *st = llmq_test_job_field(c, prefix, "l-0", "state");
    assert_string_equal(st, "done");
    free(st);
    assert_int_equal(llmq_test_job_int(c, prefix, "l-0", "attempts", -1), 1);
    redisFree(c);
    unlink(jobs);
    unlink(log);
    unlink(sim.log_file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_dispatch_reply_grant_is_stale),
    };
    return cmocka_run_group_tests_name("worker_dispatch_reply_late", tests, NULL, NULL);
}
