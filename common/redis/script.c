/* Running the embedded scripts with EVALSHA, and reloading them on NOSCRIPT.
 *
 * Async runs keep a private copy of their arguments until the reply comes, so
 * a NOSCRIPT reply can be answered with EVAL of the same arguments; the user
 * callback then runs with that second reply. */
#include "redis/script.h"

#include "redis/sentinel.h"

#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char script_shas[LLMQ_SCRIPT_COUNT][41];
static pthread_once_t script_shas_once = PTHREAD_ONCE_INIT;

static void compute_shas(void)
{
    for (int i = 0; i < LLMQ_SCRIPT_COUNT; i++) {
        unsigned char md[SHA_DIGEST_LENGTH];
        SHA1((const unsigned char *)llmq_scripts[i].text, strlen(llmq_scripts[i].text), md);
        for (int j = 0; j < SHA_DIGEST_LENGTH; j++)
            snprintf(&script_shas[i][j * 2], 3, "%02x", md[j]);
    }
}

const char *llmq_script_sha(enum llmq_script_id id)
{
    pthread_once(&script_shas_once, compute_shas);
    return script_shas[id];
}

static int is_noscript(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Builds the argv of "EVALSHA sha nkeys args..." (or EVAL text ...) into
 * caller-provided arrays of size argc + 3. */
static void build_command(enum llmq_script_id id, int use_text, char *nkeys_buf, int nkeys,
                          int argc, const char **argv, const size_t *argvlen,
                          const char **out, size_t *outlen)
{
    snprintf(nkeys_buf, 16, "%d", nkeys);
    out[0] = use_text ? "EVAL" : "EVALSHA";
    out[1] = use_text ? llmq_scripts[id].text : llmq_script_sha(id);
    out[2] = nkeys_buf;
    for (int i = 0; i < 3; i++)
        outlen[i] = strlen(out[i]);
    for (int i = 0; i < argc; i++) {
        out[3 + i] = argv[i];
        outlen[3 + i] = argvlen ? argvlen[i] : strlen(argv[i]);
    }
}

redisReply *llmq_script_run(redisContext *c, enum llmq_script_id id, int nkeys, int argc,
                            const char **argv, const size_t *argvlen, struct llmq_error *err)
{
    const char **cmd = malloc(sizeof(*cmd) * (size_t)(argc + 3));
    size_t *cmdlen = malloc(sizeof(*cmdlen) * (size_t)(argc + 3));
    char nkeys_buf[16];
    redisReply *r = NULL;
    if (cmd == NULL || cmdlen == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "script %s: out of memory", llmq_scripts[id].name);
        goto out;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        build_command(id, attempt, nkeys_buf, nkeys, argc, argv, argvlen, cmd, cmdlen);
        r = redisCommandArgv(c, argc + 3, cmd, cmdlen);
        if (r != NULL && r->type == REDIS_REPLY_ERROR && llmq_sentinel_is_stale_error(r->str)) {
            /* A replica now (failover): report a connection error so the
             * caller reconnects, which asks Sentinel for the new master. */
            freeReplyObject(r);
            r = NULL;
            c->err = REDIS_ERR_OTHER;
            snprintf(c->errstr, sizeof(c->errstr), "server is a replica now (READONLY)");
            break;
        }
        if (!is_noscript(r))
            break;
        freeReplyObject(r);
        r = NULL;
    }
    if (r == NULL)
        llmq_error_set(err, LLMQ_EREDIS, "script %s: %s", llmq_scripts[id].name,
                       c->err ? c->errstr : "no reply");
out:
    free(cmd);
    free(cmdlen);
    return r;
}

enum llmq_rc llmq_script_append(redisContext *c, enum llmq_script_id id, int nkeys, int argc,
                                const char **argv, const size_t *argvlen)
{
    const char *cmd[argc + 3];
    size_t cmdlen[argc + 3];
    char nkeys_buf[16];
    build_command(id, 0, nkeys_buf, nkeys, argc, argv, argvlen, cmd, cmdlen);
    return redisAppendCommandArgv(c, argc + 3, cmd, cmdlen) == REDIS_OK ? LLMQ_OK : LLMQ_EREDIS;
}

enum llmq_rc llmq_script_load_all(redisContext *c, struct llmq_error *err)
{
    for (int i = 0; i < LLMQ_SCRIPT_COUNT; i++) {
        redisReply *r = redisCommand(c, "SCRIPT LOAD %s", llmq_scripts[i].text);
        if (r == NULL || r->type != REDIS_REPLY_STRING) {
            enum llmq_rc rc = llmq_error_set(err, LLMQ_EREDIS, "SCRIPT LOAD %s: %s",
                                             llmq_scripts[i].name,
                                             r && r->type == REDIS_REPLY_ERROR ? r->str
                                             : c->err                          ? c->errstr
                                                                               : "bad reply");
            if (r != NULL)
                freeReplyObject(r);
            return rc;
        }
        freeReplyObject(r);
    }
    return LLMQ_OK;
}

/* One async run: the arguments copied into one allocation, kept until the
 * final reply so NOSCRIPT can be retried with EVAL. */
struct async_run {
    enum llmq_script_id id;
    int nkeys;
    int argc;
    int retried;
    llmq_script_cb *cb;
    void *privdata;
    const char **argv;
    size_t *argvlen;
};

static void async_run_reply(redisAsyncContext *ac, void *reply, void *privdata);

static int async_run_send(redisAsyncContext *ac, struct async_run *run, int use_text)
{
    const char *cmd[run->argc + 3];
    size_t cmdlen[run->argc + 3];
    char nkeys_buf[16];
    build_command(run->id, use_text, nkeys_buf, run->nkeys, run->argc, run->argv, run->argvlen,
                  cmd, cmdlen);
    return redisAsyncCommandArgv(ac, async_run_reply, run, run->argc + 3, cmd, cmdlen);
}

static void async_run_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct async_run *run = privdata;
    redisReply *r = reply;
    if (r != NULL && r->type == REDIS_REPLY_ERROR && llmq_sentinel_is_stale_error(r->str)) {
        /* A replica now (failover): drop the connection so it is made
         * again to the new master, and answer as for a lost connection. */
        redisAsyncDisconnect(ac);
        r = NULL;
    }
    if (is_noscript(r) && !run->retried) {
        run->retried = 1;
        if (async_run_send(ac, run, 1) == REDIS_OK)
            return;
        r = NULL; /* could not resend: report as a connection failure */
    }
    run->cb(ac, r, run->privdata);
    free(run);
}

enum llmq_rc llmq_script_run_async(redisAsyncContext *ac, enum llmq_script_id id, int nkeys,
                                   int argc, const char **argv, const size_t *argvlen,
                                   llmq_script_cb *cb, void *privdata)
{
    size_t total = sizeof(struct async_run) + (size_t)argc * (sizeof(char *) + sizeof(size_t));
    for (int i = 0; i < argc; i++)
        total += (argvlen ? argvlen[i] : strlen(argv[i])) + 1;
    struct async_run *run = malloc(total);
    if (run == NULL)
        return LLMQ_ENOMEM;
    *run = (struct async_run){.id = id, .nkeys = nkeys, .argc = argc, .cb = cb,
                              .privdata = privdata};
    run->argv = (const char **)(run + 1);
    run->argvlen = (size_t *)(run->argv + argc);
    char *data = (char *)(run->argvlen + argc);
    for (int i = 0; i < argc; i++) {
        size_t len = argvlen ? argvlen[i] : strlen(argv[i]);
        memcpy(data, argv[i], len);
        data[len] = '\0';
        run->argv[i] = data;
        run->argvlen[i] = len;
        data += len + 1;
    }
    if (async_run_send(ac, run, 0) != REDIS_OK) {
        free(run);
        return LLMQ_EREDIS;
    }
    return LLMQ_OK;
}
