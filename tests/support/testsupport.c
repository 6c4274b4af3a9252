/* Test helpers: locating and spawning real redis-servers, free ports, names. */
#include "testsupport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *llmq_test_redis_url(void)
{
    static char url[256];
    if (url[0] != '\0')
        return url;
    const char *env = getenv("LLMQ_TEST_REDIS_URL");
    if (env != NULL && env[0] != '\0') {
        snprintf(url, sizeof(url), "%s", env);
        return url;
    }
    const char *file = getenv("LLMQ_TEST_REDIS_URL_FILE");
    FILE *f = file ? fopen(file, "r") : NULL;
    if (f == NULL || fgets(url, sizeof(url), f) == NULL) {
        fprintf(stderr, "test: no redis-server: set LLMQ_TEST_REDIS_URL or run under ctest "
                        "(fixture redis_fixture_start)\n");
        exit(1);
    }
    fclose(f);
    url[strcspn(url, "\r\n")] = '\0';
    return url;
}

redisContext *llmq_test_redis_connect(void)
{
    struct timeval tv = {5, 0};
    const char *url = llmq_test_redis_url();
    int port = 6379;
    char host[128] = "127.0.0.1";
    if (sscanf(url, "redis://%127[^:]:%d", host, &port) < 1) {
        fprintf(stderr, "test: bad redis url %s\n", url);
        exit(1);
    }
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c == NULL || c->err) {
        fprintf(stderr, "test: cannot connect to %s\n", url);
        exit(1);
    }
    return c;
}

long long llmq_test_redis_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

int llmq_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("test: free port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

void llmq_test_unique_name(char *buf, size_t n, const char *prefix)
{
    static int counter;
    snprintf(buf, n, "%s-%d-%d-%lld", prefix, (int)getpid(), ++counter,
             (long long)time(NULL) % 100000);
}

pid_t llmq_test_fork(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* The parent may have died between fork() and prctl(): then the
         * signal would never come. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
    }
    return pid;
}

long long llmq_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ping(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (c != NULL && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return ok;
}

int llmq_test_redis_start(struct llmq_test_redis *s, const char *extra_args)
{
    const char *server = getenv("REDIS_SERVER");
    if (server == NULL || server[0] == '\0')
        server = "redis-server";
    if (s->port == 0)
        s->port = llmq_test_free_port();
    if (s->dir[0] == '\0') {
        snprintf(s->dir, sizeof(s->dir), "/tmp/llmq-test-redis-XXXXXX");
        if (mkdtemp(s->dir) == NULL)
            return -1;
    }
    snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d/0", s->port);
    char port_str[16];
    snprintf(port_str, sizeof(port_str), "%d", s->port);
    char extra[512] = "";
    if (extra_args != NULL)
        snprintf(extra, sizeof(extra), "%s", extra_args);
    const char *argv[64] = {server, "--port", port_str, "--bind",    "127.0.0.1", "--save",
                            "",     "--dir",  s->dir,   "--logfile", "redis.log"};
    int argc = 11;
    /* Split extra in place on spaces. */
    for (char *p = extra; *p != '\0' && argc < 62;) {
        while (*p == ' ')
            *p++ = '\0';
        if (*p == '\0')
            break;
        argv[argc++] = p;
        while (*p != '\0' && *p != ' ')
            p++;
    }
    argv[argc] = NULL;
    pid_t pid = llmq_test_fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execvp(server, (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 200; i++) {
        if (ping(s->port))
            return 0;
        usleep(25000);
    }
    llmq_test_redis_stop(s);
    return -1;
}

void llmq_test_redis_stop(struct llmq_test_redis *s)
{
    if (s->pid <= 0)
        return;
    /* A server a test stopped (SIGSTOP, a hung Redis) would take SIGTERM
     * only when continued: continue it, so stopping never waits 5 s. */
    kill(s->pid, SIGCONT);
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 500; i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
        usleep(10000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

const char *llmq_test_bin(const char *name, int in_tests)
{
    static char path[512];
    const char *dir = getenv(in_tests ? "LLMQ_TEST_BIN_DIR" : "LLMQ_BIN_DIR");
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : ".", name);
    return path;
}

int llmq_test_wait_port_file(const char *path, pid_t pid, long long timeout_ms)
{
    long long deadline = llmq_test_now_ms() + timeout_ms;
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            int port = 0;
            int ok = fscanf(f, "%d", &port) == 1 && port > 0;
            fclose(f);
            if (ok)
                return port;
        }
        if (pid > 0 && waitpid(pid, NULL, WNOHANG) == pid)
            return -1;
        if (llmq_test_now_ms() >= deadline)
            return 0;
        usleep(10000);
    }
}
