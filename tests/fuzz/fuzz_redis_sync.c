/* Fuzzes the synchronous Redis client code of libllmq against a hostile
 * server: the input (after a selector byte) is everything "Redis" will ever
 * answer, written in advance into one end of a socketpair whose other end is
 * a hiredis context (redisConnectFd). Every command llmq sends is answered
 * by the next reply in the bytes, then by end-of-file. So the code under test
 * parses its replies with the real reader, pipelining and error paths:
 *   selector % 5 == 0  llmq_job_store_wait   (XREVRANGE, HMGET + GET of the
 *                                             results, XREAD of the events
 *                                             stream: stream entries decoded
 *                                             in job_wait.c)
 *                   1  llmq_job_store_result (HMGET, GET of the older key:
 *                                             job_result.c)
 *                   2  llmq_calib_read       (HGETALL into statistics)
 *                   3  llmq_job_store_setting, llmq_job_store_prepare
 *                   4  llmq_job_store_push   (FCALL replies, a missing function and
 *                                             FUNCTION LOAD)
 *
 * The client's end is non-blocking: a write that would block (never with
 * these small commands) fails like a broken connection instead of hanging. */
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jobs/calibration.h"
#include "fuzz_util.h"
#include "jobs/job.h"
#include "jobs/job_store.h"

#define PREFIX "llmq:{acct}:"

static const char *const lines[] = {
    "{\"custom_id\":\"a\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":\"m\",\"input\":\"x\"}}",
    "{\"custom_id\":\"b\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":\"m\",\"input\":\"y\"}}",
};
#define N_JOBS (sizeof(lines) / sizeof(lines[0]))
static struct llmq_job jobs[N_JOBS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    struct llmq_job_defaults d;
    llmq_job_defaults_init(&d);
    for (size_t i = 0; i < N_JOBS; i++) {
        struct llmq_error err = {0};
        if (llmq_job_from_line(lines[i], strlen(lines[i]), &d, &jobs[i], &err) != LLMQ_OK)
            abort(); /* the harness itself is broken */
    }
    return 0;
}

static void on_result(const char *id, int dead, const char *line, void *ud)
{
    (void)dead;
    size_t *seen = ud;
    if (id == NULL || line == NULL)
        __builtin_trap();
    (*seen)++;
}

static void run(redisContext *c, uint8_t sel)
{
    struct llmq_error err = {0};
    switch (sel % 5) {
    case 0: {
        static const char *const ids[] = {"a", "b", "c", "a"};
        size_t seen = 0, done = 0;
        struct llmq_job_waiter w = {
            .on_result = on_result, .ud = &seen, .tick_ms = 1, .max_block_ms = 1};
        llmq_job_store_wait(c, PREFIX, ids, 4, -1, &w, &done, &err);
        if (seen != done || done > 3)
            __builtin_trap(); /* each job reported once */
        break;
    }
    case 1: {
        char *line = NULL;
        int dead = 0;
        if (llmq_job_store_result(c, PREFIX, "a", &line, &dead, &err) == LLMQ_OK)
            free(line);
        break;
    }
    case 2: {
        struct llmq_calib_stats *st = NULL;
        size_t n = 0;
        if (llmq_calib_read(c, "acct", &st, &n, &err) == LLMQ_OK) {
            for (size_t i = 0; i < n; i++)
                (void)llmq_calib_margin_pct(&st[i], 10, 1);
            free(st);
        }
        break;
    }
    case 3:
        (void)llmq_job_store_setting(c, PREFIX, "result_ttl_ms", 7);
        (void)llmq_job_store_prepare(c, PREFIX, &err);
        break;
    default: {
        struct llmq_job_outcome out[N_JOBS];
        (void)llmq_job_store_push(c, PREFIX, jobs, N_JOBS, out, &err);
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t sel = fuzz_take_byte(&data, &size);
    if (fuzz_resp_too_big(data, size, 4096))
        return 0; /* see fuzz_util.h: hiredis would allocate what they declare */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 0;
    /* the replies, then end-of-file (the peer stays open so writes succeed) */
    size_t off = 0;
    while (off < size) {
        ssize_t k = write(sv[1], data + off, size - off);
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    shutdown(sv[1], SHUT_WR);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    redisContext *c = redisConnectFd(sv[0]);
    if (c != NULL && c->err == 0)
        run(c, sel);
    if (c != NULL)
        redisFree(c); /* closes sv[0] */
    else
        close(sv[0]);
    close(sv[1]);
    return 0;
}
