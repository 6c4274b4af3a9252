/* Running the llmq CLI from a test: fork + exec with stdout and stderr
 * captured in files, the account and Redis URL in the environment.
 * Header-only so each test stays one executable. */
#ifndef LLMQ_TEST_JOBS_CLI_RUN_H
#define LLMQ_TEST_JOBS_CLI_RUN_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data_files.h"
#include "testsupport.h"

struct cli_run {
    int status; /* exit status, or 128 + signal */
    char *out;  /* stdout (new, NUL-terminated) */
    char *err;  /* stderr (new) */
};

static inline char *cli_slurp(const char *path)
{
    char *s = llmq_test_read_file(path, NULL);
    return s != NULL ? s : strdup("");
}

/* Starts `llmq ARGS...` (argv NULL-terminated, argv[0] ignored) for account;
 * returns its pid. Output goes to files named after the pid (cli_finish). */
static inline pid_t cli_start(const char *account, const char *const *argv)
{
    char out[64], err[64];
    pid_t pid = llmq_test_fork();
    if (pid == 0) {
        snprintf(out, sizeof(out), "/tmp/llmq-cli-%d.out", (int)getpid());
        snprintf(err, sizeof(err), "/tmp/llmq-cli-%d.err", (int)getpid());
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fo, 1);
        dup2(fe, 2);
        setenv("LLMQ_REDIS_URL", llmq_test_redis_url(), 1);
        setenv("LLMQ_ACCOUNT", account, 1);
        const char *bin = llmq_test_bin("llmq", 0);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Waits for pid and collects its status and output (free with cli_free). */
static inline struct cli_run cli_finish(pid_t pid)
{
    struct cli_run r = {0};
    int st = 0;
    char out[64], err[64];
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    snprintf(out, sizeof(out), "/tmp/llmq-cli-%d.out", (int)pid);
    snprintf(err, sizeof(err), "/tmp/llmq-cli-%d.err", (int)pid);
    r.out = cli_slurp(out);
    r.err = cli_slurp(err);
    unlink(out);
    unlink(err);
    return r;
}

static inline struct cli_run cli_run(const char *account, const char *const *argv)
{
    return cli_finish(cli_start(account, argv));
}

static inline void cli_free(struct cli_run *r)
{
    free(r->out);
    free(r->err);
}

static inline size_t cli_count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#endif
