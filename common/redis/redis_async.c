/* A self-healing async Redis connection; see redis_async.h.
 *
 * The handshake (AUTH, SELECT, PING) is pipelined; every step has a callback,
 * and the first error reply marks the attempt failed, so the PING that
 * follows a refused SELECT can never make a connection on database 0 look
 * ready. Every failed attempt records its cause (last_error) and is logged at
 * warn: a new cause at once, the same cause again at most once per
 * RA_LOG_REPEAT_MS, with the number of attempts in between.
 *
 * The command timeout. Redis answers one connection's commands in order, so
 * "the oldest command has waited longer than the bound" is "nothing came from
 * the server for the bound while a command was outstanding". heard_at is the
 * last time something did (any readable event), or the moment a command was
 * sent onto an idle connection; one lazy timer per connection compares it
 * with the bound (command timeout plus the connection's longest block) when
 * it fires and re-arms for the rest, so a reply costs one assignment and a
 * command none; an answer already waiting on the socket when it fires (our
 * own process stood still, not the server) counts as heard. To see reads and
 * sends, the connection is bound to the loop by our own hooks (ac->ev)
 * rather than hiredis's adapters/libev.h. A connection quiet for the bound
 * with nothing outstanding is sent a PING, so a hung server is noticed (and
 * /readyz says so) without traffic too.
 *
 * Nothing of a (re)connect blocks the loop: what would — asking Sentinel for
 * the master, fetching a cluster's slot map (CLUSTER SLOTS, and the library
 * loaded on a new primary), resolving a host name (hiredis 0.14's
 * redisAsyncConnect calls getaddrinfo) — runs in a thread of its own (one
 * at a time per connection, struct ra_resolve), which hands the node's
 * numeric address back through an ev_async; the connect itself then goes to
 * that address. A connection whose address is already numeric and needs no
 * lookup (a plain URL with an IP, a MOVED or ASK naming one) connects at
 * once, as before. */
#include "redis/redis_async.h"

#include <arpa/inet.h>
#include <ev.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/log.h"
#include "redis/cluster.h"
#include "redis/sentinel.h"

enum ra_state { RA_DISCONNECTED = 0, RA_CONNECTING, RA_READY };

/* One connection's watchers (ac->ev.data): hiredis frees it with the
 * context (io_cleanup). ra outlives every context it made. */
struct ra_io {
    redisAsyncContext *ac;
    struct llmq_redis_async *ra;
    ev_io read_w, write_w;
};

/* A call waiting for the connection (llmq_redis_async_defer). */
struct ra_deferred {
    struct ra_deferred *next;
    double due; /* ev_now at which it may run */
    llmq_redis_async_deferred_fn *fn;
    void *ud;
};

struct ra_resolve;

struct llmq_redis_async {
    struct ev_loop *loop;
    struct llmq_redis_url url;
    struct llmq_redis_async_config cfg;
    llmq_redis_async_state_cb *cb;
    void *privdata;
    redisAsyncContext *ac;
    enum ra_state state;
    int closing;
    int64_t backoff_ms; /* the reconnect step (llmq_backoff_reconnect_ms) */
    uint64_t rng;
    ev_timer reconnect_timer;
    ev_timer connect_timer;
    ev_timer command_timer; /* while READY: the command timeout (file comment) */
    double heard_at;        /* ev_now of the server's last sign of life */
    int handshake_failed;   /* an AUTH or SELECT of this attempt was refused */
    int ever_ready;
    char last_error[256];   /* cause of the last failed attempt; "" before any */
    char logged_error[256]; /* the cause last logged, for the rate limit */
    double logged_at;       /* ev_now of that log line */
    int unlogged_failures;  /* failures since then, not logged */
    /* Cluster (cluster.h); all unused on other URLs. */
    struct llmq_cluster *cluster;
    int fixed_addr;               /* an ASK connection: its address is never re-resolved */
    int refresh_map;              /* the next resolve asks the cluster again */
    int keep_addr_once;           /* the next connect goes to url.host:port as set (a MOVED) */
    redisAsyncContext *old_ac;    /* the node left on a MOVED, answering what it was sent */
    ev_timer drain_timer;         /* frees old_ac if it does not finish in time */
    struct ra_deferred *deferred; /* calls waiting for the connection, oldest first */
    ev_timer defer_timer;
    struct llmq_redis_async *ask; /* connection to the target of the last ASK */
    int moving;           /* following a MOVED: the new node's context takes commands before its
                             handshake is answered (they queue behind it) */
    char moved_host[256]; /* a MOVED the reader saw on this connection... */
    int moved_port;       /* ...0: none (followed after the read) */
    /* The lookup off the loop (file comment): resolving runs, resolved is
     * its result once handed back (both under resolve_lock). */
    struct ra_resolve *resolving, *resolved;
    ev_async resolve_w;
};

#define RA_LOG_REPEAT_MS 30000

#define RA_OF(w, member)                                                                           \
    ((struct llmq_redis_async *)((char *)(w)-offsetof(struct llmq_redis_async, member)))

static void start_connect(struct llmq_redis_async *ra);
static struct llmq_redis_async *new_fixed_addr(struct ev_loop *loop,
                                               const struct llmq_redis_url *url,
                                               const struct llmq_redis_async_config *cfg,
                                               struct llmq_error *err);
static void on_drain_timer(struct ev_loop *loop, ev_timer *w, int revents);
static void on_defer_timer(struct ev_loop *loop, ev_timer *w, int revents);
static void follow_seen_move(struct llmq_redis_async *ra);
static void fail_deferred(struct llmq_redis_async *ra);

/* The longest a ready connection may go without a word from the server
 * while a command is outstanding, in seconds. */
static double bound_s(const struct llmq_redis_async *ra)
{
    return (ra->cfg.command_timeout_ms + ra->cfg.block_ms) / 1000.0;
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    struct ra_io *io = w->data;
    struct llmq_redis_async *ra = io->ra;
    if (io->ac == ra->ac)
        ra->heard_at = ev_now(loop);
    redisAsyncHandleRead(io->ac); /* may free io */
    if (ra->moved_port != 0)
        follow_seen_move(ra);
}

/* The reply functions hiredis uses, wrapped so a cluster connection sees
 * every top-level MOVED whatever command it answers (a blocked XREAD whose
 * slot moved away, a plain HGET): the connection then follows it after the
 * read (follow_seen_move), and the command's own callback gets its reply as
 * usual. The reader's privdata (free for its user in hiredis 0.14, handed to
 * each read task) is the connection. */
static redisReplyObjectFunctions *default_reply_fn;

static void *hooked_create_string(const redisReadTask *task, char *str, size_t len)
{
    struct llmq_redis_async *ra = task->privdata;
    if (ra != NULL && task->type == REDIS_REPLY_ERROR && task->parent == NULL) {
        struct llmq_cluster_redirect rd;
        if (llmq_cluster_redirect_parse(str, len, &rd) == LLMQ_REDIRECT_MOVED) {
            snprintf(ra->moved_host, sizeof(ra->moved_host), "%s", rd.host);
            ra->moved_port = rd.port;
            if (ra->cluster != NULL) {
                char host[256];
                int port;
                llmq_cluster_note_moved(ra->cluster, &rd, ra->url.host, host, sizeof(host), &port);
            }
        }
    }
    return default_reply_fn->createString(task, str, len);
}

static void *hooked_create_array(const redisReadTask *task, int n)
{
    return default_reply_fn->createArray(task, n);
}

static void *hooked_create_integer(const redisReadTask *task, long long v)
{
    return default_reply_fn->createInteger(task, v);
}

static void *hooked_create_nil(const redisReadTask *task)
{
    return default_reply_fn->createNil(task);
}

static void hooked_free_object(void *obj)
{
    default_reply_fn->freeObject(obj);
}

static redisReplyObjectFunctions hooked_reply_fn = {hooked_create_string, hooked_create_array,
                                                    hooked_create_integer, hooked_create_nil,
                                                    hooked_free_object};

static void hook_reader(struct llmq_redis_async *ra, redisAsyncContext *ac)
{
    if (ra->cluster == NULL || ac->c.reader == NULL)
        return;
    if (ac->c.reader->fn != &hooked_reply_fn) {
        if (default_reply_fn == NULL)
            default_reply_fn = ac->c.reader->fn;
        ac->c.reader->fn = &hooked_reply_fn;
    }
    ac->c.reader->privdata = ra;
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct ra_io *io = w->data;
    redisAsyncHandleWrite(io->ac); /* may free io */
}

static void io_add_read(void *privdata)
{
    struct ra_io *io = privdata;
    if (!ev_is_active(&io->read_w))
        ev_io_start(io->ra->loop, &io->read_w);
}

static void io_del_read(void *privdata)
{
    struct ra_io *io = privdata;
    ev_io_stop(io->ra->loop, &io->read_w);
}

/* hiredis asks for a write after queueing each command. A command that is
 * the only one outstanding went onto an idle connection: its clock starts
 * now. (A write already under way means this is no new start.) */
static void io_add_write(void *privdata)
{
    struct ra_io *io = privdata;
    if (ev_is_active(&io->write_w))
        return;
    if (io->ac->replies.head == io->ac->replies.tail)
        io->ra->heard_at = ev_now(io->ra->loop);
    ev_io_start(io->ra->loop, &io->write_w);
}

static void io_del_write(void *privdata)
{
    struct ra_io *io = privdata;
    ev_io_stop(io->ra->loop, &io->write_w);
}

static void io_cleanup(void *privdata)
{
    struct ra_io *io = privdata;
    ev_io_stop(io->ra->loop, &io->read_w);
    ev_io_stop(io->ra->loop, &io->write_w);
    free(io);
}

/* Binds ac to ra's loop through the hooks above. Returns 0, or -1 when out
 * of memory (nothing attached). */
static int io_attach(struct llmq_redis_async *ra, redisAsyncContext *ac)
{
    struct ra_io *io = calloc(1, sizeof(*io));
    if (io == NULL)
        return -1;
    io->ac = ac;
    io->ra = ra;
    ev_io_init(&io->read_w, on_readable, ac->c.fd, EV_READ);
    ev_io_init(&io->write_w, on_writable, ac->c.fd, EV_WRITE);
    io->read_w.data = io;
    io->write_w.data = io;
    ac->ev.addRead = io_add_read;
    ac->ev.delRead = io_del_read;
    ac->ev.addWrite = io_add_write;
    ac->ev.delWrite = io_del_write;
    ac->ev.cleanup = io_cleanup;
    ac->ev.data = io;
    hook_reader(ra, ac);
    return 0;
}

static void set_state(struct llmq_redis_async *ra, enum ra_state s)
{
    int was_ready = ra->state == RA_READY;
    ra->state = s;
    int ready = s == RA_READY;
    if (was_ready != ready && !ra->closing) {
        if (ready) /* a loss is logged with its cause by note_failure */
            LLMQ_LOG(LLMQ_LOG_INFO, "%s: redis connected", ra->cfg.name);
        if (ra->cb != NULL)
            ra->cb(ra, ready, ra->privdata);
    }
}

/* Records why this attempt (or the ready connection) failed and logs it
 * (rate-limited, see the file comment). fmt is printf-like. */
static void note_failure(struct llmq_redis_async *ra, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_failure(struct llmq_redis_async *ra, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ra->last_error, sizeof(ra->last_error), fmt, ap);
    va_end(ap);
    if (ra->closing)
        return;
    double now = ev_now(ra->loop);
    if (strcmp(ra->last_error, ra->logged_error) == 0 &&
        (now - ra->logged_at) * 1000 < RA_LOG_REPEAT_MS) {
        ra->unlogged_failures++;
        return;
    }
    if (ra->unlogged_failures > 0)
        LLMQ_LOG(LLMQ_LOG_WARN, "%s: redis %s:%d: %s (%d more failed attempts since the last line)",
                 ra->cfg.name, ra->url.host, ra->url.port, ra->last_error, ra->unlogged_failures);
    else
        LLMQ_LOG(LLMQ_LOG_WARN, "%s: redis %s:%d: %s", ra->cfg.name, ra->url.host, ra->url.port,
                 ra->last_error);
    snprintf(ra->logged_error, sizeof(ra->logged_error), "%s", ra->last_error);
    ra->logged_at = now;
    ra->unlogged_failures = 0;
}

static void schedule_reconnect(struct llmq_redis_async *ra)
{
    ev_timer_stop(ra->loop, &ra->connect_timer);
    ev_timer_stop(ra->loop, &ra->command_timer);
    ev_timer_stop(ra->loop, &ra->defer_timer);
    /* A failure: on a cluster the node may be gone (a failover), so the
     * next attempt asks the cluster where the slot is now. */
    ra->refresh_map = 1;
    ra->keep_addr_once = 0;
    ra->moving = 0;
    set_state(ra, RA_DISCONNECTED);
    fail_deferred(ra);
    if (ra->closing || ev_is_active(&ra->reconnect_timer))
        return;
    /* Jittered: spread many clients after a Redis restart. */
    double delay_s =
        (double)llmq_backoff_reconnect_ms(&ra->backoff_ms, ra->cfg.reconnect_max_ms, &ra->rng) /
        1000.0;
    ev_timer_set(&ra->reconnect_timer, delay_s, 0.0);
    ev_timer_start(ra->loop, &ra->reconnect_timer);
}

/* Gives up on the current context now, whatever it still waits for: the
 * state leaves READY first (so nothing sent from a callback lands on it),
 * then every pending callback runs once with reply NULL (hiredis, in
 * redisAsyncFree; deferred to the end of the running callback when called
 * from one), and a reconnect follows the backoff. The cause was noted. */
static void drop(struct llmq_redis_async *ra)
{
    redisAsyncContext *ac = ra->ac;
    ra->ac = NULL;
    schedule_reconnect(ra);
    if (ac != NULL) {
        ac->data = NULL; /* its callbacks now see a detached context */
        redisAsyncFree(ac);
    }
}

static void arm_command_timer(struct llmq_redis_async *ra, double after_s)
{
    ev_timer_stop(ra->loop, &ra->command_timer);
    ev_timer_set(&ra->command_timer, after_s, 0.0);
    ev_timer_start(ra->loop, &ra->command_timer);
}

/* Whether an answer of the server already waits on the socket. After the
 * process itself stood still (a loaded host, SIGSTOP), this timer and the
 * read that says the server answered become pending in the same loop
 * iteration, and libev may run the timer first: it must not blame the
 * server for our own stall (issue 33). */
static int answer_waiting(const struct llmq_redis_async *ra)
{
    struct pollfd p = {.fd = ra->ac->c.fd, .events = POLLIN};
    return ra->ac->c.fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

/* See the file comment. */
static void on_command_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    struct llmq_redis_async *ra = RA_OF(w, command_timer);
    if (ra->state != RA_READY || ra->ac == NULL)
        return;
    double bound = bound_s(ra), quiet = ev_now(loop) - ra->heard_at;
    if (quiet + 0.001 < bound) { /* heard from since the timer was set */
        arm_command_timer(ra, bound - quiet);
        return;
    }
    if (answer_waiting(ra)) { /* the read runs next: heard now */
        ra->heard_at = ev_now(loop);
        arm_command_timer(ra, bound);
        return;
    }
    if (ra->ac->replies.head == NULL && redisAsyncCommand(ra->ac, NULL, NULL, "PING") == REDIS_OK) {
        arm_command_timer(ra, bound); /* io_add_write started its clock */
        return;
    }
    if (ra->cfg.block_ms > 0)
        note_failure(ra,
                     "no answer within %d ms (a %d ms blocking read plus the %d ms command "
                     "timeout): dropping the connection",
                     ra->cfg.command_timeout_ms + ra->cfg.block_ms, ra->cfg.block_ms,
                     ra->cfg.command_timeout_ms);
    else
        note_failure(ra, "no answer within the command timeout of %d ms: dropping the connection",
                     ra->cfg.command_timeout_ms);
    drop(ra);
}

/* The reply to a handshake step (AUTH, SELECT; privdata names it): the
 * first refusal fails the attempt. Its text is the server's (WRONGPASS,
 * NOAUTH, "ERR DB index is out of range"), which never contains the
 * password. */
static void on_handshake_step(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct llmq_redis_async *ra = ac->data;
    redisReply *r = reply;
    if (r == NULL || ra == NULL || ra->ac != ac || r->type != REDIS_REPLY_ERROR ||
        ra->handshake_failed)
        return;
    ra->handshake_failed = 1;
    note_failure(ra, "%s refused: %s", (const char *)privdata, r->str);
    redisAsyncDisconnect(ac);
}

/* The connection proved usable: the next failure reconnects after the
 * shortest delay and is logged as news. */
static void mark_healthy(struct llmq_redis_async *ra)
{
    ra->backoff_ms = ra->cfg.reconnect_min_ms;
    ra->logged_error[0] = '\0';
    ra->unlogged_failures = 0;
}

static void on_ping(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct llmq_redis_async *ra = privdata;
    redisReply *r = reply;
    if (r == NULL || ac->data == NULL || ra->ac != ac || ra->handshake_failed)
        return; /* the disconnect path handles it */
    if (r->type == REDIS_REPLY_ERROR) {
        ra->handshake_failed = 1;
        note_failure(ra, "PING refused: %s", r->str);
        redisAsyncDisconnect(ac);
        return;
    }
    ev_timer_stop(ra->loop, &ra->connect_timer);
    ra->heard_at = ev_now(ra->loop);
    arm_command_timer(ra, bound_s(ra));
    if (!ra->cfg.setup_by_user)
        mark_healthy(ra);
    ra->ever_ready = 1;
    ra->last_error[0] = '\0';
    ra->moving = 0;
    set_state(ra, RA_READY);
    if (ra->deferred != NULL && ra->state == RA_READY) {
        ev_timer_stop(ra->loop, &ra->defer_timer);
        ev_timer_set(&ra->defer_timer, 0.0, 0.0);
        ev_timer_start(ra->loop, &ra->defer_timer);
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct llmq_redis_async *ra = ac->data;
    if (ra == NULL || status == REDIS_OK || ac != ra->ac)
        return;
    ra->ac = NULL; /* hiredis frees ac after this callback */
    note_failure(ra, "cannot connect: %s", ac->errstr[0] ? ac->errstr : "unknown error");
    schedule_reconnect(ra);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    struct llmq_redis_async *ra = ac->data;
    if (ra == NULL)
        return;
    if (ac == ra->old_ac) { /* the node left on a MOVED is done */
        ra->old_ac = NULL;
        ev_timer_stop(ra->loop, &ra->drain_timer);
        return;
    }
    if (ac != ra->ac)
        return;
    ra->ac = NULL;
    /* A refused handshake step has logged its own cause. */
    if (!ra->handshake_failed) {
        if (ra->state == RA_READY)
            note_failure(ra, "connection lost: %s",
                         status == REDIS_OK ? "closed"
                         : ac->errstr[0]    ? ac->errstr
                                            : "error");
        else
            note_failure(ra, "connection closed during the handshake: %s",
                         status == REDIS_OK ? "closed"
                         : ac->errstr[0]    ? ac->errstr
                                            : "error");
    }
    schedule_reconnect(ra);
}

static void on_connect_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_redis_async *ra = RA_OF(w, connect_timer);
    if (ra->state == RA_READY || ra->ac == NULL)
        return;
    note_failure(ra, "no answer within the connect timeout of %d ms", ra->cfg.timeout_ms);
    drop(ra);
}

static void on_reconnect_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    start_connect(RA_OF(w, reconnect_timer));
}

/* One lookup off the loop: the Sentinel's master, the cluster node of the
 * account's slot, the host's numeric address. The thread owns it while it
 * runs; ra (NULL once ra gave it up, under resolve_lock) takes it back. */
struct ra_resolve {
    struct llmq_redis_async *ra;
    struct ev_loop *loop;
    struct llmq_redis_url url; /* in: ra's; out: host and port of the node */
    int refresh, timeout_ms, sentinel, cluster;
    enum llmq_rc rc;
    char addr[INET6_ADDRSTRLEN]; /* out: url.host as a numeric address */
    char error[256];
};

static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;

static void resolve_free(struct ra_resolve *r)
{
    if (r == NULL)
        return;
    memset(&r->url, 0, sizeof(r->url)); /* the password */
    free(r);
}

/* Whether host is a numeric IPv4 or IPv6 address (connecting to it needs no
 * name lookup). */
static int host_numeric(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* r->url.host's address as hiredis 0.14 would pick it (IPv4 first, then
 * IPv6), numeric, into r->addr. Returns 0, or -1 with r->error. */
static int resolve_host(struct ra_resolve *r)
{
    const char *host = r->url.host;
    if (host_numeric(host)) {
        snprintf(r->addr, sizeof(r->addr), "%s", host);
        return 0;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        hints.ai_family = AF_INET6;
        rc = getaddrinfo(host, NULL, &hints, &res);
    }
    if (rc != 0 || res == NULL) {
        snprintf(r->error, sizeof(r->error), "cannot connect: cannot resolve %s: %s", host,
                 rc != 0 ? gai_strerror(rc) : "no address");
        return -1;
    }
    const void *a = res->ai_family == AF_INET
                        ? (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr
                        : (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
    const char *ok = inet_ntop(res->ai_family, a, r->addr, sizeof(r->addr));
    freeaddrinfo(res);
    if (ok == NULL) {
        snprintf(r->error, sizeof(r->error), "cannot connect: cannot resolve %s", host);
        return -1;
    }
    return 0;
}

/* The thread of a lookup: the blocking steps, then the hand-back (or, ra
 * gone, the free). */
static void *resolve_main(void *arg)
{
    struct ra_resolve *r = arg;
    struct llmq_error err = {0};
    r->rc = LLMQ_OK;
    /* Behind Sentinel, ask for the master again at every (re)connect: that
     * is how a failover is followed. */
    if (r->sentinel && llmq_sentinel_resolve(&r->url, r->timeout_ms, &err) != LLMQ_OK) {
        r->rc = LLMQ_EREDIS;
        snprintf(r->error, sizeof(r->error), "%s",
                 err.msg[0] ? err.msg : "no sentinel knows the master");
    } else if (r->cluster &&
               llmq_cluster_resolve(&r->url, r->refresh, r->timeout_ms, &err) != LLMQ_OK) {
        r->rc = LLMQ_EREDIS;
        snprintf(r->error, sizeof(r->error), "%s",
                 err.msg[0] ? err.msg : "no cluster node answered");
    } else if (resolve_host(r) != 0) {
        r->rc = LLMQ_EREDIS;
    }
    pthread_mutex_lock(&resolve_lock);
    struct llmq_redis_async *ra = r->ra;
    if (ra != NULL) {
        ra->resolving = NULL;
        ra->resolved = r;
        ev_async_send(r->loop, &ra->resolve_w);
    }
    pthread_mutex_unlock(&resolve_lock);
    if (ra == NULL)
        resolve_free(r);
    return NULL;
}

/* Gives up ra's lookups: a running one frees itself when it ends, a result
 * not taken yet is freed now. */
static void resolve_abandon(struct llmq_redis_async *ra)
{
    pthread_mutex_lock(&resolve_lock);
    if (ra->resolving != NULL)
        ra->resolving->ra = NULL;
    ra->resolving = NULL;
    struct ra_resolve *done = ra->resolved;
    ra->resolved = NULL;
    pthread_mutex_unlock(&resolve_lock);
    resolve_free(done);
}

static void connect_to(struct llmq_redis_async *ra, const char *addr);

/* The lookup's result, handed back to the loop. */
static void on_resolved(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_redis_async *ra = RA_OF(w, resolve_w);
    pthread_mutex_lock(&resolve_lock);
    struct ra_resolve *r = ra->resolved;
    ra->resolved = NULL;
    pthread_mutex_unlock(&resolve_lock);
    if (r == NULL || ra->closing) {
        resolve_free(r);
        return;
    }
    if (r->rc != LLMQ_OK) {
        note_failure(ra, "%s", r->error);
        resolve_free(r);
        schedule_reconnect(ra);
        return;
    }
    snprintf(ra->url.host, sizeof(ra->url.host), "%s", r->url.host);
    ra->url.port = r->url.port;
    char addr[INET6_ADDRSTRLEN];
    snprintf(addr, sizeof(addr), "%s", r->addr);
    resolve_free(r);
    ra->refresh_map = 0;
    ra->keep_addr_once = 0;
    connect_to(ra, addr);
}

/* Starts the lookup of ra's node in a thread (file comment). */
static void start_resolve(struct llmq_redis_async *ra, int sentinel, int cluster)
{
    resolve_abandon(ra); /* an older one's answer is of no use now */
    struct ra_resolve *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        note_failure(ra, "cannot look the server up: out of memory");
        schedule_reconnect(ra);
        return;
    }
    r->ra = ra;
    r->loop = ra->loop;
    r->url = ra->url;
    r->refresh = ra->refresh_map;
    r->timeout_ms = ra->cfg.timeout_ms;
    r->sentinel = sentinel;
    r->cluster = cluster;
    pthread_attr_t attr;
    pthread_t t;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&resolve_lock);
        ra->resolving = r;
        rc = pthread_create(&t, &attr, resolve_main, r);
        if (rc != 0)
            ra->resolving = NULL;
        pthread_mutex_unlock(&resolve_lock);
        pthread_attr_destroy(&attr);
    }
    if (rc != 0) {
        resolve_free(r);
        note_failure(ra, "cannot look the server up: no thread (%s)", strerror(rc));
        schedule_reconnect(ra);
    }
}

static void start_connect(struct llmq_redis_async *ra)
{
    /* Behind Sentinel, the master is asked for at every (re)connect; on a
     * cluster, the node serving the account's slot (cluster.h): asked of the
     * cluster again after a failure, not after a MOVED (which named the
     * node), never for an ASK connection (whose node is the target). Either,
     * or a host name, is looked up off the loop. */
    int sentinel = ra->url.n_sentinels > 0;
    int cluster = ra->cluster != NULL && !ra->fixed_addr && !ra->keep_addr_once;
    if (sentinel || cluster || !host_numeric(ra->url.host)) {
        start_resolve(ra, sentinel, cluster);
        return;
    }
    resolve_abandon(ra);
    ra->refresh_map = 0;
    ra->keep_addr_once = 0;
    connect_to(ra, ra->url.host);
}

/* Connects to addr (numeric: nothing blocks) at ra->url's port. */
static void connect_to(struct llmq_redis_async *ra, const char *addr)
{
    redisAsyncContext *ac = redisAsyncConnect(addr, ra->url.port);

    if (ac == NULL || ac->err) {
        note_failure(ra, "cannot connect: %s", ac != NULL ? ac->errstr : "out of memory");
        if (ac != NULL)
            redisAsyncFree(ac);
        schedule_reconnect(ra);
        return;
    }
    ac->data = ra;
    if (io_attach(ra, ac) != 0) {
        ac->data = NULL;
        redisAsyncFree(ac);
        note_failure(ra, "cannot attach the connection to the event loop");
        schedule_reconnect(ra);
        return;
    }
    ra->ac = ac;
    ra->state = RA_CONNECTING;
    ra->handshake_failed = 0;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    /* Each step checked (on_handshake_step): a refused SELECT must never
     * leave the connection on database 0. */
    int sent = REDIS_OK;
    if (ra->url.password[0] != '\0') {
        if (ra->url.user[0] != '\0')
            sent = redisAsyncCommand(ac, on_handshake_step, (void *)"AUTH", "AUTH %s %s",
                                     ra->url.user, ra->url.password);
        else
            sent = redisAsyncCommand(ac, on_handshake_step, (void *)"AUTH", "AUTH %s",
                                     ra->url.password);
    }
    if (sent == REDIS_OK && ra->url.db != 0)
        sent = redisAsyncCommand(ac, on_handshake_step, (void *)"SELECT", "SELECT %d", ra->url.db);
    if (sent == REDIS_OK)
        sent = redisAsyncCommand(ac, on_ping, ra, "PING");
    if (sent != REDIS_OK) {
        /* Nothing half-set-up may be used: drop this attempt. */
        ra->handshake_failed = 1;
        note_failure(ra, "cannot send the handshake");
        redisAsyncDisconnect(ac);
    }
    ev_timer_set(&ra->connect_timer, ra->cfg.timeout_ms / 1000.0, 0.0);
    ev_timer_start(ra->loop, &ra->connect_timer);
}

/* The node left on a MOVED did not finish what it was sent in time: its
 * pending callbacks run now with reply NULL. */
static void on_drain_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct llmq_redis_async *ra = RA_OF(w, drain_timer);
    redisAsyncContext *old = ra->old_ac;
    ra->old_ac = NULL;
    if (old != NULL) {
        old->data = NULL;
        redisAsyncFree(old);
    }
}

/* Runs every deferred call that is due while the connection is ready, and
 * re-arms for the next. */
static void on_defer_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    struct llmq_redis_async *ra = RA_OF(w, defer_timer);
    double now = ev_now(loop), next = -1;
    struct ra_deferred **pp = &ra->deferred;
    while (*pp != NULL) {
        struct ra_deferred *d = *pp;
        if (ra->state != RA_READY || ra->ac == NULL)
            return; /* a call below dropped it: the rest wait or fail with it */
        if (d->due > now + 0.0005) {
            if (next < 0 || d->due < next)
                next = d->due;
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        d->fn(ra->ac, d->ud); /* may defer again: appended at the end */
        free(d);
    }
    if (next >= 0 && ra->state == RA_READY) {
        ev_timer_set(&ra->defer_timer, next - now, 0.0);
        ev_timer_start(loop, &ra->defer_timer);
    }
}

static void fail_deferred(struct llmq_redis_async *ra)
{
    while (ra->deferred != NULL) {
        struct ra_deferred *d = ra->deferred;
        ra->deferred = d->next;
        d->fn(NULL, d->ud);
        free(d);
    }
}

/* Follows the MOVED the reader saw on this connection. */
static void follow_seen_move(struct llmq_redis_async *ra)
{
    char host[256];
    snprintf(host, sizeof(host), "%s", ra->moved_host[0] ? ra->moved_host : ra->url.host);
    int port = ra->moved_port;
    ra->moved_port = 0;
    llmq_redis_async_follow(ra, host, port);
}

void llmq_redis_async_follow(struct llmq_redis_async *ra, const char *host, int port)
{
    if (ra->closing || ra->cluster == NULL || ra->fixed_addr)
        return;
    if (ra->url.port == port && strcmp(ra->url.host, host) == 0)
        return; /* there already, or on the way */
    LLMQ_LOG(LLMQ_LOG_INFO, "%s: redis slot moved from %s:%d to %s:%d: following", ra->cfg.name,
             ra->url.host, ra->url.port, host, port);
    llmq_cluster_count_moved();
    snprintf(ra->url.host, sizeof(ra->url.host), "%s", host);
    ra->url.port = port;
    ev_timer_stop(ra->loop, &ra->reconnect_timer);
    ev_timer_stop(ra->loop, &ra->connect_timer);
    ev_timer_stop(ra->loop, &ra->command_timer);
    ev_timer_stop(ra->loop, &ra->defer_timer);
    redisAsyncContext *ac = ra->ac;
    ra->ac = NULL;
    set_state(ra, RA_CONNECTING); /* not ready until the new node answers */
    if (ac != NULL) {
        if (ra->old_ac != NULL) { /* an older move still draining: cut it */
            redisAsyncContext *older = ra->old_ac;
            ra->old_ac = NULL;
            older->data = NULL;
            redisAsyncFree(older);
        }
        /* What was sent there still gets its answer (a MOVED, for the
         * calls on the account's slot: sent again by their runners);
         * hiredis refuses new commands on it and closes it after. */
        ra->old_ac = ac;
        ev_timer_stop(ra->loop, &ra->drain_timer);
        ev_timer_set(&ra->drain_timer, bound_s(ra), 0.0);
        ev_timer_start(ra->loop, &ra->drain_timer);
        redisAsyncDisconnect(ac); /* may close it at once (on_disconnect) */
    }
    ra->keep_addr_once = 1;
    start_connect(ra);
    /* A planned move, not a failure: what callers send meanwhile waits in
     * the new context behind its handshake instead of being refused (a
     * gateway would answer 503 for a move of a few milliseconds). */
    ra->moving = ra->ac != NULL && ra->state == RA_CONNECTING;
}

int llmq_redis_async_defer(struct llmq_redis_async *ra, int delay_ms,
                           llmq_redis_async_deferred_fn *fn, void *ud)
{
    struct ra_deferred *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return -1;
    d->due = ev_now(ra->loop) + (delay_ms > 0 ? delay_ms / 1000.0 : 0.0);
    d->fn = fn;
    d->ud = ud;
    struct ra_deferred **pp = &ra->deferred;
    while (*pp != NULL)
        pp = &(*pp)->next;
    *pp = d;
    if (ra->state == RA_READY) {
        /* the earliest due among the waiting calls */
        double first = d->due;
        for (struct ra_deferred *e = ra->deferred; e != NULL; e = e->next)
            if (e->due < first)
                first = e->due;
        double after = first - ev_now(ra->loop);
        ev_timer_stop(ra->loop, &ra->defer_timer);
        ev_timer_set(&ra->defer_timer, after > 0 ? after : 0.0, 0.0);
        ev_timer_start(ra->loop, &ra->defer_timer);
    }
    return 0;
}

struct llmq_redis_async *llmq_redis_async_owner(const redisAsyncContext *ac)
{
    if (ac == NULL || ac->ev.cleanup != io_cleanup || ac->ev.data == NULL)
        return NULL;
    return ((struct ra_io *)ac->ev.data)->ra;
}

struct llmq_cluster *llmq_redis_async_cluster(const struct llmq_redis_async *ra)
{
    return ra != NULL ? ra->cluster : NULL;
}

struct llmq_redis_async *llmq_redis_async_asking(struct llmq_redis_async *ra, const char *host,
                                                 int port)
{
    if (ra->closing || ra->cluster == NULL)
        return NULL;
    if (ra->ask != NULL && ra->ask->url.port == port && strcmp(ra->ask->url.host, host) == 0)
        return ra->ask;
    struct llmq_redis_url u = ra->url;
    snprintf(u.host, sizeof(u.host), "%s", host);
    u.port = port;
    struct llmq_redis_async_config cfg = ra->cfg;
    cfg.name = "redis-ask";
    struct llmq_error err = {0};
    struct llmq_redis_async *ask = new_fixed_addr(ra->loop, &u, &cfg, &err);
    memset(&u, 0, sizeof(u)); /* the password */
    if (ask == NULL)
        return NULL;
    llmq_redis_async_free(ra->ask); /* a migration to another node before: done */
    ra->ask = ask;
    return ask;
}

struct ev_loop *llmq_redis_async_loop(const struct llmq_redis_async *ra)
{
    return ra->loop;
}

static struct llmq_redis_async *async_new(struct ev_loop *loop, const struct llmq_redis_url *url,
                                          const struct llmq_redis_async_config *cfg,
                                          llmq_redis_async_state_cb *cb, void *privdata,
                                          int fixed_addr, struct llmq_error *err);

struct llmq_redis_async *llmq_redis_async_new(struct ev_loop *loop,
                                              const struct llmq_redis_url *url,
                                              const struct llmq_redis_async_config *cfg,
                                              llmq_redis_async_state_cb *cb, void *privdata,
                                              struct llmq_error *err)
{
    return async_new(loop, url, cfg, cb, privdata, 0, err);
}

static struct llmq_redis_async *new_fixed_addr(struct ev_loop *loop,
                                               const struct llmq_redis_url *url,
                                               const struct llmq_redis_async_config *cfg,
                                               struct llmq_error *err)
{
    return async_new(loop, url, cfg, NULL, NULL, 1, err);
}

static struct llmq_redis_async *async_new(struct ev_loop *loop, const struct llmq_redis_url *url,
                                          const struct llmq_redis_async_config *cfg,
                                          llmq_redis_async_state_cb *cb, void *privdata,
                                          int fixed_addr, struct llmq_error *err)
{
    if (loop == NULL || url == NULL || cfg == NULL) {
        llmq_error_set(err, LLMQ_EINVAL,
                       "redis: no %s (a connection needs a loop, a url and a config)",
                       loop == NULL  ? "loop"
                       : url == NULL ? "url"
                                     : "config");
        return NULL;
    }
    struct llmq_redis_async *ra = calloc(1, sizeof(*ra));
    if (ra == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "redis: out of memory");
        return NULL;
    }
    ra->loop = loop;
    ra->url = *url;
    ra->cfg = *cfg;
    if (ra->cfg.timeout_ms <= 0)
        ra->cfg.timeout_ms = 2000;
    if (ra->cfg.command_timeout_ms <= 0)
        ra->cfg.command_timeout_ms = LLMQ_REDIS_COMMAND_TIMEOUT_MS_DEFAULT;
    if (ra->cfg.block_ms < 0)
        ra->cfg.block_ms = 0;
    if (ra->cfg.reconnect_min_ms <= 0)
        ra->cfg.reconnect_min_ms = 100;
    if (ra->cfg.reconnect_max_ms <= 0)
        ra->cfg.reconnect_max_ms = 5000;
    if (ra->cfg.name == NULL)
        ra->cfg.name = "redis";
    ra->cb = cb;
    ra->privdata = privdata;
    ra->cluster = llmq_cluster_of(url);
    ra->fixed_addr = fixed_addr;
    if (llmq_redis_url_is_cluster(url) && ra->cluster == NULL) {
        llmq_error_set(err, LLMQ_EINVAL, "redis: more than %d clusters in one process",
                       LLMQ_CLUSTERS_MAX);
        free(ra);
        return NULL;
    }
    ra->backoff_ms = ra->cfg.reconnect_min_ms;
    llmq_rng_seed(&ra->rng, (uint64_t)(uintptr_t)ra ^ (uint64_t)(ev_now(loop) * 1000));
    ev_timer_init(&ra->reconnect_timer, on_reconnect_timer, 0.0, 0.0);
    ev_timer_init(&ra->connect_timer, on_connect_timeout, 0.0, 0.0);
    ev_timer_init(&ra->command_timer, on_command_timer, 0.0, 0.0);
    ev_timer_init(&ra->drain_timer, on_drain_timer, 0.0, 0.0);
    ev_timer_init(&ra->defer_timer, on_defer_timer, 0.0, 0.0);
    ev_async_init(&ra->resolve_w, on_resolved);
    ev_async_start(loop, &ra->resolve_w);
    ev_unref(loop); /* a lookup's hand-back keeps no loop running */
    start_connect(ra);
    return ra;
}

redisAsyncContext *llmq_redis_async_context(struct llmq_redis_async *ra)
{
    if (ra->state == RA_READY || (ra->moving && !ra->handshake_failed))
        return ra->ac;
    return NULL;
}

int llmq_redis_async_ready(const struct llmq_redis_async *ra)
{
    return ra->state == RA_READY;
}

int llmq_redis_async_ever_ready(const struct llmq_redis_async *ra)
{
    return ra->ever_ready;
}

const char *llmq_redis_async_last_error(const struct llmq_redis_async *ra)
{
    return ra->state == RA_READY ? "" : ra->last_error;
}

void llmq_redis_async_setup_done(struct llmq_redis_async *ra)
{
    if (ra->state == RA_READY)
        mark_healthy(ra);
}

void llmq_redis_async_reset(struct llmq_redis_async *ra)
{
    if (ra->ac == NULL)
        return;
    note_failure(ra, "dropped after a reply its user could not use; reconnecting");
    drop(ra);
}

void llmq_redis_async_free(struct llmq_redis_async *ra)
{
    if (ra == NULL)
        return;
    ra->closing = 1;
    ev_timer_stop(ra->loop, &ra->reconnect_timer);
    ev_timer_stop(ra->loop, &ra->connect_timer);
    ev_timer_stop(ra->loop, &ra->command_timer);
    ev_timer_stop(ra->loop, &ra->drain_timer);
    ev_timer_stop(ra->loop, &ra->defer_timer);
    resolve_abandon(ra);
    ev_ref(ra->loop);
    ev_async_stop(ra->loop, &ra->resolve_w);
    fail_deferred(ra);
    llmq_redis_async_free(ra->ask);
    ra->ask = NULL;
    if (ra->old_ac != NULL) {
        redisAsyncContext *old = ra->old_ac;
        ra->old_ac = NULL;
        old->data = NULL;
        redisAsyncFree(old);
    }
    if (ra->ac != NULL) {
        redisAsyncContext *ac = ra->ac;
        ra->ac = NULL;
        redisAsyncFree(ac); /* pending callbacks run now with reply NULL */
    }
    free(ra);
}
