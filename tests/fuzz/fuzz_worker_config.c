/* Fuzzes llmq-worker's configuration parser (worker/config.c, compiled into
 * this target): the input is argv, arguments separated by NUL bytes (at most
 * 64), after a first byte whose bits set or clear OPENAI_API_KEY and
 * LLMQ_REDIS_URL. Everything else from the environment that the parser reads
 * (LLMQ_*, OPENAI_*) is cleared once at start, so a run does not depend on
 * the shell that started it.
 *
 * fopen is wrapped at link time (-Wl,--wrap=fopen): the parser opens only
 * --api-key-file, and a fuzzed path must not reach the file system (a FIFO or
 * /dev/stdin would block). "key:TEXT" opens TEXT as the file's content; any
 * other path does not exist. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_util.h"

#define MAX_ARGS 64

extern char **environ;

FILE *__wrap_fopen(const char *path, const char *mode);
FILE *__real_fopen(const char *path, const char *mode);

FILE *__wrap_fopen(const char *path, const char *mode)
{
    if (strncmp(path, "key:", 4) != 0 || strcmp(mode, "r") != 0) {
        errno = ENOENT;
        return NULL;
    }
    size_t len = strlen(path + 4);
    if (len == 0)
        return __real_fopen("/dev/null", "r");
    /* the parser reads and closes the file before it looks at argv again */
    return fmemopen((void *)(path + 4), len, "r");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* unsetenv changes environ: collect the names first */
    char *names[256];
    size_t n = 0;
    for (char **e = environ; *e != NULL && n < 256; e++) {
        if (strncmp(*e, "LLMQ_", 5) != 0 && strncmp(*e, "OPENAI_", 7) != 0)
            continue;
        size_t len = strcspn(*e, "=");
        names[n] = strndup(*e, len);
        if (names[n] != NULL)
            n++;
    }
    for (size_t i = 0; i < n; i++) {
        unsetenv(names[i]);
        free(names[i]);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t sel = fuzz_take_byte(&data, &size);
    if (sel & 1)
        setenv("OPENAI_API_KEY", "sk-fuzz", 1);
    else
        unsetenv("OPENAI_API_KEY");
    if (sel & 2)
        setenv("LLMQ_REDIS_URL", "redis://:pw@127.0.0.1:6380/2", 1);
    else
        unsetenv("LLMQ_REDIS_URL");

    char *buf = fuzz_strndup(data, size);
    if (buf == NULL)
        return 0;
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "llmq-worker";
    for (size_t at = 0; at < size && argc <= MAX_ARGS; at += strlen(buf + at) + 1)
        argv[argc++] = buf + at;
    argv[argc] = NULL;

    struct llmq_worker_config cfg;
    if (llmq_worker_config_parse(&cfg, argc, argv) == 0) {
        if (cfg.n_accounts < 1 || cfg.n_accounts > LLMQ_WORKER_MAX_ACCOUNTS)
            __builtin_trap();
        for (int i = 0; i < cfg.n_accounts; i++)
            if (cfg.accounts[i].api_key == NULL || strlen(cfg.accounts[i].key_id) != 16)
                __builtin_trap();
        char url[2048];
        (void)llmq_worker_request_url(&cfg, "/v1/chat/completions", url, sizeof(url));
    }
    llmq_worker_config_free(&cfg);
    free(buf);
    return 0;
}
