/* The gateway core library runs a gateway without gateway/main.c: this
 * program links llmq_gateway_core whole (every object of it, so a symbol
 * only main.c defined would fail the link, as gw_redis once did) and, in a
 * child process, starts a gateway through service.h on its own loop against
 * a private redis-server. Over real sockets: /healthz, /readyz once Redis is
 * connected, a 401 for a request without a key, a key written to Redis the
 * way `llmq keys create` does opens GET /v1/files, and SIGTERM stops it with
 * exit 0. */
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "auth/gw_key.h"
#include "config.h"
#include "gateway.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "service.h"
#include "testsupport.h"

static void on_term(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

/* The child: a gateway from the library alone; its port goes down fd. */
static int run_gateway(const char *redis_url, const char *account, int fd)
{
    char *argv[] = {"gateway-library-test",
                    "--redis",
                    (char *)redis_url,
                    "--account",
                    (char *)account,
                    "--listen",
                    "127.0.0.1:0",
                    "--log-level",
                    "warn",
                    NULL};
    struct gw_config cfg;
    if (gw_config_parse(&cfg, 9, argv) != 0)
        return 2;
    struct gw gw;
    struct llmq_error err = {0};
    if (gw_init(&gw, &cfg, ev_default_loop(EVFLAG_AUTO), &err) != LLMQ_OK)
        return 2;
    int port = 0;
    int rc = gw_service_start(&gw, &port, &err);
    if (rc != 0) {
        fprintf(stderr, "gw_service_start: %s\n", err.msg);
        return rc;
    }
    if (write(fd, &port, sizeof(port)) != (ssize_t)sizeof(port))
        return 1;
    ev_signal term;
    ev_signal_init(&term, on_term, SIGTERM);
    ev_signal_start(gw.loop, &term);
    ev_run(gw.loop, 0);
    gw_service_stop(&gw);
    gw_clear(&gw);
    return 0;
}

/* One HTTP/1.0 exchange; returns the status and copies the body into body. */
static int http(int port, const char *request, char *body, size_t n)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(send(s, request, strlen(request), 0), (ssize_t)strlen(request));
    static char buf[65536];
    size_t len = 0;
    ssize_t k;
    while (len + 1 < sizeof(buf) && (k = recv(s, buf + len, sizeof(buf) - 1 - len, 0)) > 0)
        len += (size_t)k;
    close(s);
    buf[len] = '\0';
    int status = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", &status), 1);
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(body, n, "%s", b ? b + 4 : "");
    return status;
}

static void test_library_runs_a_gateway(void **state)
{
    (void)state;
    struct llmq_test_redis redis = {0};
    assert_int_equal(llmq_test_redis_start(&redis, NULL), 0);
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "gwlib");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = llmq_test_fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        _exit(run_gateway(redis.url, account, fds[1]));
    }
    close(fds[1]);
    int port = 0;
    assert_int_equal(read(fds[0], &port, sizeof(port)), (ssize_t)sizeof(port));
    close(fds[0]);
    assert_true(port > 0);

    char body[4096];
    assert_int_equal(http(port, "GET /healthz HTTP/1.0\r\n\r\n", body, sizeof(body)), 200);
    assert_string_equal(body, "ok\n");
    int ready = 0;
    for (long long end = llmq_test_now_ms() + 10000; !ready && llmq_test_now_ms() < end;) {
        ready = http(port, "GET /readyz HTTP/1.0\r\n\r\n", body, sizeof(body)) == 200;
        if (!ready)
            usleep(50 * 1000);
    }
    assert_true(ready);
    assert_int_equal(http(port, "GET /v1/files HTTP/1.0\r\n\r\n", body, sizeof(body)), 401);
    assert_non_null(strstr(body, "\"type\":\"invalid_request_error\""));

    /* a key as `llmq keys create` stores it: only its SHA-256 names it */
    char secret[LLMQ_GW_KEY_LEN + 1];
    assert_int_equal(llmq_gw_key_generate(secret, sizeof(secret), NULL), LLMQ_OK);
    char hash[LLMQ_GW_KEY_HASH_LEN + 1], prefix[LLMQ_KEY_PREFIX_MAX];
    char key[LLMQ_KEY_FIXED_MAX + sizeof(hash)];
    llmq_gw_key_hash(secret, strlen(secret), hash);
    assert_int_equal(llmq_account_prefix(account, prefix, sizeof(prefix), NULL), LLMQ_OK);
    assert_int_equal(llmq_key(key, sizeof(key), prefix, LLMQ_KEY_GW_KEY, hash, NULL), LLMQ_OK);
    redisContext *c = redisConnect("127.0.0.1", redis.port);
    assert_true(c != NULL && c->err == 0);
    redisReply *r = redisCommand(c, "HSET %s tenant acme priority high", key);
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
    char req[256];
    snprintf(req, sizeof(req), "GET /v1/files HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n",
             secret);
    assert_int_equal(http(port, req, body, sizeof(body)), 200);
    assert_non_null(strstr(body, "\"object\":\"list\""));

    assert_int_equal(kill(pid, SIGTERM), 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    llmq_test_redis_stop(&redis);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_library_runs_a_gateway)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
